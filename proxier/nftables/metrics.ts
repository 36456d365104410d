/**
 * The nftables mode's own metrics, upstream's names: failed transactions and failed cleanups of
 * stale chains, and the localhost NodePort listeners (1.37).
 * @module
 */
import { Gauge, type Registry } from "../runtime/prometheus.ts";
import { familyCounter, IP_FAMILY_LABEL, registeredOnce } from "../metrics.ts";
import type { LocalhostNodePortMetrics } from "../socket_proxy/localhost_node_ports.ts";
import type { IPFamily } from "../model/types.ts";

/** Returns the nftables failure counters of `family` on `registry`, registering them once. */
export function nftablesMetrics(
  registry: Registry,
  family: IPFamily,
): { readonly syncFailures: { inc(): void }; readonly cleanupFailures: { inc(): void } } {
  return {
    syncFailures: familyCounter(
      registry,
      family,
      "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
      "Cumulative proxy nftables sync failures",
    ),
    cleanupFailures: familyCounter(
      registry,
      family,
      "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
      "Cumulative proxy nftables cleanup failures",
    ),
  };
}

/** Returns upstream's localhost NodePort metrics of `family` on `registry`, registering them once. */
export function localhostNodePortMetrics(registry: Registry, family: IPFamily): LocalhostNodePortMetrics {
  const name = "kubeproxy_nftables_localhost_nodeport_listeners";
  const listeners = registeredOnce(registry, name, () =>
    new Gauge({
      name,
      help: "Number of active localhost NodePort listeners",
      registers: [registry],
      labelNames: [IP_FAMILY_LABEL] as const,
    })).labels({ [IP_FAMILY_LABEL]: family });
  const failures = familyCounter(
    registry,
    family,
    "kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total",
    "Cumulative failures to create a localhost NodePort listener",
  );
  return { listeners: (n) => listeners.set(n), creationFailed: () => failures.inc() };
}
