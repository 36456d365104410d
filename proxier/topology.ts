/**
 * Endpoint selection for every mode, as upstream's `CategorizeEndpoints`: ready endpoints, or
 * serving+terminating ones when none is ready (independently for Cluster and Local policy), split
 * by internal and external traffic policy.
 * @module
 */
import type { EndpointInfo, ServicePortInfo } from "./types.ts";

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
}

/** Returns true when the port takes traffic from outside the cluster. */
export function externallyAccessible(s: ServicePortInfo): boolean {
  return s.nodePort !== 0 || s.externalIPs.length > 0 || s.loadBalancerIPs.length > 0;
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
  return ready.length > 0 ? ready : eps.filter((e) => e.serving && e.terminating && keep(e));
}

/** Splits a port's endpoints by traffic policy; see {@linkcode CategorizedEndpoints}. */
export function categorizeEndpoints(
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[],
): CategorizedEndpoints {
  // Even with externalTrafficPolicy Local, Cluster endpoints serve pods and the node itself
  // ("short-circuit"), so any externally accessible port uses them.
  const usesCluster = !svc.internalPolicyLocal || externallyAccessible(svc);
  const usesLocal = svc.internalPolicyLocal || (svc.externalPolicyLocal && externallyAccessible(svc));
  const cluster = usesCluster ? usableEndpoints(eps) : [];
  let hasAny = cluster.length > 0;
  if (!usesLocal) return { cluster, local: [], all: cluster, hasAny };
  const local = usableEndpoints(eps, (e) => e.isLocal);
  if (eps.some((e) => e.ready || (e.serving && e.terminating))) hasAny = true;
  if (!usesCluster) return { cluster, local, all: local, hasAny };
  const seen = new Set(cluster.map((e) => e.key));
  return { cluster, local, all: [...cluster, ...local.filter((e) => !seen.has(e.key))], hasAny };
}
