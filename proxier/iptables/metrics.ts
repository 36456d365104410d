/**
 * The iptables mode's own metrics, upstream's names: restore failures (shared with the ipvs mode,
 * `proxier/metrics.ts`) and the rules it owns.
 * @module
 */
import type { Nfacct } from "../../iptables/nfacct.ts";
import { Counter, Gauge, type Registry } from "../runtime/prometheus.ts";
import { IP_FAMILY_LABEL, registeredOnce, restoreFailureCounters } from "../metrics.ts";
import type { IPFamily } from "../model/types.ts";

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

/** The nfacct counter the INVALID-packet drop feeds (upstream's name). */
export const CT_STATE_INVALID_DROPPED = "ct_state_invalid_dropped_pkts";
/** The nfacct counter the NodePort rules on 127.0.0.0/8 feed (upstream's name). */
export const LOCALHOST_NODEPORTS_ACCEPTED = "localhost_nps_accepted_pkts";

/**
 * Registers upstream's two nfacct metrics for the counters of `available`, read from `nfacct` at each
 * scrape: `kubeproxy_iptables_ct_state_invalid_dropped_packets_total` and
 * `kubeproxy_iptables_localhost_nodeports_accepted_packets_total`, which operators read before
 * moving to nftables mode (which has neither INVALID drop nor localhost NodePorts). A counter that
 * cannot be read keeps its last value.
 */
export function nfacctMetrics(registry: Registry, nfacct: Nfacct, available: ReadonlySet<string>): void {
  const metrics: Array<[string, string, string]> = [
    [
      CT_STATE_INVALID_DROPPED,
      "kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
      "packets dropped by iptables to work around conntrack problems",
    ],
    [
      LOCALHOST_NODEPORTS_ACCEPTED,
      "kubeproxy_iptables_localhost_nodeports_accepted_packets_total",
      "Number of packets accepted on nodeports of loopback interface",
    ],
  ];
  for (const [counter, name, help] of metrics) {
    if (!available.has(counter)) continue;
    registeredOnce(registry, name, () =>
      new Counter({
        name,
        help,
        registers: [registry],
        async collect(this: Counter) {
          const totals = await nfacct.get(counter).catch(() => undefined);
          if (totals === undefined) return;
          this.reset();
          this.inc(totals.packets);
        },
      }));
  }
}
