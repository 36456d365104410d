/**
 * `migrate` as an operator runs it against a node's saved listing (`--rules`, no root): every cause
 * produces its group, in both directions, on listings the kernel printed of this program's rules
 * (loaded into a network namespace and listed back; the ipvs mode's render output, this kernel
 * having no IPVS) and on upstream 1.36's own listings of a node; a listing that matches the target
 * says nothing changes (no false difference), and every connection is compared.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { runOnce } from "../support/program.ts";
import { realKernel } from "../support/namespace.ts";
import { iptablesListing, nftListing } from "../support/kernel_listing.ts";

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

const kernel = await realKernel(["nft", "iptables-nft-restore", "iptables-nft-save"]);

/**
 * Writes what a node `mode` programs for the objects holds into `dir/mode.rules`, as the kernel
 * lists it: the render loaded into a namespace and listed back (`iptables-save; ip6tables-save`,
 * `nft list ruleset`); the ipvs mode's render output as it is. Returns the `--rules` flag.
 */
async function listed(src: string, dir: string, mode: string, extra: string[] = []): Promise<string> {
  const r = await run(["render", src, `--proxy-mode=${mode}`, CIDR, ...extra]);
  assertEquals(r.code, 0, r.stderr);
  let text = r.stdout;
  if (mode === "nftables") text = await nftListing(r.stdout);
  if (mode === "iptables") {
    const [v4, v6] = r.stdout.split("# ip6tables-restore --noflush input\n");
    text = await iptablesListing(v4, v6);
  }
  await Deno.writeTextFile(`${dir}/${mode}.rules`, text);
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

Deno.test({
  name:
    `migrate iptables <-> nftables: loopback NodePorts, the scheduler, unserved ports; the same groups in reverse${kernel.note}`,
  ignore: kernel.ignore,
  async fn() {
    await withFiles(NODE + WEB + CACHE, async (src, dir) => {
      const there = await groups(["--to=nftables", await listed(src, dir, "iptables"), src]);
      assertEquals(there, {
        code: 1,
        groups: [
          // The iptables mode drops forwarded INVALID packets; the nftables mode, as upstream's, does not.
          ["invalid-drop", ["(every Service)"]],
          ["unserved-ports", ["(every Service)"]],
          ["localhost-nodeport", ["shop/web"]],
          ["scheduler", ["default/cache"]],
        ],
      });
      const back = await groups(["--to=iptables", await listed(src, dir, "nftables"), src]);
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
  },
});

Deno.test("migrate ipvs -> nftables: the scheduler of every Service, unserved ports (neither drops INVALID packets)", async () => {
  await withFiles(NODE + WEB, async (src, dir) => {
    assertEquals(await groups(["--to=nftables", await listed(src, dir, "ipvs"), src]), {
      code: 1,
      groups: [
        ["unserved-ports", ["(every Service)"]],
        ["scheduler", ["shop/web"]],
      ],
    });
  });
});

Deno.test({
  name:
    `migrate nftables -> iptables: the iptables mode's INVALID drop is named for every Service, and goes with liberal conntrack${kernel.note}`,
  ignore: kernel.ignore,
  async fn() {
    await withFiles(NODE + WEB, async (src, dir) => {
      const r = await groups(["--to=iptables", await listed(src, dir, "nftables"), src]);
      assert(
        r.groups.some(([c, s]) => c === "invalid-drop" && s[0] === "(every Service)"),
        JSON.stringify(r),
      );
      const liberal = await groups([
        "--to=iptables",
        `--rules=${dir}/nftables.rules`,
        src,
        "--conntrack-tcp-be-liberal",
      ]);
      assert(!liberal.groups.some(([c]) => c === "invalid-drop"), JSON.stringify(liberal));
    });
  },
});

Deno.test({
  name:
    `migrate within a mode: a configuration change (--masquerade-all) names the connections whose source it changes${kernel.note}`,
  ignore: kernel.ignore,
  async fn() {
    await withFiles(NODE + WEB, async (src, dir) => {
      const r = await groups(["--to=iptables", await listed(src, dir, "iptables"), src, "--masquerade-all"]);
      assertEquals(r, { code: 1, groups: [["masquerade", ["shop/web"]]] });
      assertEquals(
        (await groups(["--to=iptables", `--rules=${dir}/iptables.rules`, src])).code,
        0,
        "same config",
      );
    });
  },
});

const UP = "tests/testdata/upstream-1.36/";
/** `migrate` over upstream 1.36's own listing of node fxnode and its objects. */
const upstream = (to: string, listing: string, extra: string[] = []) =>
  run([
    "migrate",
    `--to=${to}`,
    `--rules=${UP}${listing}`,
    `--source=file:${UP}objects.yaml`,
    "--hostname-override=fxnode",
    "--node-ip=192.168.77.10",
    "--cluster-cidr=10.244.0.0/16",
    "--output=json",
    ...extra,
  ]);

Deno.test("migrate from upstream 1.36's own listings: every connection compared; the same mode differs only where this program's rules do, the other mode by upstream's mode differences", async () => {
  const report = async (to: string, listing: string, extra: string[] = []) => {
    const r = await upstream(to, listing, extra);
    const j = JSON.parse(r.stdout);
    assertEquals(j.unanswered, [], "every connection answered by both datapaths");
    return { code: r.code, unchanged: j.unchanged, groups: j.groups.map((g: { cause: string }) => g.cause) };
  };
  // Upstream's iptables mode to this program's: nothing.
  assertEquals(await report("iptables", "iptables-mode.iptables-save"), {
    code: 0,
    unchanged: 38,
    groups: [],
  });
  // Upstream's nftables mode to this program's: nothing (neither drops an INVALID packet).
  assertEquals(await report("nftables", "nftables-mode.nft"), { code: 0, unchanged: 34, groups: [] });
  // Across modes: upstream's own differences between its two modes, and nothing else.
  // (and, across datapaths, the affinity entries a switch resets).
  assertEquals((await report("nftables", "iptables-mode.iptables-save")).groups, [
    "invalid-drop",
    "unserved-ports",
    "localhost-nodeport",
    "affinity-reset",
  ]);
  // The advice followed, it is not given again: what still differs is the socket proxy being an
  // outside client of externalTrafficPolicy Local Services.
  const followed = [
    "--nodeport-addresses=primary,localhost",
    "--feature-gates=KubeProxyNFTablesLocalhostNodePorts=true",
  ];
  assertEquals((await report("nftables", "iptables-mode.iptables-save", followed)).groups, [
    "invalid-drop",
    "unserved-ports",
    "external-traffic-policy-local",
    "affinity-reset",
  ]);
  const again = JSON.parse((await upstream("nftables", "iptables-mode.iptables-save", followed)).stdout);
  assert(!JSON.stringify(again.groups).includes("--nodeport-addresses"), JSON.stringify(again.groups));
  assertEquals((await report("iptables", "nftables-mode.nft")).groups, [
    "invalid-drop",
    "unserved-ports",
    "localhost-nodeport",
    "affinity-reset",
  ]);
});

Deno.test({
  name:
    `migrate reads both families: iptables-save and ip6tables-save in one file, or --rules per family; one family alone leaves the other not compared${kernel.note}`,
  ignore: kernel.ignore,
  async fn() {
    const dual = NODE.replace(
      "[{ type: InternalIP, address: 192.168.0.2 }]",
      "[{ type: InternalIP, address: 192.168.0.2 }, { type: InternalIP, address: fd00::2 }]",
    ) +
      WEB.replace(
        "  clusterIPs: [172.30.0.10]\n",
        "  clusterIPs: [172.30.0.10, fd00:30::10]\n  ipFamilyPolicy: RequireDualStack\n  ipFamilies: [IPv4, IPv6]\n",
      ) +
      `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: shop, name: web-6, labels: { kubernetes.io/service-name: web } }
addressType: IPv6
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: ["fd00:180::2"], conditions: { ready: true }, nodeName: n1 }
`;
    await withFiles(dual, async (src, dir) => {
      const both = await listed(src, dir, "iptables", ["--cluster-cidr=10.180.0.0/16,fd00:180::/48"]);
      const args = ["--to=iptables", src, "--cluster-cidr=10.180.0.0/16,fd00:180::/48", "--output=json"];
      const r = await run(["migrate", both, ...args]);
      const j = JSON.parse(r.stdout);
      assertEquals([r.code, j.groups, j.unanswered], [0, [], []], r.stderr);
      assert(j.unchanged > 4, "both families' connections compared");
      // The same two listings in two files.
      const text = await Deno.readTextFile(`${dir}/iptables.rules`);
      const at = text.indexOf("# Generated by ip6tables");
      await Deno.writeTextFile(`${dir}/v4.rules`, text.slice(0, at));
      await Deno.writeTextFile(`${dir}/v6.rules`, text.slice(at));
      const two = JSON.parse(
        (await run(["migrate", `--rules=${dir}/v4.rules`, `--rules=${dir}/v6.rules`, ...args])).stdout,
      );
      assertEquals([two.groups, two.unanswered, two.unchanged], [[], [], j.unchanged]);
      // IPv4 alone: the IPv6 connections are not compared (exit 3), never reported as changes.
      const v4 = await run(["migrate", `--rules=${dir}/v4.rules`, ...args]);
      const only = JSON.parse(v4.stdout);
      assertEquals([v4.code, only.groups], [3, []]);
      assert(
        only.unanswered.length > 0 && only.unanswered.every((d: { port: string }) => d.port.endsWith("IPv6")),
      );
      const said = await run(["migrate", `--rules=${dir}/v4.rules`, ...args.slice(0, -1)]);
      assertMatch(said.stdout, /^node n1: .*\nNodePorts asked on .*\nNOT COMPARED: \d+ connections of \d+/);
      assert(!said.stdout.includes("nothing changes for any Service"), said.stdout);
    });
  },
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
          /no mode's Service rules found in .*empty\.rules; name the mode that programs it with --from-mode$/m,
        ],
        // Naming a mode does not make its rules appear: comparing with none would call every Service changed.
        [
          ["--to=nftables", "--from-mode=iptables", `--rules=${UP}nftables-mode.nft`, src],
          /--from-mode=iptables: no iptables mode's Service rules found in .*nftables-mode\.nft/,
        ],
      ] as const
    ) {
      const r = await run(["migrate", ...args]);
      assertEquals(r.code, 2, r.stderr);
      assertMatch(r.stderr, said);
    }
  });
});

Deno.test({
  name: `migrate names an address another Service claims, with who wins${kernel.note}`,
  ignore: kernel.ignore,
  async fn() {
    const mitm = `---
apiVersion: v1
kind: Service
metadata: { namespace: evil, name: mitm }
spec:
  clusterIP: 172.30.0.99
  clusterIPs: [172.30.0.99]
  externalIPs: [172.30.0.10]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080 }]
`;
    await withFiles(NODE + WEB + mitm, async (src, dir) => {
      const r = await run([
        "migrate",
        "--to=nftables",
        await listed(src, dir, "iptables"),
        src,
        CIDR,
        "--output=json",
      ]);
      const report = JSON.parse(r.stdout);
      assertEquals(report.claims.length, 1, r.stdout);
      assertMatch(
        report.claims[0],
        /^172\.30\.0\.10:80\/TCP is claimed by 2 Services: evil\/mitm \(its external IP\) wins/,
      );
      const text = await run(["migrate", "--to=nftables", `--rules=${dir}/iptables.rules`, src, CIDR]);
      assertMatch(text.stdout, /\nADDRESS CLAIM: 172\.30\.0\.10:80\/TCP is claimed by 2 Services/);
    });
  },
});
