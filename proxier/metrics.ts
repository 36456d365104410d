/**
 * Upstream's kube-proxy metrics, on a registry of our own (no global state). Every sync metric
 * carries the `ip_family` label, as upstream's (1.31+): each family's proxier writes its own series.
 * @module
 */
import {
  Counter,
  exponentialBuckets,
  Gauge,
  Histogram,
  linearBuckets,
  Registry,
} from "./runtime/prometheus.ts";
import { registerProcessMetrics } from "./runtime/process_metrics.ts";
import type { IPFamily } from "./model/types.ts";
import type { ChangeCounters } from "./model/pending_changes.ts";
import { VERSION } from "./runtime/version.ts";

/** The label every per-family series carries, as upstream (1.31+). */
export const IP_FAMILY_LABEL = "ip_family";
const FAMILY = IP_FAMILY_LABEL;

/** This build's version for `kubernetes_build_info`. */
const BUILD = { version: VERSION, major: VERSION.split(".")[0], minor: VERSION.split(".")[1] } as const;

/** Upstream's network programming buckets: 0, 0.25 s, 0.5 s, 1-59 s, 60-115 s by 5, 2-5 min by 30 s. */
const NPL_BUCKETS = [
  0,
  ...linearBuckets(0.25, 0.25, 2),
  ...linearBuckets(1, 1, 59),
  ...linearBuckets(60, 5, 12),
  ...linearBuckets(120, 30, 7),
];

/**
 * What one family's proxier writes: the metrics below, bound to its `ip_family` label (the change
 * counters are the trackers', which the model declares).
 */
export interface FamilyMetrics extends ChangeCounters {
  readonly syncDuration: { observe(v: number): void };
  readonly syncFullDuration: { observe(v: number): void };
  readonly syncPartialDuration: { observe(v: number): void };
  readonly lastSyncTimestamp: { set(v: number): void };
  readonly networkProgrammingDuration: { observe(v: number): void };
  readonly queuedTimestamp: { set(v: number): void };
  readonly syncFailuresTotal: { inc(v?: number): void };
  /** Ours: syncs made full because the kernel state had drifted (rules flushed or deleted by others). */
  readonly driftRepairsTotal: { inc(v?: number): void };
  /** Ours: those of the repairs that rewrote what another instance of this program wrote. */
  readonly otherWritersTotal: { inc(v?: number): void };
  /** Sets `kubeproxy_sync_proxy_rules_no_local_endpoints_total`: Local-policy services without local endpoints. */
  noLocalEndpoints(internal: number, external: number): void;
  /**
   * Records a sync that succeeded: its duration (and as a full or partial one), when it ended
   * (`nowMs`), and the network programming latency of each change it applied (their trigger times).
   */
  syncSucceeded(seconds: number, full: boolean, nowMs: number, triggerTimesMs: readonly number[]): void;
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
  readonly serviceChangesTotal: Counter;
  readonly serviceChangesPending: Gauge;
  readonly endpointChangesTotal: Counter;
  readonly endpointChangesPending: Gauge;
  readonly queuedTimestamp: Gauge<typeof FAMILY>;
  readonly syncFailuresTotal: Counter<typeof FAMILY>;
  readonly driftRepairsTotal: Counter<typeof FAMILY>;
  readonly otherWritersTotal: Counter<typeof FAMILY>;
  readonly noLocalEndpointsTotal: Gauge<typeof FAMILY | "traffic_policy">;
  readonly healthzTotal: Counter<"code">;
  readonly livezTotal: Counter<"code">;
  /** client-go's: every API request by status code (`<error>` when none came), method and host. */
  readonly restClientRequestsTotal: Counter<"code" | "host" | "method">;
  /** client-go's: API request latency by verb and host. */
  readonly restClientRequestDuration: Histogram<"host" | "verb">;

  /**
   * Registers the metrics every mode writes on a fresh registry; each mode registers its own on
   * the same registry when its proxier is built (`proxier/<mode>/metrics.ts`), as upstream
   * registers per mode.
   */
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
      registers: [this.registry],
    });
    this.serviceChangesPending = new Gauge({
      name: "kubeproxy_sync_proxy_rules_service_changes_pending",
      help: "Pending proxy rules Service changes",
      registers: [this.registry],
    });
    this.endpointChangesTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_endpoint_changes_total",
      help: "Cumulative proxy rules Endpoint changes",
      registers: [this.registry],
    });
    this.endpointChangesPending = new Gauge({
      name: "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
      help: "Pending proxy rules Endpoint changes",
      registers: [this.registry],
    });
    this.queuedTimestamp = new Gauge({
      name: "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
      help: "The last time a sync of proxy rules was queued",
      ...common,
    });
    this.noLocalEndpointsTotal = new Gauge({
      name: "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
      help: "Number of services with a Local traffic policy and no endpoints",
      registers: [this.registry],
      labelNames: [FAMILY, "traffic_policy"] as const,
    });
    this.healthzTotal = new Counter({
      name: "kubeproxy_proxy_healthz_total",
      help: "Cumulative proxy healthz HTTP status",
      registers: [this.registry],
      labelNames: ["code"] as const,
    });
    this.livezTotal = new Counter({
      name: "kubeproxy_proxy_livez_total",
      help: "Cumulative proxy livez HTTP status",
      registers: [this.registry],
      labelNames: ["code"] as const,
    });
    this.restClientRequestsTotal = new Counter({
      name: "rest_client_requests_total",
      help: "Number of HTTP requests, partitioned by status code, method, and host.",
      registers: [this.registry],
      labelNames: ["code", "host", "method"] as const,
    });
    this.restClientRequestDuration = new Histogram({
      name: "rest_client_request_duration_seconds",
      help: "Request latency in seconds. Broken down by verb, and host.",
      buckets: [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
      registers: [this.registry],
      labelNames: ["host", "verb"] as const,
    });
    new Gauge({
      name: "kubernetes_build_info",
      help: "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree " +
        "state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
      registers: [this.registry],
      labelNames: [
        "build_date",
        "compiler",
        "git_commit",
        "git_tree_state",
        "git_version",
        "go_version",
        "major",
        "minor",
        "platform",
      ] as const,
    }).set({
      build_date: "",
      compiler: "deno",
      git_commit: "",
      git_tree_state: "",
      git_version: `v${BUILD.version}-kube-proxy-deno`,
      go_version: `deno${Deno.version.deno}`,
      major: BUILD.major,
      minor: BUILD.minor,
      platform: `${Deno.build.os}/${Deno.build.arch === "x86_64" ? "amd64" : "arm64"}`,
    }, 1);
    registerProcessMetrics(this.registry);
    this.driftRepairsTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_drift_repairs_total",
      help: "Syncs made full because rules this proxy owns were changed or removed by someone else (ours)",
      ...common,
    });
    this.otherWritersTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_other_writer_repairs_total",
      help:
        "Drift repairs that rewrote rules another instance of this program wrote (two proxies on one node; ours)",
      ...common,
    });
    this.syncFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_failures_total",
      help: "Cumulative failed syncs of proxy rules (any mode)",
      ...common,
    });
  }

  /**
   * Sets upstream's `kubernetes_feature_enabled{name,stage}`: 1 for each gate that is on, 0 for each
   * that is off (`stage` as upstream labels it: ALPHA, BETA, DEPRECATED, or empty for GA).
   */
  recordFeatures(gates: Iterable<{ name: string; stage: string; enabled: boolean }>): void {
    const g = registeredOnce(this.registry, "kubernetes_feature_enabled", () =>
      new Gauge({
        name: "kubernetes_feature_enabled",
        help: "This metric records the data about the stage and enablement of a k8s feature.",
        registers: [this.registry],
        labelNames: ["name", "stage"] as const,
      }));
    for (const { name, stage, enabled } of gates) g.set({ name, stage }, enabled ? 1 : 0);
  }

  /**
   * Returns ours, `kubeproxy_source_file_errors_total`, registered the first time it is asked for (a
   * file source's start): changes of the `--source` files refused, the previous objects kept.
   */
  sourceFileErrors(): { inc(): void } {
    return registeredOnce(this.registry, "kubeproxy_source_file_errors_total", () =>
      new Counter({
        name: "kubeproxy_source_file_errors_total",
        help:
          "Changes of the --source files refused: a file unreadable or not parsing (its previous objects are " +
          "kept), or a source that vanished, emptied or lost the Node the proxy acts for (every object is kept)",
        registers: [this.registry],
      }));
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
      serviceChangesTotal: this.serviceChangesTotal,
      serviceChangesPending: this.serviceChangesPending,
      endpointChangesTotal: this.endpointChangesTotal,
      endpointChangesPending: this.endpointChangesPending,
      queuedTimestamp: this.queuedTimestamp.labels(l),
      syncFailuresTotal: this.syncFailuresTotal.labels(l),
      driftRepairsTotal: this.driftRepairsTotal.labels(l),
      otherWritersTotal: this.otherWritersTotal.labels(l),
      noLocalEndpoints: (internal, external) => {
        this.noLocalEndpointsTotal.set({ ...l, traffic_policy: "internal" }, internal);
        this.noLocalEndpointsTotal.set({ ...l, traffic_policy: "external" }, external);
      },
      syncSucceeded: (seconds, full, nowMs, triggerTimesMs) => {
        this.syncDuration.observe(l, seconds);
        (full ? this.syncFullDuration : this.syncPartialDuration).observe(l, seconds);
        this.lastSyncTimestamp.set(l, nowMs / 1000);
        for (const t of triggerTimesMs) {
          this.networkProgrammingDuration.observe(l, Math.max(0, nowMs - t) / 1000);
        }
      },
    };
  }
}

/**
 * Returns the metric `name` of `registry`, registering it with `make` the first time: each family's
 * proxier of a mode asks for the same series, and a second registration would throw.
 */
export function registeredOnce<T>(registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

/** Returns a counter labelled by `ip_family`, registered once on `registry`, bound to `family`. */
export function familyCounter(
  registry: Registry,
  family: IPFamily,
  name: string,
  help: string,
): { inc(): void } {
  return registeredOnce(
    registry,
    name,
    () => new Counter({ name, help, registers: [registry], labelNames: [FAMILY] as const }),
  ).labels({ [FAMILY]: family });
}

/**
 * Returns upstream's iptables-restore failure counters for `family`: the iptables and ipvs modes
 * both restore iptables rules and count their failures under these names (and nothing else).
 */
export function restoreFailureCounters(
  registry: Registry,
  family: IPFamily,
): { readonly restore: { inc(): void }; readonly partialRestore: { inc(): void } } {
  return {
    restore: familyCounter(
      registry,
      family,
      "kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
      "Cumulative proxy iptables restore failures",
    ),
    partialRestore: familyCounter(
      registry,
      family,
      "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
      "Cumulative proxy iptables partial restore failures",
    ),
  };
}
