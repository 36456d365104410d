/**
 * The proxy's model: what every mode programs, built from Services and EndpointSlices.
 * @module
 */

/** A transport protocol a Service port can carry. */
export type Protocol = "TCP" | "UDP" | "SCTP";

/** The IP family one proxier instance programs. */
export type IPFamily = "IPv4" | "IPv6";

/** Every protocol kube-proxy programs, in the order rules are written. */
export const PROTOCOLS: readonly Protocol[] = ["TCP", "UDP", "SCTP"];

/** Identifies one port of one Service, as upstream's `ServicePortName`. */
export interface ServicePortName {
  readonly namespace: string;
  readonly name: string;
  /** The Service port's name; empty for an unnamed (single) port. */
  readonly port: string;
  readonly protocol: Protocol;
}

/**
 * Returns upstream's string form: `ns/name:port`, or `ns/name` for an unnamed port.
 * This text feeds the chain-name hashes, so it must not change.
 */
export function servicePortNameString(n: ServicePortName): string {
  return n.port === "" ? `${n.namespace}/${n.name}` : `${n.namespace}/${n.name}:${n.port}`;
}

/** Returns the map key of a ServicePortName: its string form plus the protocol. */
export function servicePortKey(n: ServicePortName): string {
  return `${servicePortNameString(n)}/${n.protocol}`;
}

/** Returns `namespace/name`, the key of a Service (and of its EndpointSlices' service). */
export function namespacedName(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** One port of one Service, for one IP family, validated. */
export interface ServicePortInfo {
  readonly name: ServicePortName;
  /** `namespace/name` of the Service. */
  readonly service: string;
  readonly clusterIP: string;
  readonly port: number;
  readonly protocol: Protocol;
  /** 0 when the Service has no node port for this port. */
  readonly nodePort: number;
  readonly externalIPs: readonly string[];
  /** LoadBalancer ingress IPs with ipMode VIP (or unset). */
  readonly loadBalancerIPs: readonly string[];
  /** CIDRs; empty means every source is allowed. */
  readonly loadBalancerSourceRanges: readonly string[];
  /**
   * The Service sets loadBalancerSourceRanges at all (maybe only for the other family or only
   * invalid entries): the firewall applies, and an empty list for this family admits nobody.
   */
  readonly hasSourceRanges: boolean;
  /** 0 when sessionAffinity is not ClientIP, else the timeout in seconds. */
  readonly stickyMaxAgeSeconds: number;
  /** externalTrafficPolicy Local, only for Services that have external addresses. */
  readonly externalPolicyLocal: boolean;
  /** internalTrafficPolicy Local. */
  readonly internalPolicyLocal: boolean;
  /** 0 when none. */
  readonly healthCheckNodePort: number;
  /** kube-router's `kube-router.io/service.scheduler` (ipvs and nftables modes), when set and valid. */
  readonly scheduler?: string;
  /** kube-router's `kube-router.io/service.schedflags` (`flag-1`..`flag-3`), when set and valid. */
  readonly schedFlags?: readonly string[];
}

/** One endpoint (address and port) of one Service port. */
export interface EndpointInfo {
  readonly ip: string;
  readonly port: number;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  /** The endpoint runs on this node. */
  readonly isLocal: boolean;
  /** Zones the EndpointSlice controller hints this endpoint for (`hints.forZones`); often none. */
  readonly zoneHints: readonly string[];
  /** Nodes it is hinted for (`hints.forNodes`, PreferSameNode); often none. */
  readonly nodeHints: readonly string[];
  /** Upstream's endpoint string: `ip:port`, IPv6 as `[ip]:port`. */
  readonly key: string;
}

/** Current service ports, keyed by {@linkcode servicePortKey}. */
export type ServicePortMap = Map<string, ServicePortInfo>;

/** Current endpoints, keyed by {@linkcode servicePortKey}. */
export type EndpointsMap = Map<string, readonly EndpointInfo[]>;

/** Returns upstream's `ip:port` form, with brackets for IPv6. */
export function joinHostPort(ip: string, port: number): string {
  return ip.includes(":") ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/** Returns true when both maps hold the same keys with JSON-equal values. */
export function sameEntries<V>(a: ReadonlyMap<string, V>, b: ReadonlyMap<string, V>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) {
    const w = b.get(k);
    if (w === undefined || JSON.stringify(v) !== JSON.stringify(w)) return false;
  }
  return true;
}
