/**
 * The iptables mode's own metrics, upstream's names: restore failures (shared with the ipvs mode,
 * `proxier/metrics.ts`) and the rules it owns.
 * @module
 */
import { Gauge, type Registry } from "../runtime/prometheus.ts";
import { IP_FAMILY_LABEL, registeredOnce, restoreFailureCounters } from "../metrics.ts";
import type { IPFamily } from "../types.ts";

/** What the iptables proxier of one family counts. */
export interface IptablesMetrics {
  readonly restoreFailures: ReturnType<typeof restoreFailureCounters>;
  /** Sets `kubeproxy_sync_proxy_rules_iptables_total` (rules the kernel holds from us) and `_last` (written). */
  rules(table: "filter" | "nat", total: number, lastWritten: number): void;
}

/** Returns the iptables metrics of `family` on `registry`, registering them once. */
export function iptablesMetrics(registry: Registry, family: IPFamily): IptablesMetrics {
  const gauge = (name: string, help: string) =>
    registeredOnce(
      registry,
      name,
      () => new Gauge({ name, help, registers: [registry], labelNames: [IP_FAMILY_LABEL, "table"] as const }),
    );
  const total = gauge(
    "kubeproxy_sync_proxy_rules_iptables_total",
    "Total number of iptables rules owned by kube-proxy",
  );
  const last = gauge(
    "kubeproxy_sync_proxy_rules_iptables_last",
    "Number of iptables rules written by kube-proxy in last sync",
  );
  return {
    restoreFailures: restoreFailureCounters(registry, family),
    rules(table, n, written) {
      total.set({ [IP_FAMILY_LABEL]: family, table }, n);
      last.set({ [IP_FAMILY_LABEL]: family, table }, written);
    },
  };
}
