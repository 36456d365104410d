/**
 * End to end, real kernel, iptables mode through the real program entry point: a node namespace
 * running the proxy, pods on veth pairs, client hosts and a second node on the node's external
 * link. Everything lives in namespaces this test creates and removes.
 */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { eventually } from "../net_helpers.ts";
import { netnsAvailable, type Pod, Topology } from "./netns.ts";

const available = await netnsAvailable();

function slice(
  name: string,
  svc: string,
  pods: Array<{ ip: string; node: string }>,
  port = 8080,
  protocol = "TCP",
) {
  return `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: ${name}, labels: { kubernetes.io/service-name: ${svc} } }
addressType: IPv4
ports: [{ name: p, protocol: ${protocol}, port: ${port} }]
endpoints:
${
    pods.map((p) => `  - { addresses: [${p.ip}], conditions: { ready: true }, nodeName: ${p.node} }`).join(
      "\n",
    )
  }
`;
}

function service(name: string, clusterIP: string, spec: string, protocol = "TCP", port = 80): string {
  return `---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: ${name} }
spec:
  clusterIP: ${clusterIP}
  clusterIPs: [${clusterIP}]
${spec}
  ports: [{ name: p, protocol: ${protocol}, port: ${port}, targetPort: 8080 }]
`;
}

function objects(pods: Pod[], dnsPods: Pod[]): string {
  const a = { ip: pods[0].ip, node: "node-a" };
  const b = { ip: pods[1].ip, node: "node-a" };
  return [
    // ClusterIP + NodePort + external IP.
    `---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: web }
spec:
  type: NodePort
  clusterIP: 172.30.0.10
  clusterIPs: [172.30.0.10]
  externalIPs: [192.168.99.2]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080 }]
`,
    slice("web-1", "web", [a, b]),
    // LoadBalancer admitting only 192.168.0.10.
    `---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: lb }
spec:
  type: LoadBalancer
  clusterIP: 172.30.0.11
  clusterIPs: [172.30.0.11]
  loadBalancerSourceRanges: [192.168.0.10/32]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30081 }]
status: { loadBalancer: { ingress: [{ ip: 192.168.99.11 }] } }
`,
    slice("lb-1", "lb", [a, b]),
    service("sticky", "172.30.0.12", "  sessionAffinity: ClientIP"),
    slice("sticky-1", "sticky", [a, b]),
    // ETP Local: the endpoint runs on node-a only.
    `---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: local }
spec:
  type: LoadBalancer
  clusterIP: 172.30.0.13
  clusterIPs: [172.30.0.13]
  externalTrafficPolicy: Local
  healthCheckNodePort: 30007
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30083 }]
status: { loadBalancer: { ingress: [{ ip: 192.168.99.13 }] } }
`,
    slice("local-1", "local", [a]),
    service("empty", "172.30.0.14", ""),
    service("dns", "172.30.0.15", "", "UDP", 53),
    slice("dns-1", "dns", dnsPods.map((p) => ({ ip: p.ip, node: "node-a" })), 8080, "UDP"),
  ].join("");
}

Deno.test({
  name: "e2e iptables: the real program programs the kernel and traffic reaches the right pods",
  ignore: !available,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-ipt-" });
    const file = `${dir}/objects.yaml`;
    try {
      await t.init();
      const pods = [await t.addPod("pod-a", 8080), await t.addPod("pod-b", 8080)];
      const admitted = await t.addClient(); // 192.168.0.10
      const refused = await t.addClient(); // 192.168.0.11
      const node2 = await t.addSecondNode();
      await Deno.writeTextFile(file, objects(pods, pods));
      const args = (node: string) => [
        "--proxy-mode=iptables",
        `--source=file:${dir}`,
        `--hostname-override=${node}`,
        "--cluster-cidr=10.180.0.0/16",
        "--healthz-bind-address=127.0.0.1:10256",
        "--metrics-bind-address=127.0.0.1:10249",
        "--iptables-min-sync-period=100ms",
      ];
      await t.startProxy(args("node-a"), `${dir}/node-a.log`);
      await t.startProxy(args("node-b"), `${dir}/node-b.log`, node2.ns);
      const node = t.nodeAgent;
      const ok = (r: string) => assert(!r.startsWith("ERR"), r);

      // ClusterIP from the node itself, balanced over both pods.
      await eventually(async () => ok(await node.tcp("172.30.0.10", 80)), 20_000);
      const fromNode = new Set<string>();
      for (let i = 0; i < 12; i++) fromNode.add(await node.tcp("172.30.0.10", 80));
      assertEquals(fromNode, new Set(["pod-a", "pod-b"]), "cluster IP from the node");
      // ClusterIP from a pod.
      const fromPod = new Set<string>();
      for (let i = 0; i < 12; i++) fromPod.add(await pods[0].agent.tcp("172.30.0.10", 80));
      assertEquals(fromPod, new Set(["pod-a", "pod-b"]), "cluster IP from a pod (hairpin included)");
      // NodePort and external IP from another host.
      assertMatch(await admitted.agent.tcp(t.nodeIP, 30080), /^pod-[ab]$/);
      assertMatch(await admitted.agent.tcp("192.168.99.2", 80), /^pod-[ab]$/);
      // LoadBalancer IP: one source admitted, the other dropped.
      assertMatch(await admitted.agent.tcp("192.168.99.11", 80), /^pod-[ab]$/);
      assertMatch(await refused.agent.tcp("192.168.99.11", 80, 1000), /^ERR/);
      // ClientIP affinity pins the node to one pod.
      const sticky = new Set<string>();
      for (let i = 0; i < 8; i++) sticky.add(await node.tcp("172.30.0.12", 80));
      assertEquals(sticky.size, 1, `affinity: ${[...sticky]}`);
      // ETP Local: only the node with the endpoint answers; health checks say so.
      assertEquals(await admitted.agent.tcp(t.nodeIP, 30083), "pod-a");
      assertMatch(await admitted.agent.tcp(node2.ip, 30083, 1000), /^ERR/);
      await eventually(
        async () => assertMatch(await admitted.agent.http(t.nodeIP, 30007), /^200 .*"localEndpoints":1/),
        5000,
      );
      assertMatch(await admitted.agent.http(node2.ip, 30007), /^503 .*"localEndpoints":0/);
      // No endpoints: refused at once, not a hang.
      const started = Date.now();
      assertMatch(await node.tcp("172.30.0.14", 80, 3000), /^ERR .*(refused|unreachable)/i);
      assert(Date.now() - started < 1000, "refused quickly");

      // UDP: pin a client (fixed source port) to one pod, remove that pod from the slice; the next
      // datagram from the same source must reach the other pod (stale conntrack entry deleted).
      const srcPort = 40999;
      const first = await eventually(async () => {
        const r = await node.udp("172.30.0.15", 53, { srcPort });
        ok(r);
        return r;
      });
      assertEquals(await node.udp("172.30.0.15", 53, { srcPort }), first, "conntrack pins the flow");
      const other = first === "pod-a" ? "pod-b" : "pod-a";
      await Deno.writeTextFile(file, objects(pods, [pods[other === "pod-a" ? 0 : 1]]));
      await eventually(
        async () => assertEquals(await node.udp("172.30.0.15", 53, { srcPort, timeoutMs: 500 }), other),
        10_000,
      );

      // The kernel holds upstream's chain names.
      const nat = await t.exec(t.node, ["iptables-save", "-t", "nat"]);
      assert(
        nat.includes(":KUBE-SERVICES - ") && nat.includes(":KUBE-POSTROUTING - ") &&
          /:KUBE-SVC-[A-Z2-7]{16} /.test(nat),
        nat,
      );
    } catch (e) {
      for (const n of ["node-a", "node-b"]) {
        console.error(
          `--- ${n} log ---\n` + await Deno.readTextFile(`${dir}/${n}.log`).catch(() => "(none)"),
        );
      }
      throw e;
    } finally {
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
