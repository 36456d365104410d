/**
 * Upstream's kube-proxy metrics, on a registry of our own (no global state).
 * @module
 */
import { Counter, exponentialBuckets, Gauge, Histogram, Registry } from "prom-client";

/** The metrics every mode updates; names and buckets as upstream kube-proxy. */
export class ProxyMetrics {
  /** The registry `/metrics` renders. */
  readonly registry: Registry = new Registry();
  readonly syncDuration: Histogram;
  readonly syncFullDuration: Histogram;
  readonly syncPartialDuration: Histogram;
  readonly lastSyncTimestamp: Gauge;
  readonly networkProgrammingDuration: Histogram;
  readonly serviceChangesTotal: Counter;
  readonly serviceChangesPending: Gauge;
  readonly endpointChangesTotal: Counter;
  readonly endpointChangesPending: Gauge;
  readonly restoreFailuresTotal: Counter;
  readonly queuedTimestamp: Gauge;
  readonly syncFailuresTotal: Counter;
  readonly nftablesSyncFailuresTotal: Counter;
  readonly nftablesCleanupFailuresTotal: Counter;

  /** Registers every metric on a fresh registry. */
  constructor() {
    const registers = [this.registry];
    const syncBuckets = exponentialBuckets(0.001, 2, 15);
    this.syncDuration = new Histogram({
      name: "kubeproxy_sync_proxy_rules_duration_seconds",
      help: "SyncProxyRules latency in seconds",
      buckets: syncBuckets,
      registers,
    });
    this.syncFullDuration = new Histogram({
      name: "kubeproxy_sync_full_proxy_rules_duration_seconds",
      help: "SyncProxyRules latency in seconds for full resyncs",
      buckets: syncBuckets,
      registers,
    });
    this.syncPartialDuration = new Histogram({
      name: "kubeproxy_sync_partial_proxy_rules_duration_seconds",
      help: "SyncProxyRules latency in seconds for partial resyncs",
      buckets: syncBuckets,
      registers,
    });
    this.lastSyncTimestamp = new Gauge({
      name: "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
      help: "The last time proxy rules were successfully synced",
      registers,
    });
    this.networkProgrammingDuration = new Histogram({
      name: "kubeproxy_network_programming_duration_seconds",
      help: "In Cluster Network Programming Latency in seconds",
      buckets: [
        0.25,
        0.5,
        1,
        2,
        3,
        4,
        5,
        6,
        7,
        8,
        9,
        10,
        11,
        12,
        13,
        14,
        15,
        16,
        17,
        18,
        19,
        20,
        21,
        22,
        23,
        24,
        25,
        26,
        27,
        28,
        29,
        30,
        45,
        60,
        75,
        90,
        105,
        120,
        135,
        150,
        165,
        180,
        195,
        210,
        225,
        240,
        255,
        270,
        285,
        300,
      ],
      registers,
    });
    this.serviceChangesTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_service_changes_total",
      help: "Cumulative proxy rules Service changes",
      registers,
    });
    this.serviceChangesPending = new Gauge({
      name: "kubeproxy_sync_proxy_rules_service_changes_pending",
      help: "Pending proxy rules Service changes",
      registers,
    });
    this.endpointChangesTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_endpoint_changes_total",
      help: "Cumulative proxy rules Endpoint changes",
      registers,
    });
    this.endpointChangesPending = new Gauge({
      name: "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
      help: "Pending proxy rules Endpoint changes",
      registers,
    });
    this.restoreFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
      help: "Cumulative proxy iptables restore failures",
      registers,
    });
    this.queuedTimestamp = new Gauge({
      name: "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
      help: "The last time a sync of proxy rules was queued",
      registers,
    });
    this.nftablesSyncFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
      help: "Cumulative proxy nftables sync failures",
      registers,
    });
    this.nftablesCleanupFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
      help: "Cumulative proxy nftables cleanup failures",
      registers,
    });
    this.syncFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_failures_total",
      help: "Cumulative failed syncs of proxy rules (any mode)",
      registers,
    });
  }
}
