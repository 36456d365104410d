/**
 * Localhost NodePorts in nftables mode on a real kernel (upstream 1.37's KEP-6032, with UDP too):
 * the real program, started as `deno task start` starts it, in namespaces this test creates. With
 * KubeProxyNFTablesLocalhostNodePorts and `--nodeport-addresses=primary,localhost`, `127.0.0.1` and
 * `[::1]` NodePorts reach the pods (TCP and UDP, ClientIP affinity, externalTrafficPolicy Local)
 * while route_localnet stays 0; `localhost` alone serves only loopback, `all` every address but
 * loopback, and without the gate nothing is served on loopback.
 * @module
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { realKernel } from "../support/namespace.ts";
import { type Agent, type Pod, Topology } from "./netns.ts";
import { answers } from "./answers.ts";
import type { ProxyProcess } from "../support/program.ts";

const GATE = "--feature-gates=KubeProxyNFTablesLocalhostNodePorts=true";
/** A second address of the node, outside what `primary` names. */
const SECOND_IP = "192.168.0.99";
const CONVERGE_MS = 15_000;

/** A NodePort Service in namespace lo, one port to the pods' `target`; `extra` adds spec lines. */
function service(
  name: string,
  o: {
    clusterIP: string;
    nodePort: number;
    protocol?: string;
    target?: number;
    extra?: string;
    v6?: boolean;
  },
): string {
  return `---
apiVersion: v1
kind: Service
metadata: { namespace: lo, name: ${name} }
spec:
  type: NodePort
  clusterIP: ${o.clusterIP}
  clusterIPs: [${o.clusterIP}]
  ipFamilies: [${o.v6 ? "IPv6" : "IPv4"}]
${o.extra ?? ""}
  ports: [{ name: p, protocol: ${o.protocol ?? "TCP"}, port: 80, targetPort: ${
    o.target ?? 8080
  }, nodePort: ${o.nodePort} }]
`;
}

/** An EndpointSlice of `svc` with `eps` (address, node) on `port`. */
function slice(
  svc: string,
  eps: ReadonlyArray<readonly [string, string]>,
  o: { protocol?: string; port?: number; v6?: boolean } = {},
): string {
  return `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: lo, name: ${svc}-1, labels: { kubernetes.io/service-name: ${svc} } }
addressType: ${o.v6 ? "IPv6" : "IPv4"}
ports: [{ name: p, protocol: ${o.protocol ?? "TCP"}, port: ${o.port ?? 8080} }]
endpoints:
${
    eps.map(([ip, node]) => `  - { addresses: ["${ip}"], conditions: { ready: true }, nodeName: ${node} }`)
      .join("\n")
  }
`;
}

/** The objects: node-a with its primary address, and one Service per situation. */
function objects(pods: readonly Pod[], v6: readonly string[]): string {
  const [a, b] = pods.map((p) => p.ip);
  return `---
apiVersion: v1
kind: Node
metadata: { name: node-a }
status: { addresses: [{ type: InternalIP, address: 192.168.0.2 }] }
` +
    service("web", { clusterIP: "172.30.9.1", nodePort: 30090 }) +
    slice("web", [[a, "node-a"], [b, "node-a"]]) +
    service("dns", { clusterIP: "172.30.9.2", nodePort: 30091, protocol: "UDP" }) +
    slice("dns", [[a, "node-a"], [b, "node-a"]], { protocol: "UDP" }) +
    service("sticky", { clusterIP: "172.30.9.3", nodePort: 30092, extra: "  sessionAffinity: ClientIP" }) +
    slice("sticky", [[a, "node-a"], [b, "node-a"]]) +
    // externalTrafficPolicy Local: pod-b counts as another node's.
    service("local", { clusterIP: "172.30.9.4", nodePort: 30093, extra: "  externalTrafficPolicy: Local" }) +
    slice("local", [[a, "node-a"], [b, "node-b"]]) +
    service("elsewhere", {
      clusterIP: "172.30.9.5",
      nodePort: 30094,
      extra: "  externalTrafficPolicy: Local",
    }) +
    slice("elsewhere", [[b, "node-b"]]) +
    service("web6", { clusterIP: "fd00:30::10", nodePort: 30095, target: 8090, v6: true }) +
    slice("web6", v6.map((ip) => [ip, "node-a"] as const), { port: 8090, v6: true }) +
    service("dns6", { clusterIP: "fd00:30::11", nodePort: 30096, protocol: "UDP", target: 8090, v6: true }) +
    slice("dns6", v6.map((ip) => [ip, "node-a"] as const), { protocol: "UDP", port: 8090, v6: true });
}

const refused = (r: string) => assert(r.startsWith("ERR"), `expected no answer, got ${r}`);
const BOTH = new Set(["pod-a", "pod-b"]);

const kernel = await realKernel(["nft", "conntrack", "sysctl"]);
Deno.test({
  name:
    `e2e localhost NodePorts (nftables): 127.0.0.1 and [::1] reach the pods, TCP and UDP, as asked${kernel.note}`,
  ignore: kernel.ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(ctx) {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-localhost-" });
    let p: ProxyProcess | undefined;
    const start = async (args: string[]) => {
      p = t.startProxy([
        "--proxy-mode=nftables",
        `--source=file:${dir}`,
        "--hostname-override=node-a",
        "--healthz-bind-address=127.0.0.1:10256",
        "--metrics-bind-address=127.0.0.1:10249",
        ...args,
      ]);
      await eventually(() => assertMatch(p!.log(), /Starting kube-proxy-deno/), CONVERGE_MS);
      return p;
    };
    try {
      await t.init();
      await t.exec(t.node, ["ip", "addr", "add", `${SECOND_IP}/24`, "dev", "br0"]);
      const pods = [await t.addPod("pod-a", 8080), await t.addPod("pod-b", 8080)];
      const v6: string[] = [];
      for (const [i, pod] of pods.entries()) {
        // IPv6 beside IPv4 on each pod's link; the pod answers it on 8090.
        const host = (await t.exec(t.node, ["ip", "-o", "addr", "show", "to", `10.180.${i + 1}.1`]))
          .split(/\s+/)[1];
        await t.exec(t.node, ["ip", "-6", "addr", "add", `fd00:180:${i + 1}::1/64`, "dev", host, "nodad"]);
        await t.exec(pod.ns, ["ip", "-6", "addr", "add", `fd00:180:${i + 1}::2/64`, "dev", "eth0", "nodad"]);
        const r = await pod.agent.request({
          op: "serve",
          name: `pod-${"ab"[i]}`,
          port: 8090,
          hostname: "::",
        });
        assert(r.ok, r.error);
        v6.push(`fd00:180:${i + 1}::2`);
      }
      const client = await t.addClient();
      await Deno.writeTextFile(`${dir}/objects.yaml`, objects(pods, v6));
      const node: Agent = t.nodeAgent;

      await ctx.step(
        "primary,localhost with the gate: loopback of both families and the primary address",
        async () => {
          const proxy = await start([GATE, "--nodeport-addresses=primary,localhost"]);
          await eventually(
            async () => assertMatch(await node.tcp("127.0.0.1", 30090), /^pod-[ab]$/),
            CONVERGE_MS,
          );
          assertEquals(await answers(12, () => node.tcp("127.0.0.1", 30090), BOTH), BOTH);
          assertMatch(await node.udp("127.0.0.1", 30091), /^pod-[ab]$/);
          assertEquals((await answers(8, () => node.tcp("127.0.0.1", 30092))).size, 1, "ClientIP affinity");
          assertEquals(await answers(8, () => node.tcp("127.0.0.1", 30093)), new Set(["pod-a"]), "ETP Local");
          refused(await node.tcp("127.0.0.1", 30094)); // ETP Local, no local endpoint: no listener
          await eventually(async () => assertMatch(await node.tcp("::1", 30095), /^pod-[ab]$/), CONVERGE_MS);
          assertEquals(await answers(12, () => node.tcp("::1", 30095), BOTH), BOTH);
          assertMatch(await node.udp("::1", 30096), /^pod-[ab]$/);
          // The primary address answers from outside; another address of the node does not.
          assertMatch(await client.agent.tcp("192.168.0.2", 30090), /^pod-[ab]$/);
          refused(await client.agent.tcp(SECOND_IP, 30090));
          assertEquals(
            (await t.exec(t.node, ["sysctl", "-n", "net.ipv4.conf.all.route_localnet"])).trim(),
            "0",
            "route_localnet is never set",
          );
          const m = await node.http("127.0.0.1", 10249, 2000, "/metrics");
          // web, dns, sticky, local (elsewhere has no local endpoint) and web6, dns6.
          assertMatch(m, /\nkubeproxy_nftables_localhost_nodeport_listeners\{ip_family="IPv4"\} 4\n/);
          assertMatch(m, /\nkubeproxy_nftables_localhost_nodeport_listeners\{ip_family="IPv6"\} 2\n/);
          assertMatch(
            m,
            /\nkubernetes_feature_enabled\{name="KubeProxyNFTablesLocalhostNodePorts",stage="ALPHA"\} 1\n/,
          );
          assertEquals((await proxy.stop()).code, 0);
        },
      );

      await ctx.step("localhost alone serves only loopback", async () => {
        const proxy = await start([GATE, "--nodeport-addresses=localhost"]);
        await eventually(
          async () => assertMatch(await node.tcp("127.0.0.1", 30090), /^pod-[ab]$/),
          CONVERGE_MS,
        );
        refused(await client.agent.tcp("192.168.0.2", 30090));
        refused(await client.agent.tcp(SECOND_IP, 30090));
        await proxy.stop();
      });

      await ctx.step(
        "all serves every address of the node, not loopback (as upstream: all does not ask for it)",
        async () => {
          const proxy = await start([GATE, "--nodeport-addresses=all"]);
          await eventually(
            async () => assertMatch(await client.agent.tcp(SECOND_IP, 30090), /^pod-[ab]$/),
            CONVERGE_MS,
          );
          assertMatch(await client.agent.tcp("192.168.0.2", 30090), /^pod-[ab]$/);
          refused(await node.tcp("127.0.0.1", 30090));
          await proxy.stop();
        },
      );

      await ctx.step(
        "without the gate, localhost named: nothing on loopback, and a warning says why",
        async () => {
          const proxy = await start(["--nodeport-addresses=primary,localhost"]);
          await eventually(
            async () => assertMatch(await client.agent.tcp("192.168.0.2", 30090), /^pod-[ab]$/),
            CONVERGE_MS,
          );
          refused(await node.tcp("127.0.0.1", 30090));
          assertMatch(
            proxy.log(),
            /--nodeport-addresses names IPv4 and IPv6 loopback, but nftables mode serves NodePorts there only with --feature-gates=KubeProxyNFTablesLocalhostNodePorts=true/,
          );
          assertEquals(proxy.log().match(/--nodeport-addresses names/g)?.length, 1, "said once");
          await proxy.stop();
        },
      );
    } catch (e) {
      if (p !== undefined) console.error(`--- proxy log ---\n${p.log()}`);
      throw e;
    } finally {
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
