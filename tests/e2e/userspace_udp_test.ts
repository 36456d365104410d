/**
 * The userspace mode on the paths upstream's e2e network tests take, on a real kernel in namespaces
 * this test creates: UDP to a NodePort on the node's address from a pod, from another host and from
 * the node itself; UDP to a cluster IP from the node itself (a hostNetwork client); a NodePort
 * number serving TCP and UDP together; endpoints on the node's own address (a hostNetwork backend);
 * and a Service without endpoints refused as the kernel modes refuse it (TCP reset, ICMP
 * port-unreachable for UDP) on its cluster IP, NodePort and external IP. UDP is
 * asked with a connected socket, as upstream's clients (`nc -u`, Go's net.Dial) do: a reply from
 * another address than the one asked is dropped, and an ICMP error is "refused". The program runs
 * as `deno task start` does.
 * @module
 */
import { assertEquals } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { ANSWER_MS, CONVERGE_MS } from "../support/bounds.ts";
import { realKernel, sh } from "../support/namespace.ts";
import { Topology } from "./netns.ts";

const kernel = await realKernel(["iptables-nft", "python3"]);

/** A connected UDP client in `ns`: `answer <text>`, `refused` (an ICMP error), or `timeout`. */
async function udp(ns: string, host: string, port: number, timeoutS = 1.5): Promise<string> {
  const script = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(${timeoutS})
s.connect((sys.argv[1], int(sys.argv[2])))
try:
    s.send(b"ping")
    print("answer " + s.recv(4096).decode())
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
`;
  const out = await sh("ip", ["netns", "exec", ns, "python3", "-c", script, host, String(port)]);
  return out.trim();
}

/** A Service of the test: TCP and UDP on one port number (80, NodePort `nodePort`), to `eps` on 8080. */
function service(name: string, ip: string, nodePort: number, eps: readonly string[], spec = ""): string {
  const ports = (proto: string) =>
    `{ name: ${proto.toLowerCase()}, protocol: ${proto}, port: 80, targetPort: 8080, nodePort: ${nodePort} }`;
  const slicePorts = ["TCP", "UDP"].map((p) => `{ name: ${p.toLowerCase()}, protocol: ${p}, port: 8080 }`)
    .join(", ");
  return `---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: ${name} }
spec:
  type: NodePort
  clusterIP: ${ip}
  clusterIPs: [${ip}]
${spec}  ports: [${ports("TCP")}, ${ports("UDP")}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: ${name}-1, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [${slicePorts}]
endpoints: [${
    eps.map((e) => `{ addresses: [${e}], conditions: { ready: true }, nodeName: node-a }`).join(", ")
  }]
`;
}

Deno.test({
  name:
    `e2e userspace: UDP on every path the TCP side serves, and a Service without endpoints refused${kernel.note}`,
  ignore: kernel.ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-us-udp-" });
    try {
      await t.init();
      const pod = await t.addPod("pod-a", 8080); // answers "pod-a" on TCP and UDP 8080
      const client = await t.addPod("client", 7070);
      const other = await t.addClient(); // another host on the node's link: 192.168.0.10
      // A hostNetwork backend: the node itself answers on 8080.
      await t.nodeAgent.request({ op: "serve", name: "node", port: 8080 });
      await Deno.writeTextFile(
        `${dir}/objects.yaml`,
        `apiVersion: v1
kind: Node
metadata: { name: node-a }
status: { addresses: [{ type: InternalIP, address: ${t.nodeIP} }] }
` +
          service("web", "172.30.3.1", 30301, [pod.ip]) +
          service("hostnet", "172.30.3.2", 30302, [t.nodeIP]) +
          service("empty", "172.30.3.3", 30303, [], "  externalIPs: [172.30.3.99]\n"),
      );
      const proxy = t.startProxy([
        "--proxy-mode=userspace",
        `--source=file:${dir}/objects.yaml`,
        "--hostname-override=node-a",
        "--cluster-cidr=10.180.0.0/16",
      ]);
      await eventually(() => assertEquals(/First sync in the kernel/.test(proxy.log()), true), CONVERGE_MS);
      const wrong: string[] = [];
      const expect = async (what: string, got: Promise<string>, want: string) => {
        const g = await got;
        if (g !== want) wrong.push(`${what}: ${g}, want ${want}`);
      };
      // UDP to the NodePort on the node's address: from a pod, another host, the node itself.
      await eventually(
        async () => assertEquals(await udp(client.ns, t.nodeIP, 30301), "answer pod-a"),
        ANSWER_MS,
      );
      await expect("UDP NodePort from another host", udp(other.ns, t.nodeIP, 30301), "answer pod-a");
      await expect("UDP NodePort from the node", udp(t.node, t.nodeIP, 30301), "answer pod-a");
      // UDP to the cluster IP from the node itself (a hostNetwork client), and from a pod.
      await expect("UDP cluster IP from the node", udp(t.node, "172.30.3.1", 80), "answer pod-a");
      await expect("UDP cluster IP from a pod", udp(client.ns, "172.30.3.1", 80), "answer pod-a");
      // The same NodePort number over TCP.
      await expect("TCP NodePort beside UDP", client.agent.tcp(t.nodeIP, 30301), "pod-a");
      // Endpoints on the node's own address (a hostNetwork backend), over UDP and TCP.
      await expect(
        "UDP to a hostNetwork endpoint via NodePort",
        udp(client.ns, t.nodeIP, 30302),
        "answer node",
      );
      await expect(
        "UDP to a hostNetwork endpoint via NodePort, from another host",
        udp(other.ns, t.nodeIP, 30302),
        "answer node",
      );
      await expect(
        "UDP to a hostNetwork endpoint via the cluster IP",
        udp(client.ns, "172.30.3.2", 80),
        "answer node",
      );
      await expect("TCP to a hostNetwork endpoint via NodePort", client.agent.tcp(t.nodeIP, 30302), "node");
      // No endpoints: refused, as the kernel modes refuse it.
      for (
        const [where, host, port] of [
          ["the cluster IP", "172.30.3.3", 80],
          ["the NodePort", t.nodeIP, 30303],
          ["the external IP", "172.30.3.99", 80],
        ] as const
      ) {
        await expect(`UDP to ${where} without endpoints`, udp(client.ns, host, port), "refused");
        const tcp = await client.agent.tcp(host, port, 1500);
        if (!/refused/i.test(tcp)) {
          wrong.push(`TCP to ${where} without endpoints: ${JSON.stringify(tcp)}, want refused`);
        }
      }
      assertEquals(wrong, []);
    } finally {
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
