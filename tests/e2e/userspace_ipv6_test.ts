/**
 * The userspace mode serves both families on a dual-stack node: the real program (as `deno task
 * start` starts it) in network namespaces this test creates, real IPv6 connections to a cluster IP
 * (from the node and from a pod, through ip6tables portals), a NodePort on the node's IPv6 address
 * beside the same NodePort on IPv4, a load-balancer IP that admits a client inside its source range
 * and refuses one outside; `render`, `trace` and `/debug/services` show the IPv6 side, `--cleanup`
 * removes it.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { ANSWER_MS, CONVERGE_MS } from "../support/bounds.ts";
import { realKernel } from "../support/namespace.ts";
import { eventually } from "../support/net_helpers.ts";
import { addIPv6, V6 } from "./ipv6.ts";
import { type Agent, Topology } from "./netns.ts";

const PORT = 9090;
const DUAL = { v4: "172.30.2.1", v6: "fd00:30::2:1", nodePort: 30221 };
const RANGED = { v6: "fd00:30::2:2", lb: "fd00:30::2:100", nodePort: 30222 };

/** A slice of `name` with `ips` (one family), ready on node-a. */
function slice(name: string, family: "IPv4" | "IPv6", ips: readonly string[]): string {
  return `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: ${name}-${family.toLowerCase()}, labels: { kubernetes.io/service-name: ${name} } }
addressType: ${family}
ports: [{ name: p, protocol: TCP, port: ${PORT} }]
endpoints:
${ips.map((ip) => `  - { addresses: ["${ip}"], conditions: { ready: true }, nodeName: node-a }`).join("\n")}
`;
}

/** The endpoints (by name) `agent` reaches at `host:port` over `tries` new connections. */
async function reached(agent: Agent, host: string, port: number, tries = 6): Promise<Set<string>> {
  const seen = new Set<string>();
  for (let i = 0; i < tries; i++) {
    const r = await agent.tcp(host, port, ANSWER_MS);
    assertMatch(r, /^pod-[ab] /, `${host} port ${port}`);
    seen.add(r.split(" ")[0]);
  }
  return seen;
}

const BOTH = new Set(["pod-a", "pod-b"]);
const kernel = await realKernel(["iptables-restore", "iptables-save", "ip6tables-restore", "ip6tables-save"]);

Deno.test({
  name:
    `e2e userspace dual-stack: IPv6 cluster IPs, NodePorts and source ranges served beside IPv4${kernel.note}`,
  ignore: kernel.ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-userspace6-" });
    try {
      await t.init();
      const pods = [await t.addPod("pod-a", 8080), await t.addPod("pod-b", 8080)];
      const admitted = await t.addClient();
      const refused = await t.addClient();
      await addIPv6(t, pods, [admitted, refused]);
      for (const [i, p] of pods.entries()) {
        assert(
          (await p.agent.request({ op: "whoami", name: `pod-${"ab"[i]}`, port: PORT, hostname: "::" })).ok,
        );
      }
      await Deno.writeTextFile(
        `${dir}/objects.yaml`,
        `apiVersion: v1
kind: Node
metadata: { name: node-a }
status: { addresses: [{ type: InternalIP, address: ${t.nodeIP} }, { type: InternalIP, address: "${V6.node}" }] }
---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: dual }
spec:
  type: NodePort
  clusterIP: ${DUAL.v4}
  clusterIPs: [${DUAL.v4}, "${DUAL.v6}"]
  ipFamilyPolicy: RequireDualStack
  ipFamilies: [IPv4, IPv6]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: ${PORT}, nodePort: ${DUAL.nodePort} }]
${slice("dual", "IPv4", pods.map((p) => p.ip))}${slice("dual", "IPv6", [V6.pod(1), V6.pod(2)])}---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: ranged }
spec:
  type: LoadBalancer
  clusterIP: "${RANGED.v6}"
  clusterIPs: ["${RANGED.v6}"]
  ipFamilies: [IPv6]
  loadBalancerSourceRanges: ["${V6.client(admitted)}/128"]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: ${PORT}, nodePort: ${RANGED.nodePort} }]
status: { loadBalancer: { ingress: [{ ip: "${RANGED.lb}" }] } }
${slice("ranged", "IPv6", [V6.pod(1), V6.pod(2)])}`,
      );
      const args = [
        "--proxy-mode=userspace",
        `--source=file:${dir}`,
        "--hostname-override=node-a",
        "--cluster-cidr=10.180.0.0/16,fd00:180::/48",
        "--proxy-port-range=40000-40100",
      ];
      const proxy = t.startProxy([
        ...args,
        "--healthz-bind-address=127.0.0.1:10256",
        "--metrics-bind-address=127.0.0.1:10249",
      ]);
      const node = t.nodeAgent;
      await eventually(
        async () => assertMatch(await node.tcp(DUAL.v6, 80, ANSWER_MS), /^pod-[ab] /),
        CONVERGE_MS,
      );

      // The cluster IP, from the node (its own connection: nat OUTPUT) and from a pod (PREROUTING),
      // round robin over both IPv6 endpoints; the IPv4 one beside it.
      assertEquals(await reached(node, DUAL.v6, 80), BOTH);
      assertEquals(await reached(pods[0].agent, DUAL.v6, 80), BOTH);
      assertEquals(await reached(node, DUAL.v4, 80), BOTH);
      // One NodePort on both families: the IPv6 listeners bind the node's IPv6 addresses, so the
      // IPv4 side keeps its any-address socket on the same port.
      assertEquals(await reached(admitted.agent, V6.node, DUAL.nodePort), BOTH);
      assertEquals(await reached(admitted.agent, t.nodeIP, DUAL.nodePort), BOTH);
      // A proxy opens its own connection: the endpoint sees the node's address on the pod's link.
      const [pod, source] = (await admitted.agent.tcp(V6.node, DUAL.nodePort, ANSWER_MS)).split(" ");
      assertEquals(source, V6.gw(pod === "pod-a" ? 1 : 2), "the client's address is not kept");

      // The source range: the client inside it reaches the endpoints, the one outside is closed at once.
      assertEquals(await reached(admitted.agent, RANGED.lb, 80), BOTH);
      const outside = await refused.agent.tcp(RANGED.lb, 80, ANSWER_MS);
      assert(outside === "" || outside.startsWith("ERR"), `outside the range: ${outside}`);
      const metrics = await node.http("127.0.0.1", 10249, ANSWER_MS, "/metrics");
      assertMatch(
        metrics,
        /\nkubeproxy_userspace_source_range_refused_total\{service="e2e\/ranged:p\/TCP"\} 1\n/,
      );

      // The portals are ip6tables' as the kernel holds them.
      const rules = await t.exec(t.node, ["ip6tables-save", "-t", "nat"]);
      assertMatch(
        rules,
        new RegExp(`-A KUBE-PORTALS-CONTAINER -d ${DUAL.v6}/128 -p tcp .*-j REDIRECT --to-ports 4\\d{4}`),
      );
      assertMatch(
        rules,
        new RegExp(`-A KUBE-PORTALS-HOST -d ${RANGED.lb}/128 -p tcp .*-j REDIRECT --to-ports 4\\d{4}`),
      );

      // explain on the live node: the IPv6 pod client's line is there and agrees with the listeners.
      const r = await node.http(
        "127.0.0.1",
        10249,
        ANSWER_MS * 3,
        `/debug/services/e2e/dual?client=${V6.pod(1)}`,
      );
      assert(r.startsWith("200 "), r);
      const lines = JSON.parse(r.slice(4)).ports.flatMap((p: { clients: unknown[] }) => p.clients) as Array<
        { client: string; agrees?: boolean; connection: { dst: string; src: string } }
      >;
      const v6pod = lines.filter((l) => l.client === "pod" && l.connection.dst === DUAL.v6);
      assertEquals(v6pod.length, 1, JSON.stringify(lines));
      assertEquals(lines.filter((l) => l.agrees === false), [], "no disagreement");
      assertEquals(v6pod[0].agrees, true, JSON.stringify(v6pod));

      // render shows the IPv6 side: ip6tables-restore's input with the same portals.
      const rendered = await t.runProgram(["render", ...args]);
      assertEquals(rendered.code, 0, rendered.stderr);
      assertMatch(rendered.stdout, /# ip6tables-restore --noflush input\n\*nat\n/);
      assertMatch(rendered.stdout, new RegExp(`-A KUBE-PORTALS-CONTAINER -d ${DUAL.v6}/128 -p tcp `));

      // trace walks the IPv6 portals, on the live node and over the rendered rules alike.
      for (const where of [[], args]) {
        const traced = await t.runProgram([
          "trace",
          ...where,
          "--proxy-mode=userspace",
          `--dst=${DUAL.v6}`,
          "--dport=80",
        ]);
        assertEquals(traced.code, 0, traced.stderr);
        assertMatch(
          traced.stdout,
          new RegExp(`KUBE-PORTALS-HOST -d ${DUAL.v6}/128 .*-j REDIRECT --to-ports 4\\d{4}\n`),
        );
        assertMatch(traced.stdout, /\nverdict: REDIRECT\n/);
      }

      // --cleanup takes the IPv6 portals away too.
      assertEquals((await proxy.stop()).code, 0);
      const cleanup = await t.runProgram(["--cleanup"]);
      assertEquals(cleanup.code, 0, cleanup.stderr);
      assert(!(await t.exec(t.node, ["ip6tables-save", "-t", "nat"])).includes("KUBE-PORTALS"));
    } finally {
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
