/**
 * The userspace mode's own metrics (ours; upstream's userspace mode had none of these).
 * @module
 */
import { Counter, Gauge, type Registry } from "../runtime/prometheus.ts";
import { registeredOnce } from "../metrics.ts";
import type { IPFamily } from "../model/types.ts";

/** What the userspace proxier counts. */
export interface UserspaceMetrics {
  /** Counts a failed accept/receive on a proxy port (retried: too many open files...). */
  acceptError(): void;
  /** Counts a failed dial to an endpoint of the service port `service`. */
  dialFailure(service: string): void;
  /** Sets the service ports of `family` whose proxy or node port cannot be opened now. */
  unservedPorts(family: IPFamily, n: number): void;
  /** Counts a client closed (a datagram dropped) at once: outside `service`'s loadBalancerSourceRanges. */
  sourceRangeRefused(service: string): void;
}

/** Returns the userspace metrics on `registry`, registering them the first time. */
export function userspaceMetrics(registry: Registry): UserspaceMetrics {
  const accept = registeredOnce(registry, "kubeproxy_userspace_accept_errors_total", () =>
    new Counter({
      name: "kubeproxy_userspace_accept_errors_total",
      help: "Accepts and receives on proxy ports that failed and were retried (e.g. too many open files)",
      registers: [registry],
    }));
  const dial = registeredOnce(registry, "kubeproxy_userspace_dial_failures_total", () =>
    new Counter({
      name: "kubeproxy_userspace_dial_failures_total",
      help: "Connections to endpoints that failed or timed out, per service port",
      labelNames: ["service"] as const,
      registers: [registry],
    }));
  const unserved = registeredOnce(registry, "kubeproxy_userspace_unserved_service_ports", () =>
    new Gauge({
      name: "kubeproxy_userspace_unserved_service_ports",
      help:
        "Service ports not served because their proxy or node port cannot be opened (retried), per IP family",
      labelNames: ["ip_family"] as const,
      registers: [registry],
    }));
  const refused = registeredOnce(
    registry,
    "kubeproxy_userspace_source_range_refused_total",
    () =>
      new Counter({
        name: "kubeproxy_userspace_source_range_refused_total",
        help: "Connections closed (datagrams dropped) at once: their source is outside the Service's " +
          "loadBalancerSourceRanges, per service port",
        labelNames: ["service"] as const,
        registers: [registry],
      }),
  );
  return {
    sourceRangeRefused: (service) => refused.inc({ service }),
    acceptError: () => accept.inc(),
    dialFailure: (service) => dial.inc({ service }),
    unservedPorts: (family, n) => unserved.set({ ip_family: family }, n),
  };
}
