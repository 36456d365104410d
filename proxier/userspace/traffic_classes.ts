/**
 * The traffic classes of a service port in userspace mode: each has its own listeners and its own
 * rotation, so a proxy that cannot see which address a client asked for (a REDIRECT rewrites it)
 * still applies what the kernel modes apply per address:
 * - `internal`: the cluster IP; internalTrafficPolicy chooses.
 * - `external`: the NodePort and the external IPs (and load-balancer IPs without source ranges);
 *   externalTrafficPolicy chooses: with Local, this node's endpoints only, for every client (a proxy
 *   cannot tell a pod's connection through the node from an outside one, so there is no
 *   short-circuit), and nothing to reach without one.
 * - `load-balancer`: load-balancer IPs with `loadBalancerSourceRanges`: as external, and only
 *   clients inside the ranges are served; any other is closed at once (a datagram dropped).
 * @module
 */
import { cidrContains } from "../model/net.ts";
import { type CategorizedEndpoints, externalEndpoints, internalEndpoints } from "../model/topology.ts";
import type { EndpointInfo, ServicePortInfo } from "../model/types.ts";

/** Which of a service port's addresses a listener serves; see the module doc. */
export type TrafficClass = "internal" | "external" | "load-balancer";

/** One class of a service port: where it listens and whom it serves. */
export interface ClassPlan {
  readonly cls: TrafficClass;
  /** Its rotation's (and serving's) key: the service port's key, and the class but for internal. */
  readonly key: string;
  /** The service addresses portal rules send to its proxy port (none without portals). */
  readonly portalIPs: readonly string[];
  /** It listens on the NodePort too. */
  readonly nodePort: boolean;
  /** The clients it serves (`loadBalancerSourceRanges`); undefined: every client. */
  readonly allow?: readonly string[];
}

/** Returns the classes of port `key` (`portals`: REDIRECT rules are programmed); see the module doc. */
export function trafficClasses(key: string, info: ServicePortInfo, portals: boolean): ClassPlan[] {
  const out: ClassPlan[] = [];
  if (portals) out.push({ cls: "internal", key, portalIPs: [info.clusterIP], nodePort: false });
  const ranged = info.hasSourceRanges && info.loadBalancerIPs.length > 0;
  const externalIPs = portals ? [...info.externalIPs, ...(ranged ? [] : info.loadBalancerIPs)] : [];
  if (externalIPs.length > 0 || info.nodePort !== 0) {
    out.push({
      cls: "external",
      key: `${key}|external`,
      portalIPs: externalIPs,
      nodePort: info.nodePort !== 0,
    });
  }
  if (portals && ranged) {
    out.push({
      cls: "load-balancer",
      key: `${key}|load-balancer`,
      portalIPs: info.loadBalancerIPs,
      nodePort: false,
      allow: info.loadBalancerSourceRanges,
    });
  }
  return out;
}

/** Returns the endpoints class `cls` of `info` balances over. */
export function classEndpoints(
  cls: TrafficClass,
  info: ServicePortInfo,
  cat: CategorizedEndpoints,
): EndpointInfo[] {
  return cls === "internal" ? internalEndpoints(info, cat) : externalEndpoints(info, cat);
}

/** Returns whether class `plan` serves a client at `ip`. */
export function admits(plan: Pick<ClassPlan, "allow">, ip: string): boolean {
  return plan.allow === undefined || plan.allow.some((cidr) => cidrContains(cidr, ip));
}
