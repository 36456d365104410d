/**
 * `migrate` on a live node, as the operator runs it there (root, the live rules, read only): on a
 * node programmed by the iptables mode, `migrate --to=nftables` names the loopback NodePort, the
 * scheduler annotation and the unserved ports, and nothing else; after the switch, `migrate
 * --to=iptables` names the same groups the other way. Neither run changes the node's rules.
 */
import { CONVERGE_MS } from "../support/bounds.ts";
import { assertEquals } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { Topology } from "./netns.ts";
import { realKernel } from "../support/namespace.ts";

const { ignore, note } = await realKernel(["nft", "iptables-nft-restore", "iptables-nft-save", "conntrack"]);

Deno.test({
  name:
    `e2e migrate on a live node: iptables -> nftables names its groups, and after the switch the same groups back${note}`,
  ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-migrate-" });
    try {
      await t.init();
      const pod = await t.addPod("pod-a", 8080);
      await Deno.writeTextFile(
        `${dir}/objects.yaml`,
        `apiVersion: v1
kind: Service
metadata: { namespace: shop, name: web }
spec:
  type: NodePort
  clusterIP: 172.30.0.10
  clusterIPs: [172.30.0.10]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080 }]
---
apiVersion: v1
kind: Service
metadata: { namespace: default, name: cache, annotations: { kube-router.io/service.scheduler: sh } }
spec:
  clusterIP: 172.30.0.11
  clusterIPs: [172.30.0.11]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080 }]
${
          ["web", "cache"].map((s) =>
            `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: ${
              s === "web" ? "shop" : "default"
            }, name: ${s}-1, labels: { kubernetes.io/service-name: ${s} } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: [${pod.ip}], conditions: { ready: true }, nodeName: node-a }
`
          ).join("")
        }`,
      );
      const flags = [
        `--source=file:${dir}`,
        "--hostname-override=node-a",
        "--cluster-cidr=10.180.0.0/16",
        "--iptables-backend=nft",
        `--node-ip=${t.nodeIP}`,
      ];
      const proxyFlags = [
        ...flags.filter((f) => !f.startsWith("--node-ip")),
        "--healthz-bind-address=127.0.0.1:10256",
      ];
      const ruleset = async () =>
        [await t.exec(t.node, ["iptables-nft-save"]), await t.exec(t.node, ["nft", "list", "ruleset"])]
          .map((x) =>
            x.split("\n").filter((l) => !l.startsWith("#")).join("\n")
              // Counters move with the traffic, not with the rules.
              .replace(/\[\d+:\d+\]|counter packets \d+ bytes \d+/g, "")
          );
      const migrate = async (to: string) => {
        const before = await ruleset();
        const r = await t.runProgram(["migrate", `--to=${to}`, ...flags, "--output=json"]);
        assertEquals(r.code, 1, r.stderr);
        assertEquals(await ruleset(), before, "migrate changes nothing");
        const report = JSON.parse(r.stdout);
        assertEquals(report.unanswered, []);
        return [
          report.from.rules,
          report.groups.map((g: { cause: string; services: string[] }) => [g.cause, g.services]),
        ];
      };
      const groups = [
        // The iptables mode drops forwarded INVALID packets; the nftables mode, as upstream's, does not.
        ["invalid-drop", ["(every Service)"]],
        ["unserved-ports", ["(every Service)"]],
        ["localhost-nodeport", ["shop/web"]],
        ["scheduler", ["default/cache"]],
      ];
      let proxy = t.startProxy(["--proxy-mode=iptables", ...proxyFlags]);
      await eventually(async () => assertEquals(await t.nodeAgent.tcp("172.30.0.10", 80), "pod-a"), 20_000);
      assertEquals(await migrate("nftables"), ["live", groups]);
      await proxy.stop();
      proxy = t.startProxy(["--proxy-mode=nftables", ...proxyFlags]);
      await eventually(async () => {
        assertEquals(await t.nodeAgent.tcp("172.30.0.10", 80), "pod-a");
        // The iptables mode's rules are gone (after the new mode's first sync, as a switch goes).
        for (const save of ["iptables-nft-save", "ip6tables-nft-save"]) {
          assertEquals((await t.exec(t.node, [save])).includes("KUBE-"), false, save);
        }
      }, CONVERGE_MS);
      assertEquals(await migrate("iptables"), ["live", groups]);
      await proxy.stop();
    } finally {
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
