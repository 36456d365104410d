/**
 * Endpoint selection for every mode, as upstream's `CategorizeEndpoints` (pkg/proxy/topology.go):
 * - ready endpoints, or serving+terminating ones when none is ready (independently for Cluster
 *   and Local policy);
 * - split by internal and external traffic policy;
 * - for Cluster policy, topology hints: when every ready endpoint is hinted for some node and one
 *   for this node, only those (PreferSameNode); else when every ready endpoint is hinted for some
 *   zone and one for this node's zone, only those; otherwise all. Local policy ignores hints, and
 *   so does the serving+terminating fallback.
 * The Service's own fields do not switch hints on here: the EndpointSlice controller publishes
 * them only for Services that ask (`trafficDistribution`, `service.kubernetes.io/topology-mode`).
 * @module
 */
import type { Logger } from "../runtime/logger.ts";
import type { EndpointInfo, ServicePortInfo } from "./types.ts";
import { servicePortNameString } from "./types.ts";

/** The Node label that names this node's zone. */
export const ZONE_LABEL = "topology.kubernetes.io/zone";

/** Where this proxy runs, as far as endpoint selection cares. */
export interface NodeTopology {
  readonly nodeName: string;
  /** The node's `topology.kubernetes.io/zone` label; "" when unlabelled. */
  readonly zone: string;
}

/** The endpoint sets one service port uses. */
export interface CategorizedEndpoints {
  /** Cluster-policy endpoints; empty when the port never uses Cluster policy. */
  readonly cluster: EndpointInfo[];
  /** Local-policy endpoints (on this node); empty when the port never uses Local policy. */
  readonly local: EndpointInfo[];
  /** Every endpoint reachable from this node: the union of the two, cluster ones first. */
  readonly all: EndpointInfo[];
  /** Some usable endpoint exists anywhere in the cluster (even when `all` is empty). */
  readonly hasAny: boolean;
  /**
   * Traffic from inside the cluster to the cluster IP has an endpoint to go to: some exists, and
   * with internalTrafficPolicy Local one is on this node. False with `hasAny`: drop, not reject.
   */
  readonly hasInternal: boolean;
  /** The same for traffic from outside (NodePorts, external and load-balancer IPs). */
  readonly hasExternal: boolean;
}

/** Returns true when the port takes traffic from outside the cluster. */
export function externallyAccessible(s: ServicePortInfo): boolean {
  return s.nodePort !== 0 || s.externalIPs.length > 0 || s.loadBalancerIPs.length > 0;
}

/**
 * Returns true when `e` can take new connections: it is ready, or it is terminating and still
 * serving (such endpoints are used only while none is ready: {@linkcode usableEndpoints}).
 */
export function canServe(e: EndpointInfo): boolean {
  return e.ready || (e.serving && e.terminating);
}

/**
 * Returns the ready endpoints among those `keep` accepts, or, when none is ready, the serving and
 * terminating ones (a rolling update's last pods keep serving until their replacements are ready).
 */
export function usableEndpoints(
  eps: readonly EndpointInfo[],
  keep: (e: EndpointInfo) => boolean = () => true,
): EndpointInfo[] {
  const ready = eps.filter((e) => e.ready && keep(e));
  return ready.length > 0 ? ready : eps.filter((e) => !e.ready && canServe(e) && keep(e));
}

/** Which hints restrict Cluster-policy endpoints on this node ("" none). */
export type TopologyMode = "" | "PreferSameNode" | "PreferSameZone";

/** Returns the topology mode the ready endpoints' hints give, logging (debug) why hints are ignored. */
export function topologyMode(
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[],
  topo: NodeTopology,
  log?: Logger,
): TopologyMode {
  let anyReady = false;
  let allNodeHints = true, forNode = false, allZoneHints = true, forZone = false;
  for (const e of eps) {
    if (!e.ready) continue;
    anyReady = true;
    if (e.nodeHints.length === 0) allNodeHints = false;
    else if (e.nodeHints.includes(topo.nodeName)) forNode = true;
    if (e.zoneHints.length === 0) allZoneHints = false;
    else if (e.zoneHints.includes(topo.zone)) forZone = true;
  }
  if (!anyReady) return "";
  const service = () => servicePortNameString(svc.name);
  if (allNodeHints) {
    if (forNode) return "PreferSameNode";
    log?.debug("Ignoring same-node topology hints for service since no hints were provided for node", {
      service: service(),
      node: topo.nodeName,
    });
  }
  if (!allZoneHints) return "";
  if (forZone) return "PreferSameZone";
  if (topo.zone === "") {
    log?.debug("Ignoring same-zone topology hints for service since node is missing label", {
      service: service(),
      label: ZONE_LABEL,
    });
  } else {
    log?.debug("Ignoring same-zone topology hints for service since no hints were provided for zone", {
      service: service(),
      zone: topo.zone,
    });
  }
  return "";
}

/**
 * Splits a port's endpoints by traffic policy and topology; see the module doc and
 * {@linkcode CategorizedEndpoints}.
 */
export function categorizeEndpoints(
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[],
  topo: NodeTopology,
  log?: Logger,
): CategorizedEndpoints {
  // Even with externalTrafficPolicy Local, Cluster endpoints serve pods and the node itself
  // ("short-circuit"), so any externally accessible port uses them.
  const usesCluster = !svc.internalPolicyLocal || externallyAccessible(svc);
  const usesLocal = svc.internalPolicyLocal || (svc.externalPolicyLocal && externallyAccessible(svc));
  let cluster: EndpointInfo[] = [];
  if (usesCluster) {
    const mode = topologyMode(svc, eps, topo, log);
    cluster = mode === "PreferSameNode"
      ? eps.filter((e) => e.ready && e.nodeHints.includes(topo.nodeName))
      : mode === "PreferSameZone"
      ? eps.filter((e) => e.ready && e.zoneHints.includes(topo.zone))
      : eps.filter((e) => e.ready);
    // A topology mode is only chosen when it leaves a ready endpoint, so an empty set here means
    // no endpoint is ready anywhere: fall back to serving+terminating ones, hints ignored.
    if (cluster.length === 0) cluster = usableEndpoints(eps);
  }
  let hasAny = cluster.length > 0;
  let local: EndpointInfo[] = [];
  if (usesLocal) {
    local = usableEndpoints(eps, (e) => e.isLocal);
    if (eps.some(canServe)) hasAny = true;
  }
  const hasInternal = hasAny && (!svc.internalPolicyLocal || local.length > 0);
  const hasExternal = hasAny && (!svc.externalPolicyLocal || local.length > 0);
  let all = cluster;
  if (!usesCluster) all = local;
  else if (usesLocal) {
    const seen = new Set(cluster.map((e) => e.key));
    all = [...cluster, ...local.filter((e) => !seen.has(e.key))];
  }
  return { cluster, local, all, hasAny, hasInternal, hasExternal };
}

/** Returns the endpoints traffic from inside the cluster to the port's cluster IP uses. */
export function internalEndpoints(svc: ServicePortInfo, c: CategorizedEndpoints): EndpointInfo[] {
  return svc.internalPolicyLocal ? c.local : c.cluster;
}

/**
 * Returns the endpoints traffic from outside the cluster (NodePorts, external and load-balancer
 * IPs) uses: with externalTrafficPolicy Local only this node's, without the short-circuits the
 * kernel modes give pods and the node itself.
 */
export function externalEndpoints(svc: ServicePortInfo, c: CategorizedEndpoints): EndpointInfo[] {
  return svc.externalPolicyLocal ? c.local : c.cluster;
}

/**
 * Counts the service ports with a Local traffic policy and no usable local endpoint, per policy
 * (upstream's `kubeproxy_sync_proxy_rules_no_local_endpoints_total`): their traffic is dropped here.
 */
export function countNoLocalEndpoints(
  services: ReadonlyMap<string, ServicePortInfo>,
  endpoints: ReadonlyMap<string, readonly EndpointInfo[]>,
): { internal: number; external: number } {
  let internal = 0;
  let external = 0;
  // forEach: every sync walks every port, and a for-of over entries allocates a pair per port.
  services.forEach((svc, key) => {
    const externalLocal = svc.externalPolicyLocal && externallyAccessible(svc);
    if (!svc.internalPolicyLocal && !externalLocal) return;
    const eps = endpoints.get(key) ?? [];
    if (eps.some((e) => e.isLocal && canServe(e))) return;
    if (svc.internalPolicyLocal) internal++;
    if (externalLocal) external++;
  });
  return { internal, external };
}
