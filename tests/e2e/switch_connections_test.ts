/**
 * Switching a live node between the iptables and nftables modes breaks no connection: TCP
 * connections and a UDP flow opened before the switch (from a pod, through prerouting, and from the
 * node, through output) are used after it, while a stream of new connections runs through it. The
 * old mode's rules stay until the new one's first sync is in, and established flows keep their
 * conntrack NAT. The counts are printed for the README ("Moving from ipvs").
 */
import { assertEquals } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { type Agent, Topology } from "./netns.ts";
import { realKernel } from "../support/namespace.ts";

const { ignore, note } = await realKernel(["nft", "iptables-nft-restore", "iptables-nft-save", "conntrack"]);
const VIP = "172.30.0.10";

function objects(pods: Array<{ ip: string }>): string {
  return `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: web }
spec:
  clusterIP: ${VIP}
  clusterIPs: [${VIP}]
  ports:
    - { name: hello, protocol: TCP, port: 80, targetPort: 8080 }
    - { name: echo, protocol: TCP, port: 81, targetPort: 8081 }
    - { name: dns, protocol: UDP, port: 53, targetPort: 8080 }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports:
  - { name: hello, protocol: TCP, port: 8080 }
  - { name: echo, protocol: TCP, port: 8081 }
  - { name: dns, protocol: UDP, port: 8080 }
endpoints:
${pods.map((p) => `  - { addresses: [${p.ip}], conditions: { ready: true }, nodeName: node-a }`).join("\n")}
`;
}

for (const [from, to] of [["iptables", "nftables"], ["nftables", "iptables"]] as const) {
  Deno.test({
    name:
      `e2e switch ${from} -> ${to}: established TCP connections and a UDP flow survive, new connections are served throughout${note}`,
    ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const t = new Topology();
      const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-switch-conn-" });
      try {
        await t.init();
        const pods = [await t.addPod("pod-a", 8080), await t.addPod("pod-b", 8080)];
        const [client, streamer] = [await t.addBridgePod("kpdsw0"), await t.addBridgePod("kpdsw0")];
        await Deno.writeTextFile(`${dir}/web.yaml`, objects(pods));
        const start = (mode: string) =>
          t.startProxy([
            `--proxy-mode=${mode}`,
            "--iptables-backend=nft",
            `--source=file:${dir}`,
            "--hostname-override=node-a",
            "--cluster-cidr=10.180.0.0/16",
            "--healthz-bind-address=127.0.0.1:10256",
            "--metrics-bind-address=127.0.0.1:10249",
          ]);
        const ready = () =>
          eventually(
            async () =>
              assertEquals((await t.nodeAgent.http("127.0.0.1", 10256, 1000, "/readyz")).slice(0, 3), "200"),
            20_000,
          );
        let proxy = start(from);
        await ready();
        // Established before the switch: from a pod (prerouting) and from the node (output).
        const kept: Array<[Agent, string]> = [];
        for (const [who, agent] of [["pod", client.agent], ["node", t.nodeAgent]] as const) {
          for (let i = 0; i < 3; i++) {
            const id = `${who}-${i}`;
            const first = await agent.open(id, VIP, 81);
            assertEquals(/^pod-[ab]$/.test(first), true, `${id}: ${first}`);
            kept.push([agent, id]);
          }
        }
        const udp = (agent: Agent) => agent.udp(VIP, 53, { srcPort: 45053, timeoutMs: 2000 });
        const udpBefore = [await udp(client.agent), await udp(t.nodeAgent)];
        // New connections all along.
        let stop = false, opened = 0, failed = 0;
        const stream = (async () => {
          while (!stop) {
            const r = await streamer.agent.tcp(VIP, 80, 2000);
            opened++;
            if (!/^pod-[ab]$/.test(r)) failed++;
            await new Promise((r) => setTimeout(r, 50));
          }
        })();
        await proxy.stop();
        proxy = start(to);
        await ready();
        // The old mode's rules are gone once the new one serves.
        await eventually(async () => {
          const nft = (await t.exec(t.node, ["nft", "list", "tables"])).includes("kube-proxy");
          const ipt = (await t.exec(t.node, ["iptables-nft-save"])).includes(":KUBE-SERVICES");
          assertEquals([nft, ipt], [to === "nftables", to === "iptables"]);
        }, 15_000);
        await new Promise((r) => setTimeout(r, 500));
        stop = true;
        await stream;
        let broken = 0;
        for (const [agent, id] of kept) if (!/^pod-[ab]:after$/.test(await agent.say(id, "after"))) broken++;
        const udpAfter = [await udp(client.agent), await udp(t.nodeAgent)];
        const udpBroken = udpAfter.filter((r, i) => r !== udpBefore[i]).length;
        console.log(
          `switch ${from} -> ${to}: ${kept.length} TCP connections, ${broken} broken; 2 UDP flows, ${udpBroken} moved or lost; ${opened} new connections, ${failed} failed`,
        );
        assertEquals({ broken, udpBroken, failed }, { broken: 0, udpBroken: 0, failed: 0 });
        await proxy.stop();
      } finally {
        await t.close();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
