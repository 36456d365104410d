/**
 * Test fixtures. One address plan for every test:
 * - pods (endpoints)        10.180.0.0/16
 * - cluster IPs             172.30.0.0/16
 * - external / LB IPs       192.168.99.0/24 (only ever inside test network namespaces)
 * - node                    192.168.0.2     (only ever inside test network namespaces)
 * - this node's name        "node-a"; other nodes "node-b", ...
 * @module
 */
import type { V1EndpointSlice, V1Node, V1Service } from "@kubernetes/client-node";
import type { Fields, Logger } from "../../proxier/runtime/logger.ts";
import { FakeClock, realClock } from "../../proxier/runtime/clock.ts";
import { UserspaceProxier, type UserspaceProxierOptions } from "../../proxier/userspace/proxier.ts";
import { ProxyHealth } from "../../proxier/healthcheck/proxier_health.ts";
import { ProxyMetrics } from "../../proxier/metrics.ts";
import type { BaseProxierOptions } from "../../proxier/proxier_options.ts";

/** This node's name in tests. */
export const NODE = "node-a";

/** Returns a ClusterIP Service `ns/name` with one TCP port 80 named "p80", after `mutate`. */
export function makeService(ns: string, name: string, mutate: (s: V1Service) => void = () => {}): V1Service {
  const s: V1Service = {
    apiVersion: "v1",
    kind: "Service",
    metadata: { namespace: ns, name, resourceVersion: "1" },
    spec: {
      type: "ClusterIP",
      clusterIP: "172.30.0.41",
      clusterIPs: ["172.30.0.41"],
      ports: [{ name: "p80", port: 80, protocol: "TCP", targetPort: 80 as unknown as never }],
    },
  };
  mutate(s);
  return s;
}

/** Returns an IPv4 EndpointSlice `ns/name` of Service `ns/name` (label), empty, after `mutate`. */
export function makeEndpointSlice(
  ns: string,
  name: string,
  mutate: (s: V1EndpointSlice) => void = () => {},
): V1EndpointSlice {
  const s: V1EndpointSlice = {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      namespace: ns,
      name: `${name}-abcde`,
      labels: { "kubernetes.io/service-name": name },
      resourceVersion: "1",
    },
    addressType: "IPv4",
    ports: [{ name: "p80", port: 80, protocol: "TCP" }],
    endpoints: [],
  };
  mutate(s);
  return s;
}

/**
 * Returns an endpoint entry for a slice, on node-b unless `node` says otherwise; `forZones` and
 * `forNodes` set the EndpointSlice controller's topology hints.
 */
export function ep(
  ip: string,
  opts: {
    ready?: boolean;
    serving?: boolean;
    terminating?: boolean;
    node?: string;
    forZones?: string[];
    forNodes?: string[];
  } = {},
): NonNullable<V1EndpointSlice["endpoints"]>[number] {
  const hints = opts.forZones === undefined && opts.forNodes === undefined ? undefined : {
    forZones: opts.forZones?.map((name) => ({ name })),
    forNodes: opts.forNodes?.map((name) => ({ name })),
  };
  return {
    addresses: [ip],
    conditions: { ready: opts.ready ?? true, serving: opts.serving, terminating: opts.terminating },
    nodeName: opts.node ?? "node-b",
    ...(hints === undefined ? {} : { hints }),
  };
}

/** The zone label on Nodes. */
export { ZONE_LABEL } from "../../proxier/model/topology.ts";

/** Returns this test node's Node object, with `labels`. */
export function makeNode(name: string, labels: Record<string, string> = {}): V1Node {
  return { apiVersion: "v1", kind: "Node", metadata: { name, labels, resourceVersion: "1" } };
}

/** A logger that keeps every record, for asserting warnings. */
export class MemoryLogger implements Logger {
  readonly records: Array<{ level: string; msg: string; fields?: Fields }> = [];
  debug(msg: string, fields?: Fields): void {
    this.records.push({ level: "debug", msg, fields });
  }
  info(msg: string, fields?: Fields): void {
    this.records.push({ level: "info", msg, fields });
  }
  warn(msg: string, fields?: Fields): void {
    this.records.push({ level: "warn", msg, fields });
  }
  error(msg: string, fields?: Fields): void {
    this.records.push({ level: "error", msg, fields });
  }
  /** Messages at `level`. */
  messages(level: string): string[] {
    return this.records.filter((r) => r.level === level).map((r) => r.msg);
  }
}

/** Options for a proxier under test: fake clock, fresh metrics, memory logger. */
export function baseOptions(over: Partial<BaseProxierOptions> = {}): BaseProxierOptions & {
  clock: FakeClock;
  log: MemoryLogger;
} {
  const clock = new FakeClock();
  const log = new MemoryLogger();
  return {
    family: "IPv4",
    nodeName: NODE,
    log,
    clock,
    metrics: new ProxyMetrics(),
    health: new ProxyHealth({ clock, timeoutMs: 60_000 }),
    minSyncPeriodMs: 1000,
    syncPeriodMs: 30_000,
    ...over,
  } as BaseProxierOptions & { clock: FakeClock; log: MemoryLogger };
}

/** Strings that would change a kernel batch if any field could carry them into one. */
export const HOSTILE: readonly string[] = [
  "a b",
  "x\n-A INPUT -j ACCEPT",
  '" -j ACCEPT "',
  "-j ACCEPT",
  "$(reboot)",
  "x".repeat(5000),
  "10.0.0.1 -j ACCEPT",
];

/**
 * A userspace proxier serving NodePorts on 127.0.0.1 only (no portals, no iptables), on the real
 * clock, for tests with real sockets; `over` overrides its options.
 */
export function loopbackUserspaceProxier(over: Partial<UserspaceProxierOptions> = {}): UserspaceProxier {
  return new UserspaceProxier({
    ...baseOptions({ clock: realClock, minSyncPeriodMs: 0 }),
    listenAddress: "127.0.0.1",
    nodePortAddresses: ["127.0.0.1/32"],
    nodeIPs: ["127.0.0.1"],
    portRange: { min: 0, max: 0 },
    udpIdleTimeoutMs: 250,
    ...over,
  });
}
