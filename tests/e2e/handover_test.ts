/**
 * Hand-over between this program and upstream kube-proxy on one node, as a DaemonSet swap and its
 * `rollout undo` do it, twice each way: this program in iptables mode (both backends) or nftables
 * mode, upstream (the stand-in written from its layout, `tests/support/upstream_kube_proxy.ts`) in
 * iptables or nftables mode. Each side's Service answers from the endpoint it was given; each start
 * of this program becomes ready with no failed sync; after each rollback the kernel holds what it
 * would hold had upstream run all along (in nftables mode, plus this program's unhooked objects in
 * upstream's table, which upstream's own cleanup removes with the table).
 */
import { CONVERGE_MS } from "../support/bounds.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { type Pod, Topology } from "./netns.ts";
import { NetnsExecutor, realKernel, withNamespace } from "../support/namespace.ts";
import type { Executor } from "../../iptables/executor.ts";
import {
  type Upstream,
  upstreamNftablesCleanup,
  type UpstreamPort,
  upstreamStart,
} from "../support/upstream_kube_proxy.ts";
import {
  DYNAMIC_CHAIN,
  ELEMENT_CONTAINERS,
  FIXED_CHAINS,
  SYNC_GENERATION,
} from "../../proxier/nftables/layout.ts";

const { ignore, note } = await realKernel([
  "nft",
  "iptables-nft-restore",
  "iptables-legacy-restore",
  "iptables-nft-save",
  "iptables-legacy-save",
  "conntrack",
]);

const CLUSTER_CIDR = "10.180.0.0/16";
const VIP = "172.30.0.10";

/** Ours: a mode and, for iptables, its backend. */
interface Ours {
  readonly mode: "iptables" | "nftables";
  readonly backend: "nft" | "legacy";
}

function objects(pod: Pod): string {
  return `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: web }
spec:
  clusterIP: ${VIP}
  clusterIPs: [${VIP}]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: [${pod.ip}], conditions: { ready: true }, nodeName: node-a }
`;
}

const upstreamPort = (ip: string): UpstreamPort => ({
  namespace: "e2e",
  name: "web",
  portName: "p",
  clusterIP: VIP,
  port: 80,
  targetPort: 8080,
  endpoints: [ip],
});

/**
 * What a rollback is judged by, in IPv4 (the stand-in writes IPv4 only; this program writes both
 * families alike): the iptables saves of both backends (counters and comments dropped, lines sorted
 * under their table) and the `kube-proxy` table's objects, each block by name.
 */
async function kernelState(exec: Executor): Promise<{ iptables: string[]; nft: Map<string, string> }> {
  const iptables: string[] = [];
  for (const tool of ["iptables-nft-save", "iptables-legacy-save"]) {
    let table = "";
    for (const line of (await exec.run(tool, { args: [] })).stdout.split("\n")) {
      if (line.startsWith("#") || line === "" || line === "COMMIT") continue;
      if (line.startsWith("*")) table = line;
      else iptables.push(`${tool} ${table} ${line.replace(/ \[\d+:\d+\]$/, "")}`);
    }
  }
  const nft = new Map<string, string>();
  for (const family of ["ip"]) {
    const r = await exec.run("nft", { args: ["list", "table", family, "kube-proxy"] });
    if (r.code !== 0) continue;
    let name = "";
    for (const line of r.stdout.split("\n")) {
      const open = /^\t(chain|set|map) (\S+) \{$/.exec(line);
      if (open !== null) name = `${family} ${open[1]} ${open[2]}`;
      if (name !== "") nft.set(name, (nft.get(name) ?? "") + line + "\n");
      if (line === "\t}") name = "";
    }
  }
  iptables.sort();
  return { iptables, nft };
}

/** Names this program's nftables layout writes that upstream's never does. */
function oursOnly(name: string): boolean {
  const object = name.split(" ")[2];
  return (FIXED_CHAINS.has(object) || ELEMENT_CONTAINERS.includes(object) || object === SYNC_GENERATION ||
    DYNAMIC_CHAIN.test(object));
}

for (
  const ours of [{ mode: "iptables", backend: "nft" }, { mode: "iptables", backend: "legacy" }, {
    mode: "nftables",
    backend: "nft",
  }] as const satisfies readonly Ours[]
) {
  for (const upMode of ["iptables", "nftables"] as const) {
    const label = ours.mode === "iptables" ? `iptables (${ours.backend})` : "nftables";
    Deno.test({
      name:
        `e2e hand-over: ours ${label} <-> upstream ${upMode}, twice: each serves its endpoint, ours syncs at once, a rollback leaves upstream's objects${note}`,
      ignore,
      sanitizeResources: false,
      sanitizeOps: false,
      async fn() {
        const t = new Topology();
        const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-handover-" });
        const logs: string[] = [];
        try {
          await t.init();
          const [a, b] = [await t.addPod("pod-a", 8080), await t.addPod("pod-b", 8080)];
          await Deno.writeTextFile(`${dir}/web.yaml`, objects(a));
          const node = new NetnsExecutor(t.node);
          const up: Upstream = { mode: upMode, clusterCIDR: CLUSTER_CIDR, backend: ours.backend };
          // The same history with upstream in our place: what upstream alone would leave.
          await withNamespace(async (reference) => {
            const serves = async (pod: Pod) =>
              await eventually(async () => {
                for (let i = 0; i < 4; i++) {
                  assertEquals(await t.nodeAgent.tcp(VIP, 80), pod.ip === a.ip ? "pod-a" : "pod-b");
                }
              }, CONVERGE_MS);
            for (let round = 1; round <= 2; round++) {
              // This program starts over what the last writer left.
              const proxy = t.startProxy([
                `--proxy-mode=${ours.mode}`,
                `--iptables-backend=${ours.backend}`,
                `--source=file:${dir}`,
                "--hostname-override=node-a",
                `--cluster-cidr=${CLUSTER_CIDR}`,
                "--healthz-bind-address=127.0.0.1:10256",
                "--metrics-bind-address=127.0.0.1:10249",
              ]);
              try {
                await serves(a);
                await eventually(
                  async () =>
                    assertEquals(
                      (await t.nodeAgent.http("127.0.0.1", 10256, 1000, "/readyz")).slice(0, 3),
                      "200",
                    ),
                  10_000,
                );
                assert(!/Sync failed/.test(proxy.log()), proxy.log());
              } finally {
                assertEquals((await proxy.stop()).code, 0, proxy.log());
                logs.push(proxy.log());
              }
              await upstreamStart(reference, { ...up, mode: ours.mode }, [upstreamPort(a.ip)]);
              // Rolled back: upstream starts over what this program left.
              await upstreamStart(node, up, [upstreamPort(b.ip)]);
              await upstreamStart(reference, up, [upstreamPort(b.ip)]);
              await serves(b);
              const [got, want] = [await kernelState(node), await kernelState(reference)];
              assertEquals(got.iptables, want.iptables, `round ${round}: iptables`);
              for (const [name, text] of want.nft) {
                assertEquals(got.nft.get(name), text, `round ${round}: ${name}`);
              }
              const extra = [...got.nft.keys()].filter((n) => !want.nft.has(n));
              assertEquals(
                extra.filter((n) => !oursOnly(n)),
                [],
                `round ${round}: objects neither program writes`,
              );
              if (ours.mode === "iptables" || upMode === "iptables") {
                assertEquals(extra, [], `round ${round}`);
              }
            }
            // Upstream's cleanup (its --cleanup, or its start in another mode) takes ours with its table.
            await upstreamNftablesCleanup(node);
            assertEquals((await kernelState(node)).nft.size, 0);
          });
        } catch (e) {
          console.error(logs.join("\n---\n"));
          throw e;
        } finally {
          await t.close();
          await Deno.remove(dir, { recursive: true });
        }
      },
    });
  }
}

Deno.test({
  name:
    `e2e --cleanup touches only what exists: on a clean node it changes nothing; after the iptables mode on nf_tables, no legacy table appears${note}`,
  ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-cleanup-" });
    const every = async () => {
      const out: string[] = [];
      for (
        const tool of [
          "iptables-nft-save",
          "ip6tables-nft-save",
          "iptables-legacy-save",
          "ip6tables-legacy-save",
        ]
      ) {
        out.push(...(await t.exec(t.node, [tool])).split("\n").filter((l) => l !== "" && !l.startsWith("#")));
      }
      return [
        ...out,
        ...(await t.exec(t.node, ["nft", "list", "ruleset"])).split("\n").filter((l) => l !== ""),
      ];
    };
    try {
      await t.init();
      const before = await every();
      const clean = await t.runProgram(["--cleanup"]);
      assertEquals(clean.code, 0, clean.stderr);
      assertEquals(await every(), before, "a --cleanup on a clean node creates nothing");

      const pod = await t.addPod("pod-a", 8080);
      await Deno.writeTextFile(`${dir}/web.yaml`, objects(pod));
      const proxy = t.startProxy([
        "--proxy-mode=iptables",
        "--iptables-backend=nft",
        `--source=file:${dir}`,
        "--hostname-override=node-a",
        "--healthz-bind-address=127.0.0.1:10256",
        "--metrics-bind-address=127.0.0.1:10249",
      ]);
      try {
        await eventually(async () => assertEquals(await t.nodeAgent.tcp(VIP, 80), "pod-a"), 15_000);
      } finally {
        await proxy.stop();
      }
      assertEquals((await t.runProgram(["--cleanup"])).code, 0);
      const after = await every();
      assertEquals(after.filter((l) => /KUBE-|kube-proxy/.test(l)), [], "nothing of kube-proxy's is left");
      for (const tool of ["iptables-legacy-save", "ip6tables-legacy-save"]) {
        assertEquals(await t.exec(t.node, [tool]), "", `${tool}: the backend it never used stays empty`);
      }
      assert(!(await t.exec(t.node, ["iptables-nft-save"])).includes("iptables-legacy tables present"));
    } finally {
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
