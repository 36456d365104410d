/**
 * End to end, real kernel: the program in userspace mode inside a node namespace, on a file
 * source; cluster IPs reached through its REDIRECT portals; backends in pod namespaces.
 */
import { assert, assertEquals } from "../assert.ts";
import { eventually } from "../net_helpers.ts";
import { netnsAvailable, Topology } from "./netns.ts";

const available = await netnsAvailable();

function objects(pods: Array<{ ip: string }>): string {
  return `apiVersion: v1
kind: Service
metadata: { namespace: default, name: web }
spec:
  type: NodePort
  clusterIP: 172.30.0.10
  clusterIPs: [172.30.0.10]
  ports:
    - { name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080 }
    - { name: dns, protocol: UDP, port: 53, targetPort: 8080, nodePort: 30053 }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  namespace: default
  name: web-1
  labels: { kubernetes.io/service-name: web }
addressType: IPv4
ports:
  - { name: http, protocol: TCP, port: 8080 }
  - { name: dns, protocol: UDP, port: 8080 }
endpoints:
${
    pods.map((p) => `  - addresses: [${p.ip}]\n    conditions: { ready: true }\n    nodeName: node-a`).join(
      "\n",
    )
  }
`;
}

Deno.test({
  name:
    "e2e userspace: cluster IP through portals from the node reaches pods in turn; NodePort from a client",
  ignore: !available,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-" });
    try {
      await t.init();
      const pods = [await t.addPod("pod-a", 8080), await t.addPod("pod-b", 8080)];
      const client = await t.addClient();
      await Deno.writeTextFile(`${dir}/objects.yaml`, objects(pods));
      await t.startProxy([
        "--proxy-mode=userspace",
        `--source=file:${dir}`,
        "--hostname-override=node-a",
        "--healthz-bind-address=127.0.0.1:10256",
        "--metrics-bind-address=127.0.0.1:10249",
        "--proxy-port-range=40000-40100",
      ], `${dir}/proxy.log`);
      const node = t.nodeAgent;
      const first = await eventually(async () => {
        const r = await node.tcp("172.30.0.10", 80);
        assert(!r.startsWith("ERR"), r);
        return r;
      }, 20_000);
      const answers = [first];
      for (let i = 0; i < 3; i++) answers.push(await node.tcp("172.30.0.10", 80));
      assertEquals(new Set(answers), new Set(["pod-a", "pod-b"]));
      assert(answers[0] !== answers[1] && answers[0] === answers[2], `round robin: ${answers}`);
      // UDP through the portal.
      const udp = new Set([await node.udp("172.30.0.10", 53), await node.udp("172.30.0.10", 53)]);
      assertEquals(udp, new Set(["pod-a", "pod-b"]));
      // The portal rules are in the node namespace's nat table.
      const nat = await t.exec(t.node, ["iptables-save", "-t", "nat"]);
      assert(
        nat.includes(
          '-A PREROUTING -m comment --comment "handle ClusterIP services" -j KUBE-PORTALS-CONTAINER',
        ),
        nat,
      );
      assert(
        /-A KUBE-PORTALS-HOST -d 172\.30\.0\.10\/32 -p tcp -m comment --comment "default\/web:http" -m tcp --dport 80 -j REDIRECT --to-ports 400\d\d/
          .test(nat),
        nat,
      );
      // A NodePort from another host.
      const viaNodePort = new Set([
        await client.agent.tcp(t.nodeIP, 30080),
        await client.agent.tcp(t.nodeIP, 30080),
      ]);
      assertEquals(viaNodePort, new Set(["pod-a", "pod-b"]));
      // Removing the service removes its portal rules and closes its ports.
      await Deno.writeTextFile(`${dir}/objects.yaml`, "");
      await eventually(async () => {
        const after = await t.exec(t.node, ["iptables-save", "-t", "nat"]);
        assert(!after.includes("172.30.0.10"), after);
      }, 10_000);
      assert((await node.tcp("172.30.0.10", 80, 500)).startsWith("ERR"));
    } catch (e) {
      console.error(await Deno.readTextFile(`${dir}/proxy.log`).catch(() => "(no log)"));
      throw e;
    } finally {
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
