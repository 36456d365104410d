/**
 * ONE list of real-kernel scenarios, run for every mode by `e2e_test.ts`. Each scenario owns its
 * objects (one file in the proxy's source directory, its own cluster IP) and its checks; a
 * scenario that does not apply to a mode names the mode and the reason.
 * @module
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { ANSWER_MS, CONVERGE_MS } from "../support/bounds.ts";
import { answers } from "./answers.ts";
import type { Agent, Pod, Topology } from "./netns.ts";
import { servicePortChainName } from "../../proxier/iptables/chain_name.ts";
import { LAYOUT_MARKER } from "../../proxier/nftables/layout.ts";

/** What a scenario reads of `explain --output=json` (schema kube-proxy-deno.explain/v1). */
interface ExplainedService {
  readonly ports: ReadonlyArray<{
    readonly clients: ReadonlyArray<{
      readonly client: "pod" | "node" | "external";
      readonly via: string;
      readonly label: string;
      readonly connection: { readonly dst: string; readonly port: number };
      readonly expected: {
        readonly verdict: string;
        readonly reason: string;
        readonly endpoints: string[];
        readonly terminatingFallback: boolean;
        readonly excluded: ReadonlyArray<{ readonly reason: string }>;
      };
      readonly agrees: boolean | null;
      readonly disagreement?: string;
    }>;
  }>;
}

/** What a scenario sees of the running test topology. */
export interface E2EEnv {
  readonly mode: string;
  readonly t: Topology;
  /** pod-a (10.180.1.2) and pod-b (10.180.2.2), both on node-a, serving TCP and UDP on 8080. */
  readonly pods: readonly Pod[];
  /** A host on the node's external link, 192.168.0.10. */
  readonly admitted: Pod;
  /** Another such host, 192.168.0.11. */
  readonly refused: Pod;
  /** A second node (192.168.0.3) running its own proxy as node-b, for scenarios that ask. */
  readonly node2?: Pod;
  /** The agent in the node namespace (traffic from the node itself). */
  readonly node: Agent;
  /** Replaces the scenario's objects file; the running proxies follow it. */
  write(scenario: string, yaml: string): Promise<void>;
  /** Stops node-a's proxy with SIGTERM and waits for it. */
  stopProxy(): Promise<{ code: number }>;
  /** Runs the program to completion in the node namespace, started as `deno task start` starts it. */
  runProgram(args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
}

/** Where a traced connection comes from: the node itself, a pod, or a client host. */
type TraceFrom = { node: true } | { pod: Pod } | { client: Pod };

/**
 * Asserts that `kube-proxy-deno trace` over the node's live rules, without `--proxy-mode` (it tells
 * the mode from what the node holds), says what real packets showed: the same pods (`observed`),
 * or the same refusal. Every kernel mode has a tracer; the userspace mode has none.
 */
async function traceAgrees(
  env: E2EEnv,
  from: TraceFrom,
  dst: string,
  port: number,
  observed: ReadonlySet<string> | "refused",
  proto = "tcp",
): Promise<void> {
  if (env.mode === "userspace") return;
  const args = ["trace", `--dst=${dst}`, `--dport=${port}`, `--proto=${proto}`];
  if ("pod" in from) args.push("--from=pod", `--src=${from.pod.ip}`);
  else if ("client" in from) args.push("--from=external", `--src=${from.client.ip}`);
  else args.push("--from=node");
  const r = await env.runProgram([...args, "--output=json"]);
  assertEquals(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout) as {
    mode: string;
    verdict: string;
    endpoints: Array<{ endpoint: string }>;
  };
  assertEquals(report.mode, env.mode, "the mode told from the node's rules");
  const names = new Map(env.pods.map((p, i) => [p.ip, `pod-${"ab"[i]}`]));
  const pods = new Set(report.endpoints.map((e) => names.get(e.endpoint.split(":")[0]) ?? e.endpoint));
  if (observed === "refused") {
    assert(report.verdict === "REJECT" || report.verdict === "DROP", `trace says ${r.stdout}`);
  } else {
    assertEquals(report.verdict, "DNAT", r.stdout);
    assertEquals(pods, observed, `trace ${args.join(" ")}`);
  }
}

/** One real-kernel scenario. */
export interface Scenario {
  /** Unique; also the name of its objects file. */
  readonly id: string;
  readonly name: string;
  /** The scenario's objects, written before the proxies start. */
  objects(env: E2EEnv): string;
  check(env: E2EEnv): Promise<void>;
  /** Needs node-b's proxy on the second node. */
  readonly secondNode?: boolean;
  /** Modes the scenario does not apply to, each with the reason. */
  readonly excludedIn?: Readonly<Record<string, string>>;
}

interface EndpointSpec {
  readonly ip: string;
  readonly node?: string;
  readonly zone?: string;
  /** Hinted for this node (trafficDistribution PreferSameNode). */
  readonly forNode?: string;
  /** Terminating: still serving (`serving`), or not. */
  readonly terminating?: "serving" | "not-serving";
}

/** A Service in namespace e2e with one port `p` to targetPort 8080; `spec` adds lines. */
function service(
  name: string,
  clusterIP: string,
  o: {
    spec?: string;
    type?: string;
    protocol?: string;
    port?: number;
    nodePort?: number;
    status?: string;
    meta?: string;
  } = {},
): string {
  const nodePort = o.nodePort === undefined ? "" : `, nodePort: ${o.nodePort}`;
  return `---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: ${name}${o.meta === undefined ? "" : `, ${o.meta}`} }
spec:
  type: ${o.type ?? "ClusterIP"}
  clusterIP: ${clusterIP}
  clusterIPs: [${clusterIP}]
${o.spec ?? ""}
  ports: [{ name: p, protocol: ${o.protocol ?? "TCP"}, port: ${o.port ?? 80}, targetPort: 8080${nodePort} }]
${o.status ?? ""}`;
}

/** An EndpointSlice of Service `svc` with `eps` on port 8080. */
function slice(svc: string, eps: readonly EndpointSpec[], protocol = "TCP", port = 8080): string {
  const lines = eps.map((e) => {
    const conditions = e.terminating === undefined
      ? "{ ready: true }"
      : `{ ready: false, serving: ${e.terminating === "serving"}, terminating: true }`;
    const hints = [
      ...(e.zone === undefined ? [] : [`forZones: [{ name: ${e.zone} }]`]),
      ...(e.forNode === undefined ? [] : [`forNodes: [{ name: ${e.forNode} }]`]),
    ];
    return `  - { addresses: [${e.ip}], conditions: ${conditions}, nodeName: ${e.node ?? "node-a"}${
      hints.length === 0 ? "" : `, hints: { ${hints.join(", ")} }`
    } }`;
  });
  return `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: ${svc}-1, labels: { kubernetes.io/service-name: ${svc} } }
addressType: IPv4
ports: [{ name: p, protocol: ${protocol}, port: ${port} }]
endpoints:${lines.length === 0 ? " []" : "\n" + lines.join("\n")}
`;
}

const ok = (r: string) => assert(!r.startsWith("ERR"), r);

/** The names of the two pods: a Service backed by both is answered by each. */
const BOTH = new Set(["pod-a", "pod-b"]);
/** Upstream's service chain of e2e/named's port p (`proxier/iptables/chain_name.ts`). */
const SVC_NAMED = servicePortChainName("KUBE-SVC-", "e2e/named:p", "tcp");
/**
 * Asserts that a client's connection was refused: the kernel modes drop or reject it (no answer);
 * the userspace proxy accepts it and closes it at once (no pod answers either).
 */
function refusedAnswer(env: E2EEnv, answer: string): void {
  assert(answer.startsWith("ERR") || (env.mode === "userspace" && answer === ""), `answered: ${answer}`);
}

/** A NodePort service with externalTrafficPolicy Local whose one endpoint is on node-b. */
function metricsObjects({ pods }: E2EEnv): string {
  return service("nolocal", "172.30.0.22", {
    type: "NodePort",
    nodePort: 30084,
    spec: "  externalTrafficPolicy: Local",
  }) + slice("nolocal", [{ ip: pods[1].ip, node: "node-b" }]);
}

/**
 * How long a debug report is waited for: past the program's own bound on one (60 s from its
 * arrival), so the program's answer, an error included, arrives before the client gives up.
 */
const REPORT_MS = 90_000;

/** The scenarios, in the order they run (the last ones stop the proxy). */
export const SCENARIOS: readonly Scenario[] = [
  {
    id: "cluster-ip",
    name: "ClusterIP from the node and from a pod reaches both pods (hairpin included)",
    objects: ({ pods }) => service("web", "172.30.0.10") + slice("web", pods),
    async check(env) {
      const { node, pods } = env;
      // The first scenario waits for the program's start and first sync.
      await eventually(async () => ok(await node.tcp("172.30.0.10", 80)), CONVERGE_MS);
      const fromNode = await answers(12, () => node.tcp("172.30.0.10", 80), BOTH);
      assertEquals(fromNode, BOTH, "from the node");
      const fromPod = await answers(12, () => pods[0].agent.tcp("172.30.0.10", 80), BOTH);
      assertEquals(fromPod, BOTH, "from a pod");
      await traceAgrees(env, { node: true }, "172.30.0.10", 80, fromNode);
      await traceAgrees(env, { pod: pods[0] }, "172.30.0.10", 80, fromPod);
    },
  },
  {
    id: "node-port",
    name: "NodePort and external IP from another host",
    objects: ({ pods }) =>
      service("ext", "172.30.0.20", {
        type: "NodePort",
        nodePort: 30080,
        spec: "  externalIPs: [192.168.99.2]",
      }) +
      slice("ext", pods),
    async check(env) {
      const { t, admitted } = env;
      await eventually(
        async () => assertMatch(await admitted.agent.tcp(t.nodeIP, 30080), /^pod-[ab]$/),
        CONVERGE_MS,
      );
      assertMatch(await admitted.agent.tcp("192.168.99.2", 80), /^pod-[ab]$/);
      const viaNodePort = await answers(12, () => admitted.agent.tcp(t.nodeIP, 30080), BOTH);
      assertEquals(viaNodePort, BOTH);
      await traceAgrees(env, { client: admitted }, t.nodeIP, 30080, viaNodePort);
    },
  },
  {
    id: "localhost-node-port",
    name: "NodePort on 127.0.0.1 from the node itself (route_localnet set by the program)",
    objects: ({ pods }) =>
      service("loopback", "172.30.0.21", { type: "NodePort", nodePort: 30082 }) + slice("loopback", pods),
    excludedIn: {
      nftables: "nftables mode never sets route_localnet: it serves 127.0.0.1 NodePorts only when asked, " +
        "through its socket proxy (localhost_node_ports_test.ts)",
      ipvs: "upstream's ipvs mode serves NodePorts on the node's addresses, never on loopback",
    },
    async check(env) {
      const { node, mode } = env;
      await eventually(
        async () => assertMatch(await node.tcp("127.0.0.1", 30082), /^pod-[ab]$/),
        CONVERGE_MS,
      );
      // Upstream's e2e "should update metric for tracking accepted packets destined for localhost
      // nodeports": iptables mode counts them (nfacct) in a metric operators read before nftables.
      const counted = async () => {
        const text = await node.http("127.0.0.1", 10249, ANSWER_MS, "/metrics");
        const m = /\nkubeproxy_iptables_localhost_nodeports_accepted_packets_total (\d+)\n/.exec(text);
        return m === null ? undefined : Number(m[1]);
      };
      const before = mode === "iptables" ? await counted() : undefined;
      const got = await answers(12, () => node.tcp("127.0.0.1", 30082), BOTH);
      assertEquals(got, BOTH);
      await traceAgrees(env, { node: true }, "127.0.0.1", 30082, got);
      if (mode === "iptables") {
        assert(before !== undefined, "the metric is exported");
        await eventually(async () => assert((await counted())! >= before + 12, `counted ${await counted()}`));
      }
    },
  },
  {
    id: "lb",
    name: "LoadBalancer IP from an admitted client",
    objects: ({ pods }) =>
      service("lb", "172.30.0.11", {
        type: "LoadBalancer",
        nodePort: 30081,
        spec: "  loadBalancerSourceRanges: [192.168.0.10/32]",
        status: "status: { loadBalancer: { ingress: [{ ip: 192.168.99.11 }] } }\n",
      }) + slice("lb", pods),
    async check({ admitted }) {
      await eventually(
        async () => assertMatch(await admitted.agent.tcp("192.168.99.11", 80), /^pod-[ab]$/),
        CONVERGE_MS,
      );
    },
  },
  {
    id: "lb-source-ranges",
    name: "loadBalancerSourceRanges drop a client outside them and admit one inside",
    objects: ({ pods }) =>
      service("ranged", "172.30.0.26", {
        type: "LoadBalancer",
        nodePort: 30086,
        spec: "  loadBalancerSourceRanges: [192.168.0.10/32]",
        status: "status: { loadBalancer: { ingress: [{ ip: 192.168.99.26 }] } }\n",
      }) + slice("ranged", pods),
    async check(env) {
      // The control first: the admitted client gets through, so the refusal below is the ranges'.
      await eventually(
        async () => assertMatch(await env.admitted.agent.tcp("192.168.99.26", 80), /^pod-[ab]$/),
        CONVERGE_MS,
      );
      refusedAnswer(env, await env.refused.agent.tcp("192.168.99.26", 80, 1000));
      await traceAgrees(env, { client: env.refused }, "192.168.99.26", 80, "refused");
      await traceAgrees(env, { client: env.admitted }, "192.168.99.26", 80, BOTH);
      if (env.mode === "userspace") {
        // The proxy closed it at once and counted it.
        const metrics = await env.node.http("127.0.0.1", 10249, 2000, "/metrics");
        assertMatch(
          metrics,
          /\nkubeproxy_userspace_source_range_refused_total\{service="e2e\/ranged:p\/TCP"\} [1-9]/,
        );
      }
    },
  },
  {
    id: "affinity",
    name: "ClientIP affinity pins a client to one pod; without it the same client reaches both",
    objects: ({ pods }) =>
      service("sticky", "172.30.0.12", { spec: "  sessionAffinity: ClientIP" }) + slice("sticky", pods) +
      service("unsticky", "172.30.0.31") + slice("unsticky", pods),
    async check({ node }) {
      await eventually(async () => ok(await node.tcp("172.30.0.12", 80)), CONVERGE_MS);
      const got = await answers(8, () => node.tcp("172.30.0.12", 80));
      assertEquals(got.size, 1, `affinity: ${[...got]}`);
      // The control: the same client, the same pods, no affinity.
      await eventually(async () => ok(await node.tcp("172.30.0.31", 80)), CONVERGE_MS);
      assertEquals(await answers(16, () => node.tcp("172.30.0.31", 80), BOTH), BOTH);
    },
  },
  {
    id: "etp-local",
    name:
      "externalTrafficPolicy Local: only the node with the endpoint answers; health check node port says so",
    secondNode: true,
    objects: ({ pods }) =>
      service("local", "172.30.0.13", {
        type: "LoadBalancer",
        nodePort: 30083,
        spec: "  externalTrafficPolicy: Local\n  healthCheckNodePort: 30007",
        status: "status: { loadBalancer: { ingress: [{ ip: 192.168.99.13 }] } }\n",
      }) + slice("local", [pods[0]]),
    async check(env) {
      const { t, admitted, node2 } = env;
      await eventually(
        async () => assertEquals(await admitted.agent.tcp(t.nodeIP, 30083), "pod-a"),
        CONVERGE_MS,
      );
      await traceAgrees(env, { client: admitted }, t.nodeIP, 30083, new Set(["pod-a"]));
      refusedAnswer(env, await admitted.agent.tcp(node2!.ip, 30083, 1000));
      await eventually(
        async () => assertMatch(await admitted.agent.http(t.nodeIP, 30007), /^200 .*"localEndpoints":1/),
        CONVERGE_MS,
      );
      await eventually(
        async () => assertMatch(await admitted.agent.http(node2!.ip, 30007), /^503 .*"localEndpoints":0/),
        CONVERGE_MS,
      );
    },
  },
  {
    id: "metrics",
    name:
      "/metrics carries upstream's names, labels and buckets, process metrics, and the kernel's rule count",
    objects: (env) => metricsObjects(env),
    async check(env) {
      const { node, mode, t, pods } = env;
      assertMatch(await node.http("127.0.0.1", 10256, ANSWER_MS, "/healthz"), /^200 /);
      const scrape = async () => {
        const r = await node.http("127.0.0.1", 10249, ANSWER_MS, "/metrics");
        assertMatch(r, /^200 /);
        return r;
      };
      const value = (text: string, series: string) => {
        const line = text.split("\n").find((l) => l.startsWith(`${series} `));
        assert(line !== undefined, `${series} is missing`);
        return Number(line.slice(series.length + 1));
      };
      await eventually(async () => {
        const m = await scrape();
        const series =
          'kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="external"}';
        assertEquals(value(m, series), 1);
        assert(value(m, 'kubeproxy_proxy_healthz_total{code="200"}') >= 1);
      }, CONVERGE_MS);
      // An edit gives the file source's slices a trigger time: network programming latency is observed.
      await env.write("metrics", metricsObjects(env).replace(pods[1].ip, pods[0].ip));
      const buckets = (text: string) =>
        text.split("\n").filter((l) =>
          l.startsWith("kubeproxy_network_programming_duration_seconds_bucket{") &&
          l.includes('ip_family="IPv4"')
        ).map((l) => /le="([^"]+)"/.exec(l)![1]);
      await eventually(async () => assert(buckets(await scrape()).length > 0, "observed"), CONVERGE_MS);
      const m = await scrape();
      const les = buckets(m);
      for (const le of ["0.25", "0.5", "1", "59", "60", "115", "120", "300", "+Inf"]) {
        assert(les.includes(le), le);
      }
      assertEquals(
        les.length,
        1 + 2 + 59 + 12 + 7 + 1,
        "upstream's buckets (0 first, as its merge()) and no others",
      );
      assert(
        value(m, "kubeproxy_sync_proxy_rules_service_changes_total") > 0,
        "no ip_family label, as upstream",
      );
      assert(value(m, "process_resident_memory_bytes") > 10_000_000);
      assert(value(m, "process_cpu_seconds_total") > 0);
      assert(Math.abs(value(m, "process_start_time_seconds") - Date.now() / 1000) < 3600);
      // Leak hunting under the shipped permissions (no /proc): the heap and the timers held.
      assert(value(m, "nodejs_heap_size_used_bytes") > 1_000_000, "the V8 heap");
      assert(value(m, 'nodejs_active_resources{type="Timeout"}') >= 1, "the sync period's timer, at least");
      if (mode === "iptables") {
        // The rules the metric counts are the rules of our chains the kernel holds.
        await eventually(async () => {
          const saved = await t.exec(t.node, ["iptables-save", "-t", "nat"]);
          const kernel = saved.split("\n").filter((l) => l.startsWith("-A KUBE-")).length;
          const series = 'kubeproxy_sync_proxy_rules_iptables_total{ip_family="IPv4",table="nat"}';
          assertEquals(value(await scrape(), series), kernel);
        }, CONVERGE_MS);
        assert(m.includes("kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total"));
      } else {
        assert(
          !m.includes("kubeproxy_sync_proxy_rules_iptables_total"),
          "iptables rule counts only in iptables mode",
        );
      }
      if (mode === "nftables") assert(m.includes("kubeproxy_sync_proxy_rules_nftables_sync_failures_total"));
    },
  },
  {
    id: "drain",
    name: "an established TCP connection to a removed endpoint keeps working; new ones go to the others",
    objects: ({ pods }) => service("drain", "172.30.0.23") + slice("drain", pods, "TCP", 8081),
    async check(env) {
      const { node, pods, write } = env;
      await eventually(
        async () => assertMatch(await node.hello("172.30.0.23", 80), /^pod-[ab]$/),
        CONVERGE_MS,
      );
      const first = await node.open("drain-1", "172.30.0.23", 80);
      assertMatch(first, /^pod-[ab]$/);
      const kept = first === "pod-a" ? pods[1] : pods[0];
      const keptName = first === "pod-a" ? "pod-b" : "pod-a";
      await write("drain", service("drain", "172.30.0.23") + slice("drain", [kept], "TCP", 8081));
      await eventually(
        async () => assertEquals(await answers(8, () => node.hello("172.30.0.23", 80)), new Set([keptName])),
        CONVERGE_MS,
      );
      assertEquals(
        await node.say("drain-1", "still"),
        `${first}:still`,
        "the established connection still works",
      );
    },
  },
  {
    id: "ipvs-sh",
    name: "kube-router's scheduler annotation: sh pins each client address to one endpoint",
    objects: ({ pods }) =>
      service("hashed", "172.30.0.24", {
        type: "NodePort",
        nodePort: 30085,
        meta: 'annotations: { kube-router.io/service.scheduler: "sh" }',
      }) + slice("hashed", pods) +
      service("unhashed", "172.30.0.32", { type: "NodePort", nodePort: 30087 }) + slice("unhashed", pods),
    async check({ t, admitted, refused }) {
      await eventually(
        async () => assertMatch(await admitted.agent.hello(t.nodeIP, 30085), /^pod-[ab]$/),
        CONVERGE_MS,
      );
      for (const client of [admitted, refused]) {
        assertEquals((await answers(8, () => client.agent.hello(t.nodeIP, 30085))).size, 1, client.ip);
      }
      // The control: the default scheduler (rr) spreads the same client over both.
      await eventually(
        async () => assertMatch(await admitted.agent.hello(t.nodeIP, 30087), /^pod-[ab]$/),
        CONVERGE_MS,
      );
      assertEquals(await answers(8, () => admitted.agent.hello(t.nodeIP, 30087), BOTH), BOTH);
    },
    excludedIn: {
      iptables: "kube-router's annotations choose IPVS schedulers",
      nftables: "kube-router's annotations choose IPVS schedulers",
      userspace: "kube-router's annotations choose IPVS schedulers",
    },
  },
  {
    id: "no-endpoints",
    name: "a service without endpoints refuses at once",
    objects: () => service("empty", "172.30.0.14"),
    async check(env) {
      await eventually(async () => {
        const started = Date.now();
        assertMatch(await env.node.tcp("172.30.0.14", 80, 3000), /^ERR .*(refused|unreachable)/i);
        assert(Date.now() - started < 1000, "refused quickly");
      }, CONVERGE_MS);
      await traceAgrees(env, { node: true }, "172.30.0.14", 80, "refused");
    },
    excludedIn: { userspace: "a userspace proxy accepts the connection and then closes it" },
  },
  {
    id: "service-cidrs",
    name: "a cluster IP inside a ServiceCIDR that no Service holds is dropped; an allocated one answers",
    objects: ({ pods }) =>
      `---
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: { name: kubernetes }
spec: { cidrs: [172.30.0.0/16] }
` + service("allocated", "172.30.0.33") + slice("allocated", pods),
    async check(env) {
      const { node, pods } = env;
      // The control: the ServiceCIDR's allocated address is served.
      await eventually(async () => ok(await pods[0].agent.tcp("172.30.0.33", 80)), CONVERGE_MS);
      await eventually(async () => {
        const started = Date.now();
        assertMatch(await pods[0].agent.tcp("172.30.0.250", 80, 1000), /^ERR .*(timed out|TimeoutError)/i);
        assert(Date.now() - started >= 900, "dropped: the connection times out");
      }, CONVERGE_MS);
      await traceAgrees(env, { pod: pods[0] }, "172.30.0.250", 80, "refused");
      ok(await node.tcp("172.30.0.33", 80));
    },
    excludedIn: {
      iptables: "upstream drops traffic to unallocated cluster IPs in nftables mode only",
      ipvs: "upstream drops traffic to unallocated cluster IPs in nftables mode only",
      userspace: "upstream drops traffic to unallocated cluster IPs in nftables mode only",
    },
  },
  {
    id: "drift",
    name: "rules flushed or deleted by someone else heal within a sync period (the periodic drift check)",
    objects: ({ pods }) => service("drifted", "172.30.0.34") + slice("drifted", pods),
    async check({ t, node, mode, pods }) {
      await eventually(async () => ok(await node.tcp("172.30.0.34", 80)), CONVERGE_MS);
      const drift = mode === "iptables"
        ? ["iptables", "-t", "nat", "-F"] // the mangle canary stays
        : mode === "nftables"
        ? ["nft", "flush", "table", "ip", "kube-proxy"] // chains and maps stay
        : ["ipvsadm", "-d", "-t", "172.30.0.34:80", "-r", `${pods[0].ip}:8080`];
      await t.exec(t.node, drift);
      // Healed by the periodic check, with nothing else changing (how soon, within one sync period,
      // is tests/faults/drift_test.ts's assertion).
      await eventually(async () => {
        if (mode === "ipvs") assertEquals(await answers(12, () => node.tcp("172.30.0.34", 80), BOTH), BOTH);
        else ok(await node.tcp("172.30.0.34", 80, 500));
      }, CONVERGE_MS);
    },
    excludedIn: {
      userspace: "the userspace datapath is the process itself; its portal rules are not checked",
    },
  },
  {
    id: "udp-moves",
    name: "UDP: a flow pinned to a removed endpoint moves to the other",
    objects: ({ pods }) =>
      service("dns", "172.30.0.15", { protocol: "UDP", port: 53 }) + slice("dns", pods, "UDP"),
    async check({ node, pods, write }) {
      const srcPort = 40999;
      const first = await eventually(async () => {
        const r = await node.udp("172.30.0.15", 53, { srcPort });
        ok(r);
        return r;
      }, CONVERGE_MS);
      assertEquals(await node.udp("172.30.0.15", 53, { srcPort }), first, "the flow is pinned");
      const keep = first === "pod-a" ? pods[1] : pods[0];
      await write(
        "udp-moves",
        service("dns", "172.30.0.15", { protocol: "UDP", port: 53 }) + slice("dns", [keep], "UDP"),
      );
      const other = first === "pod-a" ? "pod-b" : "pod-a";
      await eventually(
        async () => assertEquals(await node.udp("172.30.0.15", 53, { srcPort, timeoutMs: 500 }), other),
        CONVERGE_MS,
      );
    },
  },
  {
    id: "udp-deleted",
    name:
      "UDP: clients that keep sending to a deleted Service (cluster IP, NodePort) get no reply from its pod",
    objects: ({ pods }) =>
      service("dns3", "172.30.0.35", { type: "NodePort", protocol: "UDP", port: 53, nodePort: 30088 }) +
      slice("dns3", [pods[0]], "UDP"),
    async check({ t, node, admitted, write }) {
      // Each client keeps one source port, so every datagram belongs to one conntrack flow; the
      // kernel keeps translating a flow while packets keep coming, whatever the rules say now.
      const fromNode = () => node.udp("172.30.0.35", 53, { srcPort: 41001, timeoutMs: 500 });
      const fromOutside = () => admitted.agent.udp(t.nodeIP, 30088, { srcPort: 41002, timeoutMs: 500 });
      await eventually(async () => assertEquals(await fromNode(), "pod-a"), CONVERGE_MS);
      await eventually(async () => assertEquals(await fromOutside(), "pod-a"), CONVERGE_MS);
      await write("udp-deleted", "# the Service is gone\n");
      // Sending on all along (eventually asks again at once): the reconciler must drop the flows
      // of every address the Service had, its NodePort too, not only its cluster IP.
      await eventually(async () => {
        assertMatch(await fromNode(), /^ERR /);
        assertMatch(await fromOutside(), /^ERR /);
      }, CONVERGE_MS);
    },
  },
  {
    id: "udp-spread",
    name: "UDP to a cluster IP reaches both pods",
    objects: ({ pods }) =>
      service("dns2", "172.30.0.18", { protocol: "UDP", port: 53 }) + slice("dns2", pods, "UDP"),
    async check({ node }) {
      await eventually(async () => ok(await node.udp("172.30.0.18", 53)), CONVERGE_MS);
      assertEquals(await answers(16, () => node.udp("172.30.0.18", 53), BOTH), BOTH);
    },
  },
  {
    id: "topology",
    name: "topology hints: with the node in zone-a, only the endpoint hinted for zone-a answers",
    objects: ({ pods }) =>
      `---
apiVersion: v1
kind: Node
metadata: { name: node-a, labels: { topology.kubernetes.io/zone: zone-a } }
---
apiVersion: v1
kind: Node
metadata: { name: node-b, labels: { topology.kubernetes.io/zone: zone-b } }
` + service("zonal", "172.30.0.16", { spec: "  trafficDistribution: PreferClose" }) +
      slice("zonal", [{ ip: pods[0].ip, zone: "zone-a" }, { ip: pods[1].ip, zone: "zone-b" }]),
    async check(env) {
      await eventually(async () => ok(await env.node.tcp("172.30.0.16", 80)), CONVERGE_MS);
      const got = await answers(12, () => env.node.tcp("172.30.0.16", 80));
      assertEquals(got, new Set(["pod-a"]));
      await traceAgrees(env, { node: true }, "172.30.0.16", 80, got);
    },
  },
  {
    id: "chain-names",
    name: "the kernel holds upstream's chain names",
    objects: ({ pods }) => service("named", "172.30.0.27") + slice("named", [pods[0]]),
    async check({ t }) {
      // Upstream's hash of "e2e/named:p" + "tcp" and of the endpoint 10.180.1.2:8080 (DESIGN.md).
      await eventually(async () => {
        const nat = await t.exec(t.node, ["iptables-save", "-t", "nat"]);
        for (const chain of ["KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", SVC_NAMED]) {
          assert(nat.includes(`:${chain} - `), `${chain} missing:\n${nat}`);
        }
        assertMatch(nat, new RegExp(`-A ${SVC_NAMED} .*-j KUBE-SEP-[A-Z2-7]{16}`));
      }, CONVERGE_MS);
    },
    excludedIn: {
      userspace: "userspace mode has portal chains only",
      nftables: "nftables mode programs nftables only (its own scenario checks its table)",
      ipvs: "ipvs mode has no per-service chains (its own scenario checks its kernel objects)",
    },
  },
  {
    id: "nft-layout",
    name: "the kernel holds the kube-proxy table with a fixed number of chains, services as map elements",
    objects: ({ pods }) => service("mapped", "172.30.0.28") + slice("mapped", pods),
    async check({ t }) {
      const listed = await eventually(async () => {
        const text = await t.exec(t.node, ["nft", "list", "table", "ip", "kube-proxy"]);
        assertMatch(text, /172\.30\.0\.28 \. tcp \. 80 : goto internal/);
        return text;
      }, CONVERGE_MS);
      assert(listed.includes(`chain ${LAYOUT_MARKER}`) && listed.includes("map service-ips"), listed);
      // No iptables-mode chains: the mode's start removed what another mode left.
      assert(!(await t.exec(t.node, ["iptables-save"])).includes("KUBE-SERVICES"));
    },
    excludedIn: {
      iptables: "iptables mode programs iptables",
      userspace: "userspace mode has no nftables table",
      ipvs: "ipvs mode programs IPVS",
    },
  },
  {
    id: "nft-affinity-timeout",
    name:
      "ClientIP affinity with a real timeout: the pin is in the kernel, expires when idle, and is made anew",
    objects: ({ pods }) =>
      service("brief", "172.30.0.25", {
        spec: "  sessionAffinity: ClientIP\n  sessionAffinityConfig: { clientIP: { timeoutSeconds: 2 } }",
      }) +
      slice("brief", pods),
    async check({ t, node }) {
      const pins = async () =>
        ((await t.exec(t.node, ["nft", "-j", "list", "map", "ip", "kube-proxy", "affinity-2"])).match(
          /172\.30\.0\.25/g,
        ) ?? [])
          .length;
      await eventually(async () => ok(await node.tcp("172.30.0.25", 80)), CONVERGE_MS);
      const got = await answers(6, () => node.tcp("172.30.0.25", 80));
      assertEquals(got.size, 1, `pinned: ${[...got]}`);
      assertEquals(await pins(), 1, "one pin, for the node's address");
      await eventually(async () => assertEquals(await pins(), 0, "the idle pin expired"), 6000);
      ok(await node.tcp("172.30.0.25", 80));
      assertEquals(await pins(), 1, "a new connection pins again");
    },
    excludedIn: {
      iptables: "iptables keeps pins in the recent module (the pinning scenario covers it)",
      userspace: "userspace keeps pins in the process (unit tests cover their timeout)",
      ipvs: "IPVS keeps pins in persistence templates (the pinning scenario covers it)",
    },
  },
  {
    id: "portals",
    name: "portal rules redirect cluster IPs; connections go round robin",
    objects: ({ pods }) => service("rr", "172.30.0.17") + slice("rr", pods),
    async check({ t, node }) {
      const first = await eventually(async () => {
        const r = await node.tcp("172.30.0.17", 80);
        ok(r);
        return r;
      }, CONVERGE_MS);
      const seq = [first, await node.tcp("172.30.0.17", 80), await node.tcp("172.30.0.17", 80)];
      assert(seq[0] !== seq[1] && seq[0] === seq[2], `round robin: ${seq}`);
      const nat = await t.exec(t.node, ["iptables-save", "-t", "nat"]);
      assert(
        nat.includes(
          '-A PREROUTING -m comment --comment "handle ClusterIP services" -j KUBE-PORTALS-CONTAINER',
        ),
        nat,
      );
      assertMatch(
        nat,
        /-A KUBE-PORTALS-HOST -d 172\.30\.0\.17\/32 -p tcp -m comment --comment "e2e\/rr:p" -m tcp --dport 80 -j REDIRECT --to-ports 400\d\d/,
      );
    },
    excludedIn: {
      iptables: "iptables mode picks endpoints at random and has no portals",
      nftables: "nftables mode picks endpoints at random and has no portals",
      ipvs: "ipvs mode has no portals",
    },
  },
  {
    id: "explain",
    name: "explain agrees with real packets for each kind of client, and a rule deleted behind the proxy's " +
      "back is a DISAGREEMENT (exit 1) until the next sync heals it",
    objects: ({ pods }) => {
      const [a, b] = pods.map((p) => p.ip);
      return service("ex-cluster", "172.30.0.40") + slice("ex-cluster", pods) +
        service("ex-local", "172.30.0.41", {
          type: "NodePort",
          nodePort: 30091,
          spec: "  externalTrafficPolicy: Local",
        }) + slice("ex-local", [{ ip: a }, { ip: b, node: "node-b" }]) +
        service("ex-lb", "172.30.0.42", {
          type: "LoadBalancer",
          nodePort: 30092,
          spec: "  loadBalancerSourceRanges: [192.168.0.10/32]",
          status: "status: { loadBalancer: { ingress: [{ ip: 192.168.99.42 }] } }\n",
        }) + slice("ex-lb", pods) +
        service("ex-terminating", "172.30.0.43") +
        slice("ex-terminating", [{ ip: a, terminating: "serving" }, { ip: b, terminating: "not-serving" }]) +
        service("ex-hinted", "172.30.0.44") +
        slice("ex-hinted", [{ ip: a, forNode: "node-a" }, { ip: b, node: "node-b", forNode: "node-b" }]);
    },
    async check(env) {
      const { t, mode, pods, node, admitted, refused } = env;
      await eventually(async () => ok(await node.tcp("172.30.0.44", 80)), CONVERGE_MS);
      const name = new Map(pods.map((p, i) => [`${p.ip}:8080`, `pod-${"ab"[i]}`]));
      // The proxy's own answer (what the command prints), read from its metrics port.
      // In the emulated guest beside a busy host a report (a worker started for it, the kernel read
      // and traced) can outlast the program's bound on it, answered 503 saying so: it is asked again.
      const debug = (svc: string) =>
        eventually(async () => {
          const r = await node.http("127.0.0.1", 10249, REPORT_MS, `/debug/services/e2e/${svc}`);
          assertMatch(r, /^200 /, `/debug/services/e2e/${svc}: ${r.slice(0, 500)}`);
          return JSON.parse(r.slice(4)) as ExplainedService & { disagreements: number };
        }, CONVERGE_MS);
      // Round robin alternates (ipvs rr, userspace); a random choice needs more tries to show both.
      const tries = mode === "ipvs" || mode === "userspace" ? 4 : 12;
      const reports = new Map<string, ExplainedService>();
      for (const svc of ["ex-cluster", "ex-local", "ex-lb", "ex-terminating", "ex-hinted"]) {
        const report = await debug(svc);
        reports.set(svc, report);
        for (const c of report.ports.flatMap((p) => p.clients)) {
          assertEquals(c.agrees, true, `${svc}, ${c.label}: ${c.disagreement ?? "not checked"}`);
          // The same connection, sent for real by a client of the same kind.
          const from = c.client === "pod"
            ? pods[0].agent
            : c.client === "node"
            ? node
            : c.label.includes("outside")
            ? refused.agent
            : admitted.agent;
          // A connection that should be answered gets the suite's bound; a refused one (dropped: it
          // waits out its bound) a third of it.
          const ask = () =>
            from.tcp(
              c.connection.dst,
              c.connection.port,
              c.expected.verdict === "DNAT" ? ANSWER_MS : ANSWER_MS / 3,
            );
          if (c.expected.verdict === "DNAT") {
            const want = new Set(c.expected.endpoints.map((e) => name.get(e) ?? e));
            assertEquals(await answers(tries, ask, want), want, `${svc}, ${c.label}`);
          } else refusedAnswer(env, await ask());
        }
      }
      // The command prints the same report, and exits 0 when every client was checked and agrees
      // (3 when some could not be: the userspace run has no --cluster-cidr to tell pods by).
      const cli = await env.runProgram(["explain", "e2e/ex-cluster", "--output=json"]);
      const notChecked = JSON.parse(cli.stdout).notChecked as number;
      assertEquals(cli.code, notChecked === 0 ? 0 : 3, cli.stdout + cli.stderr);
      assertEquals(
        notChecked > 0,
        mode === "userspace",
        "only the run without a cluster CIDR leaves a client unchecked",
      );
      assertEquals(
        JSON.parse(cli.stdout).ports[0].clients.map((c: { expected: unknown }) => c.expected),
        reports.get("ex-cluster")!.ports[0].clients.map((c) => c.expected),
      );
      // What each report says, beyond agreeing with the kernel.
      const client = (svc: string, label: string, via: string) =>
        reports.get(svc)!.ports[0].clients.find((c) => c.label === label && c.via === via)!;
      const local = client("ex-local", "an external client", "NodePort").expected;
      assertEquals([local.endpoints, local.excluded.map((x) => x.reason)], [[`${pods[0].ip}:8080`], [
        "remote-external-local",
      ]]);
      assertEquals(
        client("ex-lb", "an external client outside loadBalancerSourceRanges", "load balancer IP").expected
          .reason,
        "source-range",
      );
      const terminating = client("ex-terminating", "this node", "cluster IP").expected;
      assertEquals([
        terminating.endpoints,
        terminating.terminatingFallback,
        terminating.excluded.map((x) => x.reason),
      ], [
        [`${pods[0].ip}:8080`],
        true,
        ["not-ready"],
      ]);
      const hinted = client("ex-hinted", "this node", "cluster IP").expected;
      assertEquals([hinted.endpoints, hinted.excluded.map((x) => x.reason)], [[`${pods[0].ip}:8080`], [
        "topology-node",
      ]]);
      if (mode === "userspace") return;
      // A rule deleted behind the proxy's back: explain says so until the drift check heals it. The
      // heal comes once per sync period, which a slow report may outlast, so the rule is deleted
      // again and again while explain looks.
      const drift = mode === "iptables"
        ? "iptables -t nat -L KUBE-SERVICES -n --line-numbers | awk '/172\\.30\\.0\\.40 /{print $1}' | " +
          "sort -rn | xargs -rn1 iptables -t nat -D KUBE-SERVICES"
        : mode === "nftables"
        ? "nft delete element ip kube-proxy service-ips '{ 172.30.0.40 . tcp . 80 }'"
        : `ipvsadm -d -t 172.30.0.40:80 -r ${pods[0].ip}:8080`;
      const whileDeleted = async <T>(look: () => Promise<T>): Promise<T> => {
        const deleting = new Deno.Command("ip", {
          args: [
            "netns",
            "exec",
            t.node,
            "sh",
            "-c",
            `while :; do { ${drift}; } >/dev/null 2>&1; sleep 0.1; done`,
          ],
          stdout: "null",
          stderr: "null",
        }).spawn();
        try {
          return await look();
        } finally {
          deleting.kill("SIGKILL");
          await deleting.status;
        }
      };
      await eventually(
        () =>
          whileDeleted(async () =>
            assert((await debug("ex-cluster")).disagreements > 0, "explain sees the deletion")
          ),
        CONVERGE_MS,
      );
      // The command says so too, with exit 1.
      await eventually(() =>
        whileDeleted(async () => {
          const r = await env.runProgram(["explain", "e2e/ex-cluster"]);
          assertEquals(r.code, 1, "explain exits 1 on a disagreement");
          assertMatch(r.stdout, /\n {4}DISAGREEMENT: /);
        }), CONVERGE_MS);
      await eventually(
        async () => assertEquals((await debug("ex-cluster")).disagreements, 0),
        CONVERGE_MS,
      );
    },
  },
  {
    id: "deleted",
    name: "a deleted service stops answering",
    objects: ({ pods }) => service("gone", "172.30.0.19") + slice("gone", pods),
    async check({ node, write }) {
      await eventually(async () => ok(await node.tcp("172.30.0.19", 80)), CONVERGE_MS);
      await write("deleted", "");
      await eventually(async () => assertMatch(await node.tcp("172.30.0.19", 80, 500), /^ERR/), CONVERGE_MS);
    },
  },
  {
    id: "sigterm",
    name: "SIGTERM stops the proxy and leaves the datapath in place",
    objects: ({ pods }) => service("stays", "172.30.0.29") + slice("stays", pods),
    async check({ node, stopProxy }) {
      await eventually(async () => ok(await node.tcp("172.30.0.29", 80)), CONVERGE_MS);
      assertEquals((await stopProxy()).code, 0);
      assertEquals(
        await answers(16, () => node.tcp("172.30.0.29", 80), BOTH),
        BOTH,
        "cluster IP still served",
      );
    },
    excludedIn: { userspace: "the userspace datapath is the process itself" },
  },
  {
    id: "cleanup",
    name: "--cleanup removes every rule of ours, and a second run finds nothing to do",
    objects: ({ pods }) => service("cleaned", "172.30.0.30") + slice("cleaned", pods),
    async check({ t, node, stopProxy, runProgram, mode }) {
      // Served before: the refusal at the end is the cleanup's doing.
      await eventually(async () => ok(await node.tcp("172.30.0.30", 80)), CONVERGE_MS);
      if (mode === "ipvs") await t.exec(t.node, ["ipvsadm", "-A", "-t", "10.99.0.1:80", "-s", "wlc"]);
      await stopProxy();
      for (let i = 0; i < 2; i++) {
        const r = await runProgram(["--cleanup"]);
        assertEquals(r.code, 0, r.stderr);
      }
      for (const tool of ["iptables-save", "ip6tables-save"]) {
        const saved = await t.exec(t.node, [tool]);
        assert(!saved.includes("KUBE-"), `${tool} after --cleanup:\n${saved}`);
      }
      if (mode === "ipvs") {
        // Ours are gone; the virtual server another program added before the cleanup stays.
        assertEquals((await t.exec(t.node, ["ipvsadm", "-S", "-n"])).trim(), "-A -t 10.99.0.1:80 -s wlc");
        assert(!(await t.exec(t.node, ["ipset", "list", "-n"])).includes("KUBE-"));
        assertEquals(
          await t.exec(t.node, ["ip", "-o", "link", "show", "kube-ipvs0"], { allowFail: true }),
          "",
        );
      }
      const ruleset = await t.exec(t.node, ["nft", "list", "ruleset"]);
      assert(!ruleset.includes("table ip kube-proxy") && !ruleset.includes("table ip6 kube-proxy"), ruleset);
      assertMatch(await node.tcp("172.30.0.30", 80, 500), /^ERR/);
    },
  },
];
