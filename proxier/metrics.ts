/**
 * Upstream's kube-proxy metrics, on a registry of our own (no global state). Every sync metric
 * carries the `ip_family` label, as upstream's (1.31+): each family's proxier writes its own series.
 * @module
 */
import { Counter, exponentialBuckets, Gauge, Histogram, linearBuckets, Registry } from "prom-client";
import { registerProcessMetrics } from "./process_metrics.ts";
import type { IPFamily } from "./types.ts";
import { VERSION } from "./version.ts";

/** One virtual server's IPVS counters with the Service it serves. */
export interface IpvsServiceCounters {
  readonly labels: {
    readonly namespace: string;
    readonly service: string;
    readonly port: string;
    readonly protocol: string;
    readonly address: string;
  };
  readonly counters: {
    readonly connections: number;
    readonly packetsIn: number;
    readonly packetsOut: number;
    readonly bytesIn: number;
    readonly bytesOut: number;
  };
}

const FAMILY = "ip_family";

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
  /** Sets `kubeproxy_sync_proxy_rules_iptables_total` (rules the kernel holds from us) and `_last` (written). */
  iptablesRules(table: "filter" | "nat", total: number, lastWritten: number): void;
  /** Counts a failed accept/receive on a userspace proxy port (userspace mode only). */
  userspaceAcceptError(): void;
  /** Counts a failed dial to an endpoint of `service` (userspace mode only). */
  userspaceDialFailure(service: string): void;
  /** Sets the service ports whose proxy port cannot be opened now (userspace mode only). */
  userspaceUnservedPorts(n: number): void;
  /** Sets `kubeproxy_sync_proxy_rules_no_local_endpoints_total`: Local-policy services without local endpoints. */
  noLocalEndpoints(internal: number, external: number): void;
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
  readonly restoreFailuresTotal: Counter<typeof FAMILY>;
  readonly partialRestoreFailuresTotal: Counter<typeof FAMILY>;
  readonly queuedTimestamp: Gauge<typeof FAMILY>;
  readonly syncFailuresTotal: Counter<typeof FAMILY>;
  readonly nftablesSyncFailuresTotal: Counter<typeof FAMILY>;
  readonly nftablesCleanupFailuresTotal: Counter<typeof FAMILY>;
  readonly iptablesRulesTotal: Gauge<typeof FAMILY | "table">;
  readonly iptablesRulesLast: Gauge<typeof FAMILY | "table">;
  readonly noLocalEndpointsTotal: Gauge<typeof FAMILY | "traffic_policy">;
  readonly healthzTotal: Counter<"code">;
  readonly livezTotal: Counter<"code">;
  /** client-go's: every API request by status code (`<error>` when none came), method and host. */
  readonly restClientRequestsTotal: Counter<"code" | "host" | "method">;
  /** client-go's: API request latency by verb and host. */
  readonly restClientRequestDuration: Histogram<"host" | "verb">;
  readonly #ipvsSources: Array<() => Promise<readonly IpvsServiceCounters[]>> = [];
  /** Userspace mode: accept/receive calls that failed (EMFILE...) and were retried. */
  readonly userspaceAcceptErrorsTotal?: Counter;
  /** Userspace mode: dials to endpoints that failed, per service port. */
  readonly userspaceDialFailuresTotal?: Counter<"service">;
  /** Userspace mode: service ports not served because their port cannot be opened. */
  readonly userspaceUnservedPorts?: Gauge;

  /**
   * Registers the metrics on a fresh registry: the common ones, and those of `mode` (iptables
   * rule metrics for iptables, sync failures for nftables), as upstream registers per mode.
   */
  constructor(mode = "iptables") {
    const common = { registers: [this.registry], labelNames: [FAMILY] as const };
    const only = (modes: string[]) => ({ registers: modes.includes(mode) ? [this.registry] : [] });
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
    this.restoreFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
      help: "Cumulative proxy iptables restore failures",
      ...common,
      ...only(["iptables", "ipvs"]),
    });
    this.partialRestoreFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
      help: "Cumulative proxy iptables partial restore failures",
      ...common,
      ...only(["iptables", "ipvs"]),
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
      ...only(["nftables"]),
    });
    this.nftablesCleanupFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
      help: "Cumulative proxy nftables cleanup failures",
      ...common,
      ...only(["nftables"]),
    });
    this.iptablesRulesTotal = new Gauge({
      name: "kubeproxy_sync_proxy_rules_iptables_total",
      help: "Total number of iptables rules owned by kube-proxy",
      ...only(["iptables"]),
      labelNames: [FAMILY, "table"] as const,
    });
    this.iptablesRulesLast = new Gauge({
      name: "kubeproxy_sync_proxy_rules_iptables_last",
      help: "Number of iptables rules written by kube-proxy in last sync",
      ...only(["iptables"]),
      labelNames: [FAMILY, "table"] as const,
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
    if (mode === "ipvs") this.#registerIpvsCounters();
    if (mode === "userspace") {
      this.userspaceAcceptErrorsTotal = new Counter({
        name: "kubeproxy_userspace_accept_errors_total",
        help: "Accepts and receives on proxy ports that failed and were retried (e.g. too many open files)",
        registers: [this.registry],
      });
      this.userspaceDialFailuresTotal = new Counter({
        name: "kubeproxy_userspace_dial_failures_total",
        help: "Connections to endpoints that failed or timed out, per service port",
        labelNames: ["service"] as const,
        registers: [this.registry],
      });
      this.userspaceUnservedPorts = new Gauge({
        name: "kubeproxy_userspace_unserved_service_ports",
        help: "Service ports not served because their proxy or node port cannot be opened (retried)",
        registers: [this.registry],
      });
    }
    this.syncFailuresTotal = new Counter({
      name: "kubeproxy_sync_proxy_rules_failures_total",
      help: "Cumulative failed syncs of proxy rules (any mode)",
      ...common,
    });
  }

  /** Adds a source of per-virtual-server IPVS counters (each ipvs proxier), read on every scrape. */
  addIpvsCounters(source: () => Promise<readonly IpvsServiceCounters[]>): void {
    this.#ipvsSources.push(source);
  }

  /** Per-virtual-server traffic counters from IPVS (kube-router exports these; upstream does not). */
  #registerIpvsCounters(): void {
    const labelNames = ["namespace", "service", "port", "protocol", "address"] as const;
    const registers = [this.registry];
    const sources = this.#ipvsSources;
    const fields = [
      [
        "connections",
        "kubeproxy_ipvs_service_connections_total",
        "Connections IPVS scheduled to the virtual server",
      ],
      ["packetsIn", "kubeproxy_ipvs_service_packets_in_total", "Packets into the virtual server"],
      ["packetsOut", "kubeproxy_ipvs_service_packets_out_total", "Packets out of the virtual server"],
      ["bytesIn", "kubeproxy_ipvs_service_bytes_in_total", "Bytes into the virtual server"],
      ["bytesOut", "kubeproxy_ipvs_service_bytes_out_total", "Bytes out of the virtual server"],
    ] as const;
    // One kernel read per scrape fills all five: the counters' collects, started together, share it.
    let pending: Promise<void> | undefined;
    const fill = async () => {
      const rows = (await Promise.all(sources.map((s) => s().catch(() => [])))).flat();
      for (const c of counters) c.reset();
      for (const r of rows) fields.forEach(([field], i) => counters[i].inc(r.labels, r.counters[field]));
    };
    const collect = () => {
      if (pending === undefined) {
        pending = fill();
        pending.then(() => pending = undefined, () => pending = undefined);
      }
      return pending;
    };
    const counters: Array<Counter<typeof labelNames[number]>> = fields.map(([, name, help]) =>
      new Counter({ name, help, labelNames, registers, collect })
    );
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
      restoreFailuresTotal: this.restoreFailuresTotal.labels(l),
      partialRestoreFailuresTotal: this.partialRestoreFailuresTotal.labels(l),
      queuedTimestamp: this.queuedTimestamp.labels(l),
      syncFailuresTotal: this.syncFailuresTotal.labels(l),
      nftablesSyncFailuresTotal: this.nftablesSyncFailuresTotal.labels(l),
      nftablesCleanupFailuresTotal: this.nftablesCleanupFailuresTotal.labels(l),
      iptablesRules: (table, total, lastWritten) => {
        this.iptablesRulesTotal.set({ ...l, table }, total);
        this.iptablesRulesLast.set({ ...l, table }, lastWritten);
      },
      userspaceAcceptError: () => this.userspaceAcceptErrorsTotal?.inc(),
      userspaceDialFailure: (service) => this.userspaceDialFailuresTotal?.inc({ service }),
      userspaceUnservedPorts: (n) => this.userspaceUnservedPorts?.set(n),
      noLocalEndpoints: (internal, external) => {
        this.noLocalEndpointsTotal.set({ ...l, traffic_policy: "internal" }, internal);
        this.noLocalEndpointsTotal.set({ ...l, traffic_policy: "external" }, external);
      },
    };
  }
}
