/**
 * The mode-independent half of every proxier: event handlers feeding the change trackers, the
 * bounded-frequency runner, metrics and health. A mode supplies `syncRules`.
 * @module
 */
import { type EventRecorder, nullRecorder } from "./events.ts";
import {
  describeLocalDetector,
  type LocalDetection,
  type LocalDetector,
  localDetector,
} from "./local_detector.ts";
import type { V1EndpointSlice, V1Node, V1Service } from "@kubernetes/client-node";
import type { Clock } from "./runtime/clock.ts";
import { EndpointsChangeTracker, type EndpointsUpdateResult } from "./endpoints_change_tracker.ts";
import type { ProxyHealth } from "./healthcheck/proxier_health.ts";
import type { Logger } from "./runtime/logger.ts";
import { ObjectWarnings } from "./object_warnings.ts";
import type { FamilyMetrics, ProxyMetrics } from "./metrics.ts";
import type { Registry } from "./runtime/prometheus.ts";
import { ServiceChangeTracker, type ServiceUpdateResult } from "./service_change_tracker.ts";
import { SyncRunner } from "./sync_runner.ts";
import { countNoLocalEndpoints, type NodeTopology, ZONE_LABEL } from "./topology.ts";
import { cidrFamily, ipFamily, normalizeCIDR } from "./net.ts";
import { show } from "./errors.ts";
import { NodePortAddresses } from "./nodeport_addresses.ts";
import type { EndpointsMap, IPFamily, ServicePortMap } from "./types.ts";
import { collectGarbage, collectGarbageAfterSync, trimMalloc } from "./runtime/gc.ts";
import type { Conntrack } from "../iptables/conntrack.ts";
import { reconcileConntrack, reconcilerMetrics } from "./conntrack/reconciler.ts";
import { type ServiceHealthServer, serviceHealthStates } from "./healthcheck/service_health.ts";

/**
 * Receives Service events; `onServicesSynced` once the initial list is in. An old or deleted
 * Service may be only what names it (the API source keeps no more between events: `serviceStub`).
 */
export interface ServiceHandler {
  onServiceAdd(s: V1Service): void;
  onServiceUpdate(old: V1Service, s: V1Service): void;
  onServiceDelete(s: V1Service): void;
  onServicesSynced(): void;
}

/**
 * Receives EndpointSlice events; `onEndpointSlicesSynced` once the initial list is in. An old or
 * deleted slice may be only what names it, without endpoints (`endpointSliceStub`).
 */
export interface EndpointSliceHandler {
  onEndpointSliceAdd(s: V1EndpointSlice): void;
  onEndpointSliceUpdate(old: V1EndpointSlice, s: V1EndpointSlice): void;
  onEndpointSliceDelete(s: V1EndpointSlice): void;
  onEndpointSlicesSynced(): void;
}

/** Receives events about this proxy's own Node. */
export interface NodeHandler {
  onNodeAdd(n: V1Node): void;
  onNodeUpdate(old: V1Node, n: V1Node): void;
  onNodeDelete(n: V1Node): void;
  onNodeSynced(): void;
}

/**
 * Receives the cluster's service CIDRs (every `networking.k8s.io/v1` ServiceCIDR's `spec.cidrs`,
 * both families, sorted), whole, on each change, as upstream's `OnServiceCIDRsChanged`.
 */
export interface ServiceCIDRHandler {
  onServiceCIDRsChanged(cidrs: readonly string[]): void;
}

/** A proxier: takes events, syncs them to a datapath from its loop. */
export interface Provider extends ServiceHandler, EndpointSliceHandler, NodeHandler, ServiceCIDRHandler {
  /** Asks for a sync; the runner rate-limits. */
  sync(): void;
  /** Runs syncs until `signal` aborts; resolves after the last sync finishes. */
  syncLoop(signal: AbortSignal): Promise<void>;
}

/** Everything a mode needs to program one sync. */
export interface SyncContext {
  /** Rewrite everything (first sync, after a failure, every fullSyncPeriodMs). */
  readonly full: boolean;
  readonly services: ServicePortMap;
  readonly endpoints: EndpointsMap;
  /** `namespace/name` of Services whose ports or endpoints changed since the last sync. */
  readonly changedServices: ReadonlySet<string>;
  /**
   * The service port keys a partial sync recomputes, the one answer every mode uses (upstream's
   * `svcInfo changed || endpoints changed`): every port, before and after, of each changed Service.
   * A key absent from `services` is a port that went away.
   */
  readonly changedPorts: ReadonlySet<string>;
  readonly serviceChanges: ServiceUpdateResult;
  readonly endpointChanges: EndpointsUpdateResult;
  /**
   * Aborted when the program stops: kernel tools still running are killed, so stopping never
   * waits for a long restore. A sync that sees it aborted throws without counting a failure.
   */
  readonly signal: AbortSignal;
}

/**
 * How often, at most, a sync ends by giving malloc's free memory back (malloc_trim). Each sync runs
 * kernel tools and reads the API server, through buffers glibc allocates outside the V8 heap; freed,
 * they stay in malloc's arenas. Measured in the soak (nftables, 10,000 Services, 10 changes/s):
 * RSS outside the V8 heap 160 MiB and growing without it, 106 MiB and flat with it. Every 5 s rather
 * than every minute: at 1,000 Services in iptables mode (a change a second) malloc's main heap grew
 * 11.8 -> 18.6 MiB within the minute, RSS 96 -> 105 MiB; with 5 s it stays at 9-16 MiB and RSS
 * ended at 96. A trim costs what it gives back (12 ms for 125 MiB of freed chunks, then < 1 ms).
 */
export const TRIM_PERIOD_MS = 5_000;

/** Full resyncs once an hour, as upstream's FullSyncPeriod (a constant there too). */
export const FULL_SYNC_PERIOD_MS = 3_600_000;

/** Options shared by every proxier. */
export interface BaseProxierOptions {
  readonly family: IPFamily;
  /** This node's name: decides which endpoints are local. */
  readonly nodeName: string;
  readonly log: Logger;
  readonly clock: Clock;
  readonly metrics: ProxyMetrics;
  readonly health: ProxyHealth;
  readonly minSyncPeriodMs: number;
  readonly syncPeriodMs: number;
  /** Object problems, logged once per object version; shared by the families. Default: its own. */
  readonly warnings?: ObjectWarnings;
  /**
   * Longest time between full syncs, from the end of one to the start of the next; default
   * `syncPeriodMs` (modes without partial syncs). Modes with partial syncs pass
   * {@linkcode FULL_SYNC_PERIOD_MS}; their periodic syncs are then partial.
   */
  readonly fullSyncPeriodMs?: number;
  /**
   * How traffic from pods is told from the rest (masquerade decisions): `--detect-local-mode` and
   * what it reads. Omitted by modes that need none.
   */
  readonly localDetection?: LocalDetection;
  /**
   * How long the first sync waits, once the Node list is in, for the own Node (and, in NodeCIDR
   * mode, its pod CIDRs), as upstream's NodeManager: node IPs and local detection are then right
   * from the first rule. 0 (the file source, whose files are the whole truth; tests): no wait.
   */
  readonly nodeWaitMs?: number;
  /** Kubernetes Events about Services and the Node; default: none. */
  readonly events?: EventRecorder;
  /** The conntrack reconciler's table after each sync (modes that NAT in the kernel); default: none. */
  readonly conntrack?: Conntrack;
  /** Health check node ports, updated after each sync; default: none. */
  readonly healthServer?: ServiceHealthServer;
  /**
   * This node's addresses (any family): the live proxy's interfaces, or `render`'s `--node-ip`.
   * Default none.
   */
  readonly nodeIPs?: readonly string[];
  /**
   * `render` without `--node-ip`: the node's addresses are the Node object's InternalIP and
   * ExternalIP addresses (from the source), as the node itself would hold them.
   */
  readonly nodeIPsFromNode?: boolean;
  /** Gives malloc's free memory back after a sync, at most every {@linkcode TRIM_PERIOD_MS}; default glibc's malloc_trim. */
  readonly trim?: () => void;
}

/** The shared half of a proxier; subclasses implement {@linkcode syncRules}. */
export abstract class BaseProxier implements Provider {
  /** The IP family this proxier programs. */
  readonly family: IPFamily;
  protected readonly nodeName: string;
  protected readonly log: Logger;
  protected readonly clock: Clock;
  /** The metrics every mode writes, bound to this proxier's `ip_family` label. */
  protected readonly metrics: FamilyMetrics;
  /** The registry a mode registers its own metrics on (`proxier/<mode>/metrics.ts`). */
  protected readonly registry: Registry;
  protected readonly health: ProxyHealth;
  /** Kubernetes Events (a no-op without an API server). */
  protected readonly events: EventRecorder;
  /** The periodic resync interval (`--*-sync-period`). */
  protected readonly syncPeriodMs: number;
  /** The model as of the last sync; only `#syncOnce` writes it. */
  protected readonly serviceMap: ServicePortMap = new Map();
  protected readonly endpointsMap: EndpointsMap = new Map();
  /** The own Node, when known. */
  protected node?: V1Node;
  /** This family's service CIDRs (ServiceCIDR objects), as last reported. */
  protected serviceCIDRs: readonly string[] = [];
  readonly #localDetection: LocalDetection | undefined;
  readonly #services: ServiceChangeTracker;
  readonly #endpoints: EndpointsChangeTracker;
  readonly #runner: SyncRunner;
  readonly #fullSyncPeriodMs: number;
  readonly #conntrack?: Conntrack;
  readonly #healthServer?: ServiceHealthServer;
  readonly #nodeIPs: readonly string[];
  readonly #nodeIPsFromNode: boolean;
  /** A sync is running; {@linkcode repairDrift} waits for it to end. */
  #syncing = false;
  /** Settles when the running sync (if any) ends; never rejects. */
  #syncEnded: Promise<void> = Promise.resolve();
  /** Settles when the running thorough drift check (if any) ends; a sync waits for it. */
  #checking: Promise<void> = Promise.resolve();
  /** Service -> its port keys in `serviceMap`, for {@linkcode SyncContext.changedPorts}. */
  readonly #portsByService = new Map<string, Set<string>>();
  #servicesSynced = false;
  #slicesSynced = false;
  /** The Node list is in and the own Node is known (with its pod CIDRs when they are needed), or the wait is over. */
  #nodeReady = false;
  readonly #nodeWaitMs: number;
  #stopNodeWait = () => {};
  #needFull = true;
  #lastFull = 0;
  #lastTrim = -Infinity;
  readonly #trim: () => void;
  /** The sync loop's signal; never aborted outside {@linkcode syncLoop} (render, tests). */
  #signal: AbortSignal = new AbortController().signal;

  /** Builds trackers and the runner; starts nothing. */
  constructor(o: BaseProxierOptions) {
    this.family = o.family;
    this.nodeName = o.nodeName;
    this.log = o.log;
    this.clock = o.clock;
    this.metrics = o.metrics.family(o.family);
    this.registry = o.metrics.registry;
    this.health = o.health;
    this.syncPeriodMs = o.syncPeriodMs;
    this.events = o.events ?? nullRecorder;
    this.#fullSyncPeriodMs = o.fullSyncPeriodMs ?? o.syncPeriodMs;
    this.#localDetection = o.localDetection;
    this.#conntrack = o.conntrack;
    this.#healthServer = o.healthServer;
    this.#nodeIPs = o.nodeIPs ?? [];
    this.#nodeIPsFromNode = o.nodeIPsFromNode ?? false;
    this.#trim = o.trim ?? trimMalloc;
    this.#nodeWaitMs = o.nodeWaitMs ?? 0;
    this.#nodeReady = this.#nodeWaitMs <= 0;
    const warnings = o.warnings ?? new ObjectWarnings(o.log);
    this.#services = new ServiceChangeTracker({ family: o.family, warnings });
    this.#endpoints = new EndpointsChangeTracker({
      family: o.family,
      nodeName: o.nodeName,
      warnings,
      startMs: o.clock.now(),
    });
    this.#runner = new SyncRunner({
      fn: () => this.#syncOnce(),
      minIntervalMs: o.minSyncPeriodMs,
      maxIntervalMs: o.syncPeriodMs,
      clock: o.clock,
      onError: (_err, retryInMs) => {
        // #syncOnce logged the failure itself; shutdown's interruption is no failure.
        if (this.#signal.aborted) {
          this.log.info("Sync interrupted by shutdown; the previous rules stay", { family: this.family });
        } else this.log.debug("Retrying the failed sync", { family: this.family, retryInMs });
      },
    });
  }

  /**
   * Programs the datapath from `ctx`; throws when nothing (or not everything) was applied. Returns
   * true when it rewrote everything although `ctx.full` was false (it found the kernel state lost).
   */
  protected abstract syncRules(ctx: SyncContext): Promise<boolean | void>;

  /**
   * Called when {@linkcode syncRules} threw, also on shutdown: forget what the mode believed the
   * kernel holds (the next sync is full and rewrites it).
   */
  protected forgetKernelState(): void {}

  /**
   * Returns what of the mode's kernel state changed behind its back (undefined: nothing found), so
   * the next sync is full and repairs it. Cheap checks before every partial sync; `thorough` ones
   * (what the mode owns, counted: jumps, fixed chains, element or server counts) once per sync
   * period beside the syncs. Default: none.
   */
  protected detectDrift(_thorough: boolean): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }

  /** Runs the mode's thorough drift check now; returns what drifted (benchmarks, tests). */
  checkDrift(): Promise<string | undefined> {
    return this.#checkDrift(true);
  }

  /**
   * Runs the thorough drift check, as the sync loop does once per sync period, and when it finds
   * drift asks for a full sync that repairs it. Returns what drifted.
   *
   * It runs between syncs, never beside one: a sync starting meanwhile waits for it. A kernel
   * listing that a commit interrupts starts over (nft and iptables-nft both redo their dump when
   * the ruleset generation moves), so beside syncs as frequent as the listing is slow (10,000
   * services under churn: nft lists for 2 s, syncs commit every second) it never ended and kept a
   * core busy; and a finding made while a sync ran could not be trusted anyway.
   */
  async repairDrift(): Promise<string | undefined> {
    while (this.#syncing) await this.#syncEnded;
    if (!this.isInitialized) return undefined;
    let release = () => {};
    this.#checking = new Promise((resolve) => release = resolve);
    let drift: string | undefined;
    try {
      drift = await this.#checkDrift(true);
    } finally {
      release();
    }
    if (drift === undefined) return undefined;
    this.#reportDrift(drift);
    this.requestFullSync();
    return drift;
  }

  /** A check that cannot run counts as drift: the full sync it brings is safe. */
  #checkDrift(thorough: boolean): Promise<string | undefined> {
    return this.detectDrift(thorough).catch((e) =>
      `the check failed: ${e instanceof Error ? e.message : String(e)}`
    );
  }

  #reportDrift(drift: string): void {
    this.log.warn("Rules changed outside the proxy; doing a full sync", { family: this.family, drift });
    this.metrics.driftRepairsTotal.inc();
    this.#needFull = true;
  }

  /**
   * Counts a failed sync under the mode's own metric names (upstream's differ per mode); not called
   * when the failure is the shutdown's. `full`: the sync was meant to rewrite everything.
   */
  protected countFailure(_error: unknown, _full: boolean): void {}

  /** Number of service ports in the model as of the last sync. */
  get serviceCount(): number {
    return this.serviceMap.size;
  }

  /** True once Services, EndpointSlices and the own Node had their initial sync. */
  get isInitialized(): boolean {
    return this.#servicesSynced && this.#slicesSynced && this.#nodeReady;
  }

  /** @inheritdoc */
  onServiceAdd(s: V1Service): void {
    this.#serviceEvent(undefined, s);
  }
  /** @inheritdoc */
  onServiceUpdate(old: V1Service, s: V1Service): void {
    this.#serviceEvent(old, s);
  }
  /** @inheritdoc */
  onServiceDelete(s: V1Service): void {
    this.#serviceEvent(s, undefined);
  }
  /** @inheritdoc */
  onServicesSynced(): void {
    this.#servicesSynced = true;
    this.sync();
  }
  /** @inheritdoc */
  onEndpointSliceAdd(s: V1EndpointSlice): void {
    this.#sliceEvent(s, false);
  }
  /** @inheritdoc */
  onEndpointSliceUpdate(_old: V1EndpointSlice, s: V1EndpointSlice): void {
    this.#sliceEvent(s, false);
  }
  /** @inheritdoc */
  onEndpointSliceDelete(s: V1EndpointSlice): void {
    this.#sliceEvent(s, true);
  }
  /** @inheritdoc */
  onEndpointSlicesSynced(): void {
    this.#slicesSynced = true;
    this.sync();
  }
  /**
   * @inheritdoc
   * A mode whose rules depend on them (nftables drops traffic to unallocated cluster IPs) gets a
   * full sync when this family's set changes ({@linkcode usesServiceCIDRs}).
   */
  onServiceCIDRsChanged(cidrs: readonly string[]): void {
    const bad = cidrs.filter((c) => cidrFamily(c) === undefined);
    if (bad.length > 0 && this.family === "IPv4") {
      this.log.warn("Ignoring malformed ServiceCIDR CIDRs", { cidrs: bad.map((c) => show(c)).join(", ") });
    }
    const mine = cidrs.filter((c) => cidrFamily(c) === this.family).map(normalizeCIDR);
    if (mine.join(",") === this.serviceCIDRs.join(",")) return;
    this.serviceCIDRs = mine;
    if (this.usesServiceCIDRs) {
      this.log.info("Service CIDRs changed", { family: this.family, cidrs: mine.join(",") });
      this.requestFullSync();
    }
  }

  /** The mode's rules depend on {@linkcode serviceCIDRs}. */
  protected get usesServiceCIDRs(): boolean {
    return false;
  }

  /** @inheritdoc */
  onNodeAdd(n: V1Node): void {
    this.#nodeEvent(n);
  }
  /** @inheritdoc */
  onNodeUpdate(_old: V1Node, n: V1Node): void {
    this.#nodeEvent(n);
  }
  /** @inheritdoc */
  onNodeDelete(_n: V1Node): void {
    this.#nodeEvent(undefined);
  }

  /** This node's name and zone, for endpoint selection (`proxier/topology.ts`). */
  protected get topology(): NodeTopology {
    return { nodeName: this.nodeName, zone: this.node?.metadata?.labels?.[ZONE_LABEL] ?? "" };
  }

  /** How pod traffic is told from the rest for this family, or undefined when it cannot be. */
  protected get localDetector(): LocalDetector | undefined {
    return localDetector(this.#localDetection, this.family, this.node);
  }

  /**
   * This node's addresses (any family): see {@linkcode BaseProxierOptions.nodeIPs}; with
   * `nodeIPsFromNode`, the Node object's InternalIP and ExternalIP addresses once it is known.
   */
  protected get nodeIPs(): readonly string[] {
    if (!this.#nodeIPsFromNode) return this.#nodeIPs;
    return (this.node?.status?.addresses ?? [])
      .filter((a) =>
        (a.type === "InternalIP" || a.type === "ExternalIP") && ipFamily(a.address) !== undefined
      )
      .map((a) => a.address);
  }

  /** Says where {@linkcode nodeIPs} came from and what they are, for `render`'s note. */
  describeNodeIPs(): string {
    const ips = this.nodeIPs.join(", ") || "none";
    if (!this.#nodeIPsFromNode) return `${ips} (--node-ip)`;
    return this.node === undefined
      ? `none (no Node object "${this.nodeName}" in the source; --node-ip sets them)`
      : `${ips} (the Node object "${this.nodeName}"'s InternalIP and ExternalIP)`;
  }

  /** The Node's primary address of this family (InternalIP, else ExternalIP), as upstream picks it. */
  protected get primaryNodeIP(): string | undefined {
    const addrs = this.node?.status?.addresses ?? [];
    for (const type of ["InternalIP", "ExternalIP"]) {
      const a = addrs.find((a) => a.type === type && ipFamily(a.address) === this.family);
      if (a !== undefined) return a.address;
    }
    return undefined;
  }

  /**
   * Returns where NodePorts answer for this family (`proxier/nodeport_addresses.ts`), `primary`
   * resolved to the Node's primary address as known now.
   */
  protected nodePortAddresses(configured: readonly string[], allowIPv4Localhost = false): NodePortAddresses {
    return new NodePortAddresses(this.family, configured, this.primaryNodeIP, allowIPv4Localhost);
  }

  /**
   * Everything about the own Node that rules depend on, as one string; a change forces a full
   * sync. Modes that depend on more of the Node extend it.
   */
  protected nodeDependentState(): string {
    return JSON.stringify([
      this.topology.zone,
      describeLocalDetector(this.localDetector),
      this.primaryNodeIP ?? "",
      this.#nodeIPsFromNode ? this.nodeIPs : [],
    ]);
  }

  #nodeEvent(n: V1Node | undefined): void {
    const before = this.nodeDependentState();
    const zoneBefore = this.topology.zone;
    this.node = n;
    this.health.setNode(n);
    if (!this.#nodeReady && this.#nodeComplete()) {
      // Waiting for it (or the Node list is not in yet): it is here now.
      this.#stopNodeWait();
      this.#nodeReady = true;
      this.log.info("Node known", { node: this.nodeName, family: this.family });
      this.sync();
      return;
    }
    if (this.nodeDependentState() === before) return;
    if (this.topology.zone !== zoneBefore) {
      this.log.info("Node topology changed", { family: this.family, zone: this.topology.zone });
    }
    // Topology hints, the local CIDR (or a mode's own Node fields) may change every Service's rules.
    this.requestFullSync();
  }
  /** @inheritdoc */
  onNodeSynced(): void {
    if (this.#nodeReady) return;
    if (this.#nodeComplete()) {
      this.#nodeReady = true;
      this.sync();
      return;
    }
    this.log.info("Waiting for the Node object before the first sync", {
      node: this.nodeName,
      family: this.family,
      timeoutMs: this.#nodeWaitMs,
    });
    this.#stopNodeWait = this.clock.setTimer(() => {
      if (this.#nodeReady) return;
      this.log.warn(
        this.node === undefined
          ? "The Node object did not appear; syncing without its addresses and pod CIDRs"
          : "The Node has no pod CIDRs yet (NodeCIDR mode); syncing without local traffic detection",
        { node: this.nodeName, family: this.family, waitedMs: this.#nodeWaitMs },
      );
      this.#nodeReady = true;
      this.sync();
    }, this.#nodeWaitMs);
  }

  /** The own Node is known, with pod CIDRs when `--detect-local-mode=NodeCIDR` needs them. */
  #nodeComplete(): boolean {
    const n = this.node;
    if (n === undefined) return false;
    if (this.#localDetection?.mode !== "NodeCIDR") return true;
    return (n.spec?.podCIDRs?.length ?? 0) > 0 || (n.spec?.podCIDR ?? "") !== "";
  }

  /** Asks for a sync once both initial syncs are in; the runner rate-limits. */
  sync(): void {
    if (this.isInitialized) this.#runner.run();
  }

  /** Runs the sync loop until `signal` aborts, which also interrupts a sync in progress. */
  syncLoop(signal: AbortSignal): Promise<void> {
    this.#signal = signal;
    // Drift heals within a sync period of its cause, beside the syncs, not in their path.
    let cancel = () => {};
    const tick = () => {
      cancel = this.clock.setTimer(async () => {
        if (signal.aborted) return;
        await this.repairDrift();
        if (!signal.aborted) tick();
      }, this.syncPeriodMs);
    };
    tick();
    signal.addEventListener("abort", () => cancel(), { once: true });
    return this.#runner.loop(signal);
  }

  /**
   * Syncs once, now, outside the runner (for `render` and tests); rejects when the sync fails.
   * Must not be called while {@linkcode syncLoop} runs.
   */
  syncNow(): Promise<void> {
    return this.#syncOnce();
  }

  /** Requests that the next sync be full (e.g. the kernel state was lost). */
  protected requestFullSync(): void {
    this.#needFull = true;
    this.sync();
  }

  #serviceEvent(old: V1Service | undefined, cur: V1Service | undefined): void {
    if (this.#services.update(old, cur)) this.#queued();
    this.metrics.serviceChangesPending.set(this.#services.pending);
  }

  #sliceEvent(s: V1EndpointSlice, removed: boolean): void {
    if (this.#endpoints.update(s, removed)) this.#queued();
    this.metrics.endpointChangesPending.set(this.#endpoints.pending);
  }

  #queued(): void {
    this.health.queued(this.family);
    this.metrics.queuedTimestamp.set(this.clock.now() / 1000);
    this.sync();
  }

  async #syncOnce(): Promise<void> {
    if (!this.isInitialized) return;
    // Set before waiting: the next drift check must not start while this sync waits for one.
    this.#syncing = true;
    let ended = () => {};
    this.#syncEnded = new Promise((resolve) => ended = resolve);
    try {
      await this.#checking;
      await this.#syncOnceInner();
    } finally {
      this.#syncing = false;
      ended();
    }
  }

  async #syncOnceInner(): Promise<void> {
    const start = performance.now();
    const serviceChanges = this.#services.apply(this.serviceMap);
    const endpointChanges = this.#endpoints.apply(this.endpointsMap);
    this.metrics.serviceChangesTotal.inc(serviceChanges.updatedServices.size);
    this.metrics.endpointChangesTotal.inc(endpointChanges.updatedServices.size);
    this.metrics.serviceChangesPending.set(0);
    this.metrics.endpointChangesPending.set(0);
    const now = this.clock.now();
    let full = this.#needFull || now - this.#lastFull >= this.#fullSyncPeriodMs;
    const changedServices = new Set([...serviceChanges.updatedServices, ...endpointChanges.updatedServices]);
    const changedPorts = this.#changedPorts(serviceChanges, endpointChanges);
    if (!full) {
      // The cheap check inline (a flushed ruleset or table); the thorough ones run beside the
      // syncs ({@linkcode repairDrift}), so a partial sync never waits for them.
      const drift = await this.#checkDrift(false);
      if (drift !== undefined) {
        this.#reportDrift(drift);
        full = true;
      }
    }
    const ctx: SyncContext = {
      full,
      services: this.serviceMap,
      endpoints: this.endpointsMap,
      changedServices,
      changedPorts,
      serviceChanges,
      endpointChanges,
      signal: this.#signal,
    };
    let didFull = full;
    try {
      didFull = (await this.syncRules(ctx)) === true || full;
    } catch (e) {
      // The maps already hold the new state; a full sync rewrites all of it.
      this.#needFull = true;
      this.forgetKernelState();
      if (!this.#signal.aborted) {
        this.metrics.syncFailuresTotal.inc();
        this.countFailure(e, full);
        const line = (e as { line?: unknown }).line;
        this.log.error("Sync failed; the previous rules stay in place and the next sync is full", {
          family: this.family,
          error: e instanceof Error ? e.message : String(e),
          ...(typeof line === "string" ? { line: line.slice(0, 200) } : {}),
        });
      }
      throw e;
    }
    if (didFull) {
      this.#needFull = false;
      // Measured from the end: a full sync longer than the period must not make the next one full.
      this.#lastFull = this.clock.now();
      collectGarbage();
    }
    await this.#afterSync(ctx);
    // Cheap (one heap statistics call); a collection only when buffers or the heap piled up.
    if (!didFull) collectGarbageAfterSync();
    if (this.clock.now() - this.#lastTrim >= TRIM_PERIOD_MS) {
      this.#lastTrim = this.clock.now();
      this.#trim();
    }
    const elapsed = (performance.now() - start) / 1000;
    this.metrics.syncDuration.observe(elapsed);
    (didFull ? this.metrics.syncFullDuration : this.metrics.syncPartialDuration).observe(elapsed);
    this.metrics.lastSyncTimestamp.set(this.clock.now() / 1000);
    const noLocal = countNoLocalEndpoints(this.serviceMap, this.endpointsMap);
    this.metrics.noLocalEndpoints(noLocal.internal, noLocal.external);
    for (const t of endpointChanges.lastChangeTriggerTimes) {
      this.metrics.networkProgrammingDuration.observe(Math.max(0, this.clock.now() - t) / 1000);
    }
    this.health.updated(this.family);
    this.log.debug("Sync complete", {
      family: this.family,
      full: didFull,
      elapsedMs: Math.round(elapsed * 1000),
      services: this.serviceMap.size,
      changed: changedServices.size,
    });
  }

  /**
   * The post-sync step every mode shares: the conntrack reconciler deletes stale UDP and SCTP flows
   * (a failure is logged: a leftover flow only delays its client until the next sync or its
   * expiry), then the health check node ports report the new endpoints.
   */
  async #afterSync(ctx: SyncContext): Promise<void> {
    if (this.#conntrack !== undefined) {
      const t0 = performance.now();
      const m = reconcilerMetrics(this.registry, this.family);
      try {
        const r = await reconcileConntrack(this.#conntrack, {
          services: ctx.services,
          endpoints: ctx.endpoints,
          removed: ctx.serviceChanges.removedPorts,
        });
        if (r.flows > 0) m.duration.observe((performance.now() - t0) / 1000);
        if (r.deleted > 0) {
          m.deleted.inc(r.deleted);
          this.log.debug("Deleted stale conntrack flows", {
            family: this.family,
            deleted: r.deleted,
            of: r.flows,
          });
        }
      } catch (e) {
        this.log.warn("Conntrack reconcile failed; stale flows stay until the next sync", {
          family: this.family,
          error: e instanceof Error ? e.message : String(e),
        });
      }
    }
    this.#healthServer?.sync(serviceHealthStates(ctx.services, ctx.endpoints), this.family);
  }

  /** See {@linkcode SyncContext.changedPorts}; keeps the service -> ports index current. */
  #changedPorts(services: ServiceUpdateResult, endpoints: EndpointsUpdateResult): Set<string> {
    const changed = new Set(services.portKeys);
    for (const service of services.updatedServices) this.#portsByService.delete(service);
    for (const key of services.portKeys) {
      const svc = this.serviceMap.get(key);
      if (svc === undefined) continue;
      let keys = this.#portsByService.get(svc.service);
      if (keys === undefined) this.#portsByService.set(svc.service, keys = new Set());
      keys.add(key);
    }
    for (const service of endpoints.updatedServices) {
      for (const key of this.#portsByService.get(service) ?? []) changed.add(key);
    }
    return changed;
  }
}
