/**
 * Cluster-wide stickiness without state, on a real kernel: two node namespaces run the real program
 * (nftables mode, started as `deno task start` starts it) over the same objects; one client
 * namespace with 50 addresses reaches a UDP NodePort through node A and through node B. With
 * Maglev over the source address (`kube-router.io/service.scheduler: mh`, `schedflags: flag-1`: the
 * 3-tuple) each client address reaches the same pod through both nodes, and after the Service
 * scales from 10 to 11 pods most keep theirs. A control Service with the default (random) choice
 * over the same pods shows the difference.
 * @module
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { realKernel } from "../support/namespace.ts";
import type { ProxyProcess } from "../support/program.ts";
import { type Pod, Topology } from "./netns.ts";

const CONVERGE_MS = 30_000;
const MAGLEV_PORT = 30190;
const CONTROL_PORT = 30191;
const CLIENTS = Array.from({ length: 50 }, (_, i) => `192.168.0.${100 + i}`);

/** A UDP NodePort Service `name` over the pods' port 8080 (`annotations`: extra metadata lines). */
function service(name: string, clusterIP: string, nodePort: number, annotations: string): string {
  return `---
apiVersion: v1
kind: Service
metadata:
  namespace: sticky
  name: ${name}
${annotations}
spec:
  type: NodePort
  clusterIP: ${clusterIP}
  clusterIPs: [${clusterIP}]
  ports: [{ name: dns, protocol: UDP, port: 53, targetPort: 8080, nodePort: ${nodePort} }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: sticky, name: ${name}-1, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: dns, protocol: UDP, port: 8080 }]
`;
}

/** Both nodes, the Maglev Service and the control one, over `pods`. */
function objects(pods: readonly Pod[]): string {
  const endpoints = "endpoints:\n" +
    pods.map((p) => `  - { addresses: ["${p.ip}"], conditions: { ready: true }, nodeName: node-a }`).join(
      "\n",
    ) +
    "\n";
  return `---
apiVersion: v1
kind: Node
metadata: { name: node-a }
status: { addresses: [{ type: InternalIP, address: 192.168.0.2 }] }
---
apiVersion: v1
kind: Node
metadata: { name: node-b }
status: { addresses: [{ type: InternalIP, address: 192.168.0.3 }] }
` +
    service(
      "maglev",
      "172.30.19.1",
      MAGLEV_PORT,
      "  annotations: { kube-router.io/service.scheduler: mh, kube-router.io/service.schedflags: flag-1 }",
    ) + endpoints +
    service("control", "172.30.19.2", CONTROL_PORT, "") + endpoints;
}

const kernel = await realKernel(["nft", "conntrack", "sysctl"]);
Deno.test({
  name:
    `e2e Maglev (nftables, two nodes): each client reaches the same pod through either node, and keeps it when the Service scales${kernel.note}`,
  ignore: kernel.ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(ctx) {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-maglev-" });
    const proxies: ProxyProcess[] = [];
    try {
      await t.init();
      const pods: Pod[] = [];
      for (let i = 1; i <= 10; i++) pods.push(await t.addPod(`pod-${i}`, 8080));
      const nodeB = await t.addSecondNode();
      const client = await t.addClient();
      for (const ip of CLIENTS) await t.exec(client.ns, ["ip", "addr", "add", `${ip}/24`, "dev", "eth0"]);
      await Deno.writeTextFile(`${dir}/objects.yaml`, objects(pods));
      for (const [ns, name] of [[t.node, "node-a"], [nodeB.ns, "node-b"]]) {
        const p = t.startProxy(
          ["--proxy-mode=nftables", `--source=file:${dir}`, `--hostname-override=${name}`],
          ns,
        );
        proxies.push(p);
        await eventually(() => assertMatch(p.log(), /Starting kube-proxy-deno/), CONVERGE_MS);
      }
      /** The pod each client address reaches on `port` through the node at `node`. */
      const reach = async (node: string, port: number) => {
        const out: string[] = [];
        for (const srcHost of CLIENTS) {
          out.push(await client.agent.udp(node, port, { srcHost, timeoutMs: 2000 }));
        }
        return out;
      };
      for (const node of ["192.168.0.2", "192.168.0.3"]) {
        await eventually(
          async () => assertMatch(await client.agent.udp(node, MAGLEV_PORT), /^pod-\d+$/),
          CONVERGE_MS,
        );
      }
      let before: string[] = [];

      await ctx.step(
        "Maglev: every client address reaches the same pod through node A and node B",
        async () => {
          const viaA = await reach("192.168.0.2", MAGLEV_PORT);
          const viaB = await reach("192.168.0.3", MAGLEV_PORT);
          assert(viaA.every((p) => /^pod-\d+$/.test(p)), viaA.join(" "));
          assertEquals(viaB, viaA);
          assert(new Set(viaA).size >= 6, `50 clients over ${new Set(viaA).size} of 10 pods`);
          // And again: the same client, a new source port, the same pod (the 3-tuple).
          assertEquals(await reach("192.168.0.2", MAGLEV_PORT), viaA);
          before = viaA;
        },
      );

      await ctx.step("control: with the default choice the nodes pick independently", async () => {
        const viaA = await reach("192.168.0.2", CONTROL_PORT);
        const viaB = await reach("192.168.0.3", CONTROL_PORT);
        const same = viaA.filter((p, i) => p === viaB[i]).length;
        // Random: about 1 in 10 agree by chance.
        assert(same <= 25, `${same} of 50 clients reached the same pod through both nodes`);
        console.log(`control: ${same} of 50 clients reached the same pod through both nodes`);
      });

      await ctx.step(
        "scaled from 10 to 11 pods: most clients keep their pod, through either node",
        async () => {
          pods.push(await t.addPod("pod-11", 8080));
          await Deno.writeTextFile(`${dir}/objects.yaml`, objects(pods));
          for (const ns of [t.node, nodeB.ns]) {
            await eventually(async () => {
              const listed = await t.exec(ns, ["nft", "list", "map", "ip", "kube-proxy", "backends"]);
              assert(listed.includes("10.180.11.2"), "the 11th pod is in the control Service's map");
            }, CONVERGE_MS);
          }
          const viaA = await reach("192.168.0.2", MAGLEV_PORT);
          const viaB = await reach("192.168.0.3", MAGLEV_PORT);
          assertEquals(viaB, viaA, "the nodes still agree");
          const kept = viaA.filter((p, i) => p === before[i]).length;
          // About 10 in 11 keep their pod (the bound over 10,000 flows is the bench's).
          assert(kept >= 38, `${kept} of 50 clients kept their pod`);
          const toNew = viaA.filter((p, i) => p !== before[i] && p === "pod-11").length;
          console.log(`Maglev: ${kept} of 50 clients kept their pod; ${toNew} of the others moved to pod-11`);
        },
      );
      for (const p of proxies) assertEquals((await p.stop()).code, 0);
    } finally {
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
