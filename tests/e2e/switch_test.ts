/**
 * Switching modes on a live node, as operators do: iptables -> nftables -> iptables on the legacy
 * backend -> iptables on nf_tables, each proxy started as `deno task start` starts it. After each
 * switch exactly one mode's (and one backend's) rules exist and traffic flows.
 */
import { CONVERGE_MS } from "../support/bounds.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { Topology } from "./netns.ts";
import type { ProxyProcess } from "../support/program.ts";
import { realKernel } from "../support/namespace.ts";

const { ignore, note } = await realKernel([
  "nft",
  "iptables-nft-restore",
  "iptables-legacy-restore",
  "iptables-nft-save",
  "iptables-legacy-save",
  "conntrack",
]);

Deno.test({
  name:
    `e2e switching modes and backends: exactly one mode's and one backend's rules remain, traffic flows${note}`,
  ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-switch-" });
    let proxy: ProxyProcess | undefined;
    const logs: string[] = [];
    try {
      await t.init();
      const pods = [await t.addPod("pod-a", 8080), await t.addPod("pod-b", 8080)];
      await Deno.writeTextFile(
        `${dir}/web.yaml`,
        `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: web }
spec:
  clusterIP: 172.30.0.10
  clusterIPs: [172.30.0.10]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints:
${pods.map((p) => `  - { addresses: [${p.ip}], conditions: { ready: true }, nodeName: node-a }`).join("\n")}
`,
      );
      const rulesIn = async (backend: string) =>
        (await t.exec(t.node, [`iptables-${backend}-save`])).includes(":KUBE-SERVICES");
      const nftTable = async () => (await t.exec(t.node, ["nft", "list", "tables"])).includes("kube-proxy");
      for (
        const [mode, backend] of [["iptables", "nft"], ["nftables"], ["iptables", "legacy"], [
          "iptables",
          "nft",
        ]]
      ) {
        if (proxy !== undefined) {
          await proxy.stop();
          logs.push(proxy.log());
        }
        proxy = t.startProxy([
          `--proxy-mode=${mode}`,
          ...(backend === undefined ? [] : [`--iptables-backend=${backend}`]),
          `--source=file:${dir}`,
          "--hostname-override=node-a",
          "--cluster-cidr=10.180.0.0/16",
          "--healthz-bind-address=127.0.0.1:10256",
          "--metrics-bind-address=127.0.0.1:10249",
        ]);
        await eventually(async () => {
          assertEquals(
            [await rulesIn("nft"), await rulesIn("legacy"), await nftTable()],
            [backend === "nft", backend === "legacy", mode === "nftables"],
            `${mode} ${backend ?? ""}`,
          );
        }, CONVERGE_MS);
        const seen = new Set<string>();
        await eventually(async () => {
          seen.add(await t.nodeAgent.tcp("172.30.0.10", 80));
          assert(seen.has("pod-a") && seen.has("pod-b"), `${mode}: ${[...seen]}`);
        }, CONVERGE_MS);
      }
    } catch (e) {
      await proxy?.stop();
      console.error([...logs, proxy?.log() ?? ""].join("\n---\n"));
      throw e;
    } finally {
      await proxy?.stop();
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
