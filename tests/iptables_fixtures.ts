/**
 * A representative set of Services (every iptables-mode feature at least once) and a proxier on
 * the fake iptables, for golden and packet-flow tests. Addresses follow fixtures.ts.
 * @module
 */
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { RecordingConntrack } from "../iptables/testing/fake_conntrack.ts";
import { FakeIPTables } from "../iptables/testing/fake_iptables.ts";
import { IptablesProxier, type IptablesProxierOptions } from "../proxier/iptables/proxier.ts";
import { baseOptions, ep, makeEndpointSlice, makeService, NODE } from "./fixtures.ts";

/** This node's IP in the flow tests. */
export const NODE_IP = "192.168.0.2";

/** The representative Services and slices. */
export function representativeObjects(): { services: V1Service[]; slices: V1EndpointSlice[] } {
  const services: V1Service[] = [];
  const slices: V1EndpointSlice[] = [];
  const add = (s: V1Service, eps: V1EndpointSlice["endpoints"], ports?: V1EndpointSlice["ports"]) => {
    services.push(s);
    slices.push(makeEndpointSlice(s.metadata!.namespace!, s.metadata!.name!, (x) => {
      x.endpoints = eps;
      if (ports) x.ports = ports;
    }));
  };
  // 1. ClusterIP with one remote endpoint (upstream's check vector names).
  add(makeService("ns1", "svc1"), [ep("10.180.0.1")]);
  // 2. NodePort + external IP, externalTrafficPolicy Local, one local and one remote endpoint.
  add(
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
    makeService("ns4", "svc4", (s) => {
      s.spec!.clusterIPs = ["172.30.0.44"];
      s.spec!.ports = [{ name: "dns", port: 53, protocol: "UDP" }];
    }),
    [],
    [{ name: "dns", port: 53, protocol: "UDP" }],
  );
  // 5. internalTrafficPolicy Local without a local endpoint: DROP.
  add(
    makeService("ns5", "svc5", (s) => {
      s.spec!.clusterIPs = ["172.30.0.45"];
      s.spec!.internalTrafficPolicy = "Local";
    }),
    [ep("10.180.0.6")],
  );
  // 6. SCTP, only a serving+terminating endpoint (and a not-serving one): the former is used.
  add(
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
  return { services, slices };
}

/** A proxier on a fake iptables with the representative objects loaded (not yet synced). */
export function iptablesSetup(over: Partial<IptablesProxierOptions> = {}, load = true) {
  const fake = new FakeIPTables();
  const conntrack = new RecordingConntrack();
  const opts = baseOptions();
  const proxier = new IptablesProxier({
    ...opts,
    iptables: fake,
    conntrack,
    masqueradeAll: false,
    masqueradeBit: 14,
    clusterCIDRs: ["10.180.0.0/16"],
    detectLocalMode: "ClusterCIDR",
    nodePortAddresses: [],
    localhostNodePorts: true,
    nodeIPs: [NODE_IP],
    ...over,
  });
  if (load) {
    const { services, slices } = representativeObjects();
    for (const s of services) proxier.onServiceAdd(s);
    for (const s of slices) proxier.onEndpointSliceAdd(s);
  }
  proxier.onServicesSynced();
  proxier.onEndpointSlicesSynced();
  return { fake, conntrack, proxier, log: opts.log, metrics: opts.metrics };
}
