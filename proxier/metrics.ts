/**
 * Upstream's kube-proxy metrics, on a registry of our own (no global state). Every sync metric
 * carries the `ip_family` label, as upstream's (1.31+): each family's proxier writes its own series.
 * @module
 */
import { Counter, exponentialBuckets, Gauge, Histogram, linearBuckets, Registry } from "prom-client";
import type { IPFamily } from "./types.ts";

const FAMILY = "ip_family";

/** Upstream's network programming buckets: 0, 0.25 s, 0.5 s, 1-59 s, 60-115 s by 5, 2-5 min by 30 s. */
const NPL_BUCKETS = [
  0,
  ...linearBuckets(0.25, 0.25, 2),
  ...linearBuckets(1, 1, 59),
  ...linearBuckets(60, 5, 12),
  ...linearBuckets(120, 30, 7),
];

/** What one family's proxier writes: the metrics below, bound to its `ip_family` label. */
export interface FamilyMetrics {
  readonly syncDuration: { observe(v: number): void };
  readonly syncFullDuration: { observe(v: number): void };
  readonly syncPartialDuration: { observe(v: number): void };
  readonly lastSyncTimestamp: { set(v: number): void };
  readonly networkProgrammingDuration: { observe(v: number): void };
  readonly serviceChangesTotal: { inc(v?: number): void };
  readonly serviceChangesPending: { set(v: number): void };
  readonly endpointChangesTotal: { inc(v?: number): void };
  readonly endpointChangesPending: { set(v: number): void };
  readonly restoreFailuresTotal: { inc(v?: number): void };
  readonly partialRestoreFailuresTotal: { inc(v?: number): void };
  readonly queuedTimestamp: { set(v: number): void };
  readonly syncFailuresTotal: { inc(v?: number): void };
  readonly nftablesSyncFailuresTotal: { inc(v?: number): void };
  readonly nftablesCleanupFailuresTotal: { inc(v?: number): void };
}

/** The metrics every mode updates; names, buckets and labels as upstream kube-proxy. */
export class ProxyMetrics {
  /** The registry `/metrics` renders. */
  readonly registry: Registry = new Registry();
  readonly syncDuration: Histogram<typeof FAMILY>;
  readonly syncFullDuration: Histogram<typeof FAMILY>;
  readonly syncPartialDuration: Histogram<typeof FAMILY>;
  readonly lastSyncTimestamp: Gauge<typeof FAMILY>;
  readonly networkProgrammingDuration: Histogram<typeof FAMILY>;
  readonly serviceChangesTotal: Counter<typeof FAMILY>;
  readonly serviceChangesPending: Gauge<typeof FAMILY>;
  readonly endpointChangesTotal: Counter<typeof FAMILY>;
  readonly endpointChangesPending: Gauge<typeof FAMILY>;
  readonly restoreFailuresTotal: Counter<typeof FAMILY>;
  readonly partialRestoreFailuresTotal: Counter<typeof FAMILY>;
  readonly queuedTimestamp: Gauge<typeof FAMILY>;
  readonly syncFailuresTotal: Counter<typeof FAMILY>;
  readonly nftablesSyncFailuresTotal: Counter<typeof FAMILY>;
  readonly nftablesCleanupFailuresTotal: Counter<typeof FAMILY>;

  /** Registers every metric on a fresh registry. */
  constructor() {
    const common = { registers: [this.registry], labelNames: [FAMILY] as const };
    const syncBuckets = exponentialBuckets(0.001, 2, 15);
    this.syncDuration = new Histogram({
      name: "kubeproxy_sync_proxy_rules_duration_seconds",
      help: "SyncProxyRules latency in seconds",
      buckets: syncBuckets,
      ...common,
    });
    this.syncFullDuration = new Histogram({
      name: "kubeproxy_sync_full_proxy_rules_duration_seconds",
      help: "SyncProxyRules latency in seconds for full resyncs",
      buckets: syncBuckets,
      ...common,
    });
    this.syncPartialDuration = new Histogram({
      name: "kubeproxy_sync_partial_proxy_rules_duration_seconds",
      help: "SyncProxyRules latency in seconds for partial resyncs",
      buckets: syncBuckets,
      ...common,
    });
    this.lastSyncTimestamp = new Gauge({
      name: "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
      help: "The last time proxy rules were successfully synced",
      ...common,
    });
    this.networkProgrammingDuration = new Histogram({
      name: "kubeproxy_network_programming_duration_seconds",
      help: "In Cluster Network Programming Latency in seconds",
      buckets: NPL_BUCKETS,
      ...common,
    });
    this.serviceChangesTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_service_changes_total",
      help: "Cumulative proxy rules Service changes",
      ...common,
    });
    this.serviceChangesPending = new Gauge({
      name: "kubeproxy_sync_proxy_rules_service_changes_pending",
      help: "Pending proxy rules Service changes",
      ...common,
    });
    this.endpointChangesTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_endpoint_changes_total",
      help: "Cumulative proxy rules Endpoint changes",
      ...common,
    });
    this.endpointChangesPending = new Gauge({
      name: "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
      help: "Pending proxy rules Endpoint changes",
      ...common,
    });
    this.restoreFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
      help: "Cumulative proxy iptables restore failures",
      ...common,
    });
    this.partialRestoreFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
      help: "Cumulative proxy iptables partial restore failures",
      ...common,
    });
    this.queuedTimestamp = new Gauge({
      name: "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
      help: "The last time a sync of proxy rules was queued",
      ...common,
    });
    this.nftablesSyncFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
      help: "Cumulative proxy nftables sync failures",
      ...common,
    });
    this.nftablesCleanupFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
      help: "Cumulative proxy nftables cleanup failures",
      ...common,
    });
    this.syncFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_failures_total",
      help: "Cumulative failed syncs of proxy rules (any mode)",
      ...common,
    });
  }

  /** Returns the metrics bound to `family`'s label: what that family's proxier writes. */
  family(family: IPFamily): FamilyMetrics {
    const l = { [FAMILY]: family };
    return {
      syncDuration: this.syncDuration.labels(l),
      syncFullDuration: this.syncFullDuration.labels(l),
      syncPartialDuration: this.syncPartialDuration.labels(l),
      lastSyncTimestamp: this.lastSyncTimestamp.labels(l),
      networkProgrammingDuration: this.networkProgrammingDuration.labels(l),
      serviceChangesTotal: this.serviceChangesTotal.labels(l),
      serviceChangesPending: this.serviceChangesPending.labels(l),
      endpointChangesTotal: this.endpointChangesTotal.labels(l),
      endpointChangesPending: this.endpointChangesPending.labels(l),
      restoreFailuresTotal: this.restoreFailuresTotal.labels(l),
      partialRestoreFailuresTotal: this.partialRestoreFailuresTotal.labels(l),
      queuedTimestamp: this.queuedTimestamp.labels(l),
      syncFailuresTotal: this.syncFailuresTotal.labels(l),
      nftablesSyncFailuresTotal: this.nftablesSyncFailuresTotal.labels(l),
      nftablesCleanupFailuresTotal: this.nftablesCleanupFailuresTotal.labels(l),
    };
  }
}
