/**
 * `migrate` as an operator runs it against a node's saved listing (`--rules`, no root): every cause
 * produces its group, in both directions, on this program's rendered rules of each mode and on
 * upstream's own iptables and nftables layouts (the stand-in written from its code), and a listing
 * that matches the target says nothing changes (no false difference).
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { runOnce } from "../support/program.ts";
import {
  type Upstream,
  upstreamIptablesSave,
  upstreamNftablesSync,
  type UpstreamPort,
} from "../support/upstream_kube_proxy.ts";

const run = runOnce;

const NODE = `apiVersion: v1
kind: Node
metadata: { name: n1 }
status: { addresses: [{ type: InternalIP, address: 192.168.0.2 }] }
`;
const WEB = `---
apiVersion: v1
kind: Service
metadata: { namespace: shop, name: web }
spec:
  type: NodePort
  clusterIP: 172.30.0.10
  clusterIPs: [172.30.0.10]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: shop, name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: [10.180.1.2], conditions: { ready: true }, nodeName: n1 }
  - { addresses: [10.180.2.2], conditions: { ready: true }, nodeName: n2 }
`;
const CACHE = `---
apiVersion: v1
kind: Service
metadata: { namespace: default, name: cache, annotations: { kube-router.io/service.scheduler: sh } }
spec:
  clusterIP: 172.30.0.11
  clusterIPs: [172.30.0.11]
  ports: [{ name: p, protocol: TCP, port: 6379 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: default, name: cache-1, labels: { kubernetes.io/service-name: cache } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 6379 }]
endpoints:
  - { addresses: [10.180.1.3], conditions: { ready: true }, nodeName: n1 }
`;
const CIDR = "--cluster-cidr=10.180.0.0/16";

/** Writes the objects and (optionally) a listing in a fresh directory; runs `fn` with their paths. */
async function withFiles(
  objects: string,
  fn: (objects: string, dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "kpd-migrate-" });
  try {
    await Deno.writeTextFile(`${dir}/objects.yaml`, objects);
    await fn(`--source=file:${dir}/objects.yaml`, dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Renders `mode`'s rules for the objects into `dir/mode.rules`; returns the `--rules` flag. */
async function rendered(src: string, dir: string, mode: string, extra: string[] = []): Promise<string> {
  const r = await run(["render", src, `--proxy-mode=${mode}`, CIDR, ...extra]);
  assertEquals(r.code, 0, r.stderr);
  await Deno.writeTextFile(`${dir}/${mode}.rules`, r.stdout);
  return `--rules=${dir}/${mode}.rules`;
}

/** `migrate --output=json`: the exit code and each group's cause with its Services. */
async function groups(args: string[]): Promise<{ code: number; groups: Array<[string, string[]]> }> {
  const r = await run(["migrate", ...args, CIDR, "--output=json"]);
  assert(r.code === 0 || r.code === 1, r.stderr);
  const report = JSON.parse(r.stdout);
  assertEquals(report.schema, "kube-proxy-deno.migrate/v1");
  assertEquals(report.unanswered, [], "every connection answered by both datapaths");
  return {
    code: r.code,
    groups: report.groups.map((g: { cause: string; services: string[] }) => [g.cause, g.services]),
  };
}

Deno.test("migrate iptables <-> nftables: loopback NodePorts, the scheduler, unserved ports; the same groups in reverse", async () => {
  await withFiles(NODE + WEB + CACHE, async (src, dir) => {
    const there = await groups(["--to=nftables", await rendered(src, dir, "iptables"), src]);
    assertEquals(there, {
      code: 1,
      groups: [
        ["unserved-ports", ["(every Service)"]],
        ["localhost-nodeport", ["shop/web"]],
        ["scheduler", ["default/cache"]],
      ],
    });
    const back = await groups(["--to=iptables", await rendered(src, dir, "nftables"), src]);
    assertEquals(back, there);
    // The text says what keeps today's behaviour.
    const text = await run(["migrate", "--to=nftables", `--rules=${dir}/iptables.rules`, src, CIDR]);
    assertEquals(text.code, 1);
    assertMatch(
      text.stdout,
      /NodePorts on the loopback address \(1 Service\):\n {2}shop\/web p 80\/TCP IPv4, this node on 127\.0\.0\.1: DNAT to 10\.180\.1\.2:8080, 10\.180\.2\.2:8080 \(masqueraded\) -> not a service/,
    );
    assertMatch(
      text.stdout,
      /--nodeport-addresses=primary,localhost.*KubeProxyNFTablesLocalhostNodePorts=true/,
    );
    // Keeping it as the advice says: the loopback NodePort is no longer a difference.
    const kept = await groups([
      "--to=nftables",
      `--rules=${dir}/iptables.rules`,
      src,
      "--nodeport-addresses=primary,localhost",
      "--feature-gates=KubeProxyNFTablesLocalhostNodePorts=true",
    ]);
    assert(!kept.groups.some(([c]) => c === "localhost-nodeport"), JSON.stringify(kept));
  });
});

Deno.test("migrate ipvs -> nftables: the scheduler of every Service, the INVALID drop, unserved ports", async () => {
  await withFiles(NODE + WEB, async (src, dir) => {
    assertEquals(await groups(["--to=nftables", await rendered(src, dir, "ipvs"), src]), {
      code: 1,
      groups: [
        ["invalid-drop", ["(every Service)"]],
        ["unserved-ports", ["(every Service)"]],
        ["scheduler", ["shop/web"]],
      ],
    });
    // With conntrack liberal nothing is INVALID for being out of window: that group goes.
    const liberal = await groups([
      "--to=nftables",
      `--rules=${dir}/ipvs.rules`,
      src,
      "--conntrack-tcp-be-liberal",
    ]);
    assert(!liberal.groups.some(([c]) => c === "invalid-drop"), JSON.stringify(liberal));
  });
});

Deno.test("migrate within a mode: a configuration change (--masquerade-all) names the connections whose source it changes", async () => {
  await withFiles(NODE + WEB, async (src, dir) => {
    const r = await groups(["--to=iptables", await rendered(src, dir, "iptables"), src, "--masquerade-all"]);
    assertEquals(r, { code: 1, groups: [["masquerade", ["shop/web"]]] });
    assertEquals(
      (await groups(["--to=iptables", `--rules=${dir}/iptables.rules`, src])).code,
      0,
      "same config",
    );
  });
});

Deno.test("migrate from upstream's own layouts: its iptables and nftables listings to this program's same mode change nothing", async () => {
  const port: UpstreamPort = {
    namespace: "shop",
    name: "web",
    portName: "p",
    clusterIP: "172.30.0.10",
    port: 80,
    targetPort: 8080,
    endpoints: ["10.180.1.2", "10.180.2.2"],
  };
  const clusterIP = WEB.replace("  type: NodePort\n", "").replace(", nodePort: 30080", "");
  await withFiles(NODE + clusterIP, async (src, dir) => {
    const up: Upstream = { mode: "iptables", clusterCIDR: "10.180.0.0/16", backend: "nft" };
    await Deno.writeTextFile(`${dir}/up-iptables.rules`, upstreamIptablesSave(up, [port]));
    await Deno.writeTextFile(`${dir}/up-nftables.rules`, upstreamNftablesSync([port], "10.180.0.0/16"));
    assertEquals(await groups(["--to=iptables", `--rules=${dir}/up-iptables.rules`, src]), {
      code: 0,
      groups: [],
    });
    assertEquals(await groups(["--to=nftables", `--rules=${dir}/up-nftables.rules`, src]), {
      code: 0,
      groups: [],
    });
    // Recognised by their rules alone (no --from-mode), and to the other mode the known difference.
    assertEquals((await groups(["--to=iptables", `--rules=${dir}/up-nftables.rules`, src])).groups, [
      ["unserved-ports", ["(every Service)"]],
    ]);
  });
});

Deno.test("migrate: bad input is exit 2 naming what", async () => {
  await withFiles(NODE + WEB, async (src, dir) => {
    await Deno.writeTextFile(`${dir}/empty.rules`, "# nothing\n");
    for (
      const [args, said] of [
        [[], /needs --to=MODE/],
        [["--to=bogus"], /--to: invalid value "bogus"/],
        [["--to=nftables", `--rules=${dir}/missing.rules`, src], /--rules: ".*missing\.rules"/],
        [
          ["--to=nftables", `--rules=${dir}/empty.rules`, src],
          /no mode's Service rules found in .*empty\.rules; name the mode/,
        ],
      ] as const
    ) {
      const r = await run(["migrate", ...args]);
      assertEquals(r.code, 2, r.stderr);
      assertMatch(r.stderr, said);
    }
  });
});
