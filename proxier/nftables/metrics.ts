/**
 * The nftables mode's own metrics, upstream's names: failed transactions and failed cleanups of
 * stale chains.
 * @module
 */
import type { Registry } from "../runtime/prometheus.ts";
import { familyCounter } from "../metrics.ts";
import type { IPFamily } from "../types.ts";

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
