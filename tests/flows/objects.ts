/**
 * The object sets the flow table loads, and the nodes it runs on. Addresses follow the plan in
 * `tests/support/fixtures.ts`; every set is built fresh for each load.
 * @module
 */
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { ep, makeEndpointSlice, makeService, NODE, ZONE_LABEL } from "../support/fixtures.ts";

/** This node's IP in the flow tests. */
export const NODE_IP = "192.168.0.2";

/** Services and their slices, loaded together. */
export interface ObjectSet {
  /** Names the set in test output; rows with the same set, node and options share one load. */
  readonly id: string;
  build(): { services: V1Service[]; slices: V1EndpointSlice[] };
}

/** The node a row runs on: its name, Node labels and addresses. */
export interface NodeSpec {
  readonly id: string;
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly ips: readonly string[];
  /** The Node object's InternalIP (its primary address); default: the Node lists no addresses. */
  readonly internalIP?: string;
}

/** No objects. */
export const EMPTY: ObjectSet = { id: "empty", build: () => ({ services: [], slices: [] }) };

/** node-a with no labels. */
export const NODE_A: NodeSpec = { id: "node-a", name: NODE, labels: {}, ips: [NODE_IP] };
/** node-a in zone-a. */
export const NODE_A_ZONE_A: NodeSpec = { ...NODE_A, id: "node-a/zone-a", labels: { [ZONE_LABEL]: "zone-a" } };
/** node-a with a second address outside 192.168.0.0/24 (for --nodeport-addresses). */
export const NODE_A_TWO_IPS: NodeSpec = { ...NODE_A, id: "node-a/two-ips", ips: [NODE_IP, "10.99.0.1"] };
/** node-a with two addresses whose Node object names the second as its InternalIP. */
export const NODE_A_TWO_IPS_PRIMARY: NodeSpec = {
  ...NODE_A_TWO_IPS,
  id: "node-a/two-ips/primary",
  internalIP: "10.99.0.1",
};

/** Adds a Service and one slice with `eps` (and `ports`, default the Service's p80) to `out`. */
function add(
  out: { services: V1Service[]; slices: V1EndpointSlice[] },
  s: V1Service,
  eps: V1EndpointSlice["endpoints"],
  ports?: V1EndpointSlice["ports"],
): void {
  out.services.push(s);
  out.slices.push(makeEndpointSlice(s.metadata!.namespace!, s.metadata!.name!, (x) => {
    x.endpoints = eps;
    if (ports) x.ports = ports;
  }));
}

/** Every iptables-mode feature at least once (upstream's check-vector names for ns1/svc1). */
export const REPRESENTATIVE: ObjectSet = {
  id: "representative",
  build() {
    const out = { services: [] as V1Service[], slices: [] as V1EndpointSlice[] };
    // 1. ClusterIP with one remote endpoint.
    add(out, makeService("ns1", "svc1"), [ep("10.180.0.1")]);
    // 2. NodePort + external IP, externalTrafficPolicy Local, one local and one remote endpoint.
    add(
      out,
      makeService("ns2", "svc2", (s) => {
        s.spec!.type = "NodePort";
        s.spec!.clusterIPs = ["172.30.0.42"];
        s.spec!.ports![0].nodePort = 3001;
        s.spec!.externalIPs = ["192.168.99.2"];
        s.spec!.externalTrafficPolicy = "Local";
      }),
      [ep("10.180.0.2", { node: NODE }), ep("10.180.0.3")],
    );
    // 3. LoadBalancer with source ranges and ClientIP affinity.
    add(
      out,
      makeService("ns3", "svc3", (s) => {
        s.spec!.type = "LoadBalancer";
        s.spec!.clusterIPs = ["172.30.0.43"];
        s.spec!.ports![0].nodePort = 3003;
        s.spec!.loadBalancerSourceRanges = ["192.168.99.0/28"];
        s.spec!.sessionAffinity = "ClientIP";
        s.spec!.sessionAffinityConfig = { clientIP: { timeoutSeconds: 100 } };
        s.status = { loadBalancer: { ingress: [{ ip: "192.168.99.33" }] } };
      }),
      [ep("10.180.0.4"), ep("10.180.0.5")],
    );
    // 4. UDP without endpoints: REJECT.
    add(
      out,
      makeService("ns4", "svc4", (s) => {
        s.spec!.clusterIPs = ["172.30.0.44"];
        s.spec!.ports = [{ name: "dns", port: 53, protocol: "UDP" }];
      }),
      [],
      [{ name: "dns", port: 53, protocol: "UDP" }],
    );
    // 5. internalTrafficPolicy Local without a local endpoint: DROP.
    add(
      out,
      makeService("ns5", "svc5", (s) => {
        s.spec!.clusterIPs = ["172.30.0.45"];
        s.spec!.internalTrafficPolicy = "Local";
      }),
      [ep("10.180.0.6")],
    );
    // 6. SCTP, only a serving+terminating endpoint (and a not-serving one): the former is used.
    add(
      out,
      makeService("ns6", "svc6", (s) => {
        s.spec!.clusterIPs = ["172.30.0.46"];
        s.spec!.ports = [{ name: "", port: 7777, protocol: "SCTP" }];
      }),
      [
        ep("10.180.0.7", { ready: false, serving: true, terminating: true }),
        ep("10.180.0.8", { ready: false, serving: false, terminating: true }),
      ],
      [{ name: "", port: 7777, protocol: "SCTP" }],
    );
    // 7. LoadBalancer, ETP Local, health check node port, no local endpoint.
    add(
      out,
      makeService("ns7", "svc7", (s) => {
        s.spec!.type = "LoadBalancer";
        s.spec!.clusterIPs = ["172.30.0.47"];
        s.spec!.ports![0].nodePort = 3007;
        s.spec!.externalTrafficPolicy = "Local";
        s.spec!.healthCheckNodePort = 30007;
        s.status = { loadBalancer: { ingress: [{ ip: "192.168.99.77" }] } };
      }),
      [ep("10.180.0.9")],
    );
    return out;
  },
};

/**
 * Topology hints as the EndpointSlice controller publishes them (for Services with
 * trafficDistribution or the topology-mode annotation), one situation per Service.
 */
export const TOPOLOGY: ObjectSet = {
  id: "topology",
  build() {
    const out = { services: [] as V1Service[], slices: [] as V1EndpointSlice[] };
    const svc = (name: string, ip: string, mutate: (s: V1Service) => void = () => {}) =>
      makeService("topo", name, (s) => {
        s.spec!.clusterIPs = [ip];
        s.spec!.trafficDistribution = "PreferClose";
        mutate(s);
      });
    // Every ready endpoint hinted, one for zone-a.
    add(out, svc("zonal", "172.30.1.1"), [
      ep("10.180.1.1", { node: "node-b", forZones: ["zone-a"] }),
      ep("10.180.1.2", { node: "node-c", forZones: ["zone-b"] }),
    ]);
    // A ready endpoint without a hint: hints are ignored.
    add(out, svc("unhinted", "172.30.1.2"), [
      ep("10.180.1.3", { node: "node-b", forZones: ["zone-a"] }),
      ep("10.180.1.4", { node: "node-c" }),
    ]);
    // Every endpoint hinted, none for zone-a: hints are ignored.
    add(out, svc("otherzones", "172.30.1.3"), [
      ep("10.180.1.5", { node: "node-b", forZones: ["zone-b"] }),
      ep("10.180.1.6", { node: "node-c", forZones: ["zone-c"] }),
    ]);
    // Node hints (PreferSameNode): every ready endpoint hinted for a node, one for node-a.
    add(out, svc("samenode", "172.30.1.4"), [
      ep("10.180.1.7", { node: NODE, forNodes: [NODE], forZones: ["zone-b"] }),
      ep("10.180.1.8", { node: "node-b", forNodes: ["node-b"], forZones: ["zone-a"] }),
    ]);
    // No ready endpoint: the serving+terminating fallback ignores hints.
    add(out, svc("terminating", "172.30.1.5"), [
      ep("10.180.1.9", { ready: false, serving: true, terminating: true, forZones: ["zone-a"] }),
      ep("10.180.1.10", { ready: false, serving: true, terminating: true, forZones: ["zone-b"] }),
    ]);
    // externalTrafficPolicy Local: external traffic uses the local endpoint whatever its hint;
    // internal traffic follows the hints.
    add(
      out,
      svc("etplocal", "172.30.1.6", (s) => {
        s.spec!.type = "NodePort";
        s.spec!.ports![0].nodePort = 3016;
        s.spec!.externalTrafficPolicy = "Local";
      }),
      [
        ep("10.180.1.11", { node: NODE, forZones: ["zone-b"] }),
        ep("10.180.1.12", { node: "node-b", forZones: ["zone-a"] }),
      ],
    );
    return out;
  },
};

/** An external IP of an externalTrafficPolicy Local Service whose one endpoint runs elsewhere. */
export const ETP_LOCAL_ELSEWHERE: ObjectSet = {
  id: "etp-local-elsewhere",
  build() {
    const out = { services: [] as V1Service[], slices: [] as V1EndpointSlice[] };
    add(
      out,
      makeService("ns8", "svc8", (s) => {
        s.spec!.clusterIPs = ["172.30.0.48"];
        s.spec!.externalIPs = ["192.168.99.22"];
        s.spec!.externalTrafficPolicy = "Local";
      }),
      [ep("10.180.0.2")],
    );
    return out;
  },
};

/** NodePorts reached on 127.0.0.1 from the node itself, one situation per Service (node in zone-a). */
export const LOCALHOST_NODE_PORTS: ObjectSet = {
  id: "localhost-node-ports",
  build() {
    const out = { services: [] as V1Service[], slices: [] as V1EndpointSlice[] };
    const svc = (name: string, ip: string, nodePort: number, mutate: (s: V1Service) => void = () => {}) =>
      makeService("lo", name, (s) => {
        s.spec!.type = "NodePort";
        s.spec!.clusterIPs = [ip];
        s.spec!.ports![0].nodePort = nodePort;
        mutate(s);
      });
    add(out, svc("tcp", "172.30.2.1", 3101), [ep("10.180.2.1", { node: "node-b" }), ep("10.180.2.2")]);
    const dns = [{ name: "dns", port: 53, protocol: "UDP" as const }];
    add(
      out,
      svc("udp", "172.30.2.2", 3102, (s) => s.spec!.ports = [{ ...dns[0], nodePort: 3102 }]),
      [ep("10.180.2.3")],
      dns,
    );
    add(out, svc("local", "172.30.2.3", 3103, (s) => s.spec!.externalTrafficPolicy = "Local"), [
      ep("10.180.2.4", { node: NODE }),
      ep("10.180.2.5", { node: "node-b" }),
    ]);
    add(
      out,
      svc("elsewhere", "172.30.2.4", 3104, (s) => s.spec!.externalTrafficPolicy = "Local"),
      [ep("10.180.2.6", { node: "node-b" })],
    );
    add(
      out,
      svc("sticky", "172.30.2.5", 3105, (s) => {
        s.spec!.sessionAffinity = "ClientIP";
        s.spec!.sessionAffinityConfig = { clientIP: { timeoutSeconds: 600 } };
      }),
      [ep("10.180.2.7"), ep("10.180.2.8")],
    );
    add(out, svc("zonal", "172.30.2.6", 3106, (s) => s.spec!.trafficDistribution = "PreferClose"), [
      ep("10.180.2.9", { node: "node-b", forZones: ["zone-a"] }),
      ep("10.180.2.10", { node: "node-c", forZones: ["zone-b"] }),
    ]);
    return out;
  },
};

/**
 * One Service per kube-router scheduler annotation (`kube-router.io/service.scheduler`), three
 * endpoints each; the Maglev ones are NodePorts too.
 */
export const SCHEDULERS: ObjectSet = {
  id: "schedulers",
  build() {
    const out = { services: [] as V1Service[], slices: [] as V1EndpointSlice[] };
    const svc = (name: string, n: number, scheduler: string, flags?: string) =>
      add(
        out,
        makeService("sched", name, (s) => {
          s.spec!.clusterIPs = [`172.30.3.${n}`];
          s.metadata!.annotations = {
            "kube-router.io/service.scheduler": scheduler,
            ...(flags === undefined ? {} : { "kube-router.io/service.schedflags": flags }),
          };
          if (scheduler === "mh") {
            s.spec!.type = "NodePort";
            s.spec!.ports![0].nodePort = 3200 + n;
          }
        }),
        [1, 2, 3].map((i) => ep(`10.180.3.${n * 10 + i}`)),
      );
    svc("rr", 1, "rr");
    svc("sh", 2, "sh");
    svc("sh-port", 3, "sh", "flag-2");
    svc("dh", 4, "dh");
    svc("mh", 5, "mh");
    svc("mh-3-tuple", 6, "mh", "flag-1");
    svc("lc", 7, "lc");
    return out;
  },
};
