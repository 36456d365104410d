/**
 * Stale UDP conntrack entries, for every mode that NATs in the kernel: after a sync, entries that
 * would keep UDP clients on an endpoint that is gone (or on a REJECT from before a service had
 * endpoints) are deleted, or DNS clients stay pinned to dead pods.
 * @module
 */
import type { Conntrack } from "../../iptables/conntrack.ts";
import type { EndpointsUpdateResult } from "../endpoints_change_tracker.ts";
import type { ServiceUpdateResult } from "../service_change_tracker.ts";
import type { Logger } from "../runtime/logger.ts";
import { ipFamily } from "../net.ts";
import type { IPFamily, ServicePortMap } from "../types.ts";

/**
 * Deletes the entries the sync in `ctx` made stale, for `family`. A failed deletion is logged and
 * the others still run: a leftover entry only delays a client until it expires.
 */
export async function clearStaleConntrack(
  ct: Conntrack,
  family: IPFamily,
  ctx: {
    readonly services: ServicePortMap;
    readonly serviceChanges: Pick<ServiceUpdateResult, "deletedUDPClusterIPs">;
    readonly endpointChanges: Pick<EndpointsUpdateResult, "deletedUDPEndpoints" | "newlyActiveUDPServices">;
  },
  log: Logger,
): Promise<void> {
  const jobs: Array<() => Promise<void>> = [];
  for (const ip of ctx.serviceChanges.deletedUDPClusterIPs) jobs.push(() => ct.clearServiceIP(ip, "udp"));
  for (const key of ctx.endpointChanges.newlyActiveUDPServices) {
    const svc = ctx.services.get(key);
    if (svc === undefined) continue;
    // Entries created while the service rejected traffic would keep rejecting.
    for (const ip of [svc.clusterIP, ...svc.externalIPs, ...svc.loadBalancerIPs]) {
      jobs.push(() => ct.clearServiceIP(ip, "udp", svc.port));
    }
    if (svc.nodePort !== 0) jobs.push(() => ct.clearNodePort(svc.nodePort, "udp"));
  }
  for (const [key, gone] of ctx.endpointChanges.deletedUDPEndpoints) {
    const svc = ctx.services.get(key);
    if (svc === undefined) continue;
    for (const e of gone) {
      if (ipFamily(e.ip) !== family) continue;
      for (const ip of [svc.clusterIP, ...svc.externalIPs, ...svc.loadBalancerIPs]) {
        jobs.push(() => ct.clearEndpoint(ip, e.ip, "udp"));
      }
      if (svc.nodePort !== 0) jobs.push(() => ct.clearNodePort(svc.nodePort, "udp", e.ip));
    }
  }
  for (const job of jobs) {
    try {
      await job();
    } catch (e) {
      log.warn("Failed to delete stale conntrack entries", { error: (e as Error).message });
    }
  }
}
