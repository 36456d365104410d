/**
 * The mode-independent half of every proxier: source events into the change trackers, the
 * bounded-frequency runner, sync orchestration and failure handling. The post-sync step (conntrack,
 * health check node ports, metrics) is `sync/after_sync.ts`'s, the own Node `node_manager.ts`'s, drift
 * `drift.ts`'s; a mode supplies `syncRules` and, optionally, `detectDrift`.
 * @module
 */
import type { V1EndpointSlice, V1Node, V1Service } from "@kubernetes/client-node";
import { AfterSync } from "./sync/after_sync.ts";
import { DriftWatch } from "./drift.ts";
import { show } from "./runtime/errors.ts";
import type { ProxyHealth } from "./healthcheck/proxier_health.ts";
import type { FamilyMetrics } from "./metrics.ts";
import { familyCIDRs } from "./model/net.ts";
import { NodeManager } from "./node_manager.ts";
import { ObjectWarnings } from "./model/object_warnings.ts";
import type { Clock } from "./runtime/clock.ts";
import { type EventRecorder, nullRecorder } from "./runtime/events.ts";
import { Exclusive } from "./runtime/exclusive.ts";
import { SyncMemory } from "./runtime/sync_memory.ts";
import type { Logger } from "./runtime/logger.ts";
import type { Registry } from "./runtime/prometheus.ts";
import { type AppliedChanges, PendingChanges } from "./model/pending_changes.ts";
import type { FamilyView } from "./family_view.ts";
import { ServiceTimings } from "./service_timings.ts";
import type { Provider } from "./provider.ts";
import type { BaseProxierOptions } from "./proxier_options.ts";
import { SyncRunner } from "./sync/sync_runner.ts";
import type { EndpointsMap, IPFamily, ServicePortMap } from "./model/types.ts";

/** Everything a mode needs to program one sync: the model, and what changed in it (`model/pending_changes.ts`). */
export interface SyncContext extends AppliedChanges {
  /** Rewrite everything (first sync, after a failure, every fullSyncPeriodMs). */
  readonly full: boolean;
  readonly services: ServicePortMap;
  readonly endpoints: EndpointsMap;
  /**
   * Aborted when the program stops: kernel tools still running are killed, so stopping never
   * waits for a long restore. A sync that sees it aborted throws without counting a failure.
   */
  readonly signal: AbortSignal;
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
  /** A partial sync itself fails on what the cheap drift check finds ({@linkcode detectDrift}). */
  protected readonly partialSyncFailsOnDrift: boolean = false;
  /** The periodic resync interval (`--*-sync-period`). */
  protected readonly syncPeriodMs: number;
  /** The model as of the last sync; only `#sync` writes it. */
  protected readonly serviceMap: ServicePortMap = new Map();
  protected readonly endpointsMap: EndpointsMap = new Map();
  /** The own Node and what the rules read of it: zone, addresses, NodePort addresses, local detection. */
  protected readonly node: NodeManager;
  /** This family's service CIDRs (ServiceCIDR objects), as last reported. */
  protected serviceCIDRs: readonly string[] = [];
  readonly #changes: PendingChanges;
  readonly #runner: SyncRunner;
  readonly #drift: DriftWatch;
  /** Syncs and thorough drift checks never overlap. */
  readonly #exclusive = new Exclusive();
  readonly #fullSyncPeriodMs: number;
  readonly #after: AfterSync;
  protected readonly memory: SyncMemory;
  /** Per Service with ports: when its last change arrived and when a sync applied it (`explain`). */
  readonly #timings = new ServiceTimings();
  /** What the mode says of a Service's scheduler annotation and of fields it cannot honour (`explain`). */
  readonly #policy: Pick<BaseProxierOptions, "schedulers" | "portNotice">;
  #servicesSynced = false;
  #slicesSynced = false;
  #needFull = true;
  #lastFull = 0;
  /** The sync loop's signal; never aborted outside {@linkcode syncLoop} (render, tests). */
  #signal: AbortSignal = new AbortController().signal;

  /** Builds trackers, the runner and the Node manager; starts nothing. */
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
    this.memory = o.memory ?? new SyncMemory({ now: () => o.clock.now(), trim: o.trim });
    this.#after = new AfterSync({ ...o, registry: this.registry, metrics: this.metrics });
    this.node = new NodeManager({
      ...o,
      onReady: () => this.sync(),
      dependentState: () => this.nodeDependentState(),
    });
    this.#policy = o;
    this.#changes = new PendingChanges({
      ...o,
      schedulerNotice: o.schedulers && ((scheduler) => o.schedulers!.notice(scheduler)),
      warnings: o.warnings ?? new ObjectWarnings(o.log),
      metrics: this.metrics,
      afterSyncs: (task) => this.memory.afterSyncs(task),
    });
    this.#drift = new DriftWatch({
      ...o,
      periodMs: o.syncPeriodMs,
      detect: (thorough, signal) => this.detectDrift(thorough, signal),
      counters: this.metrics,
      exclusive: this.#exclusive,
      ready: () => this.isInitialized,
      repair: () => this.requestFullSync(),
    });
    this.#runner = new SyncRunner({
      fn: (periodic) => this.#sync(periodic),
      // A drift check under way gives way to a request at once; a periodic sync lets it end.
      onAsk: () => this.#exclusive.preempt(),
      minIntervalMs: o.minSyncPeriodMs,
      maxIntervalMs: o.syncPeriodMs,
      clock: o.clock,
      onError: (_err, retryInMs) => {
        // #sync logged the failure itself; shutdown's interruption is no failure.
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
   * the next sync is full and repairs it (`drift.ts`). Cheap checks before every partial sync;
   * `thorough` ones (what the mode owns, counted: jumps, fixed chains, element or server counts)
   * once per sync period beside the syncs, stopped by `signal` when a sync is asked for. Default: none.
   * With {@linkcode partialSyncFailsOnDrift} (its failure shows it) the cheap one runs after a failed one.
   */
  protected detectDrift(_thorough: boolean, _signal?: AbortSignal): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }

  /** Runs the mode's thorough drift check now; returns what drifted (benchmarks, tests). */
  checkDrift(): Promise<string | undefined> {
    return this.#drift.check(true);
  }

  /**
   * Runs the thorough drift check between syncs, as the sync loop does once per sync period, and
   * when it finds drift asks for the full sync that repairs it. Returns what drifted.
   */
  repairDrift(): Promise<string | undefined> {
    return this.#drift.repair();
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
    return this.#servicesSynced && this.#slicesSynced && this.node.ready;
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
    this.#sliceEvent(s, false, true);
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
    const { mine, bad } = familyCIDRs(cidrs, this.family);
    if (bad.length > 0 && this.family === "IPv4") {
      this.log.warn("Ignoring malformed ServiceCIDR CIDRs", { cidrs: bad.map((c) => show(c)).join(", ") });
    }
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
  /** @inheritdoc */
  onNodeSynced(): void {
    this.node.synced();
  }

  /** Says which node addresses the rules use and where they came from, for `render`'s note. */
  describeNodeIPs(): string {
    return this.node.describeIPs();
  }

  /**
   * Everything about the own Node that rules depend on, as one string; a change forces a full
   * sync. Modes that depend on more of the Node extend it.
   */
  protected nodeDependentState(): string {
    return this.node.dependentState();
  }

  #nodeEvent(n: V1Node | undefined): void {
    this.health.setNode(n);
    const change = this.node.set(n);
    if (change === "ready") this.sync();
    // Topology hints, the local CIDR (or a mode's own Node fields) may change every Service's rules.
    else if (change === "changed") this.requestFullSync();
  }

  /** Asks for a sync once both initial syncs are in; the runner rate-limits. */
  sync(): void {
    if (this.isInitialized) this.#runner.run();
  }

  /** Runs the sync loop until `signal` aborts, which also interrupts a sync in progress. */
  syncLoop(signal: AbortSignal): Promise<void> {
    this.#signal = signal;
    this.health.expect(this.family);
    // Drift heals within a sync period of its cause, beside the syncs, not in their path.
    this.#drift.watch(signal);
    return this.#runner.loop(signal);
  }

  /**
   * Syncs once, now, outside the runner (for `render` and tests); rejects when the sync fails.
   * Must not be called while {@linkcode syncLoop} runs.
   */
  syncNow(): Promise<void> {
    return this.#sync();
  }

  /** Asks for a sync within `ms`, for work a mode can do only once a delay has passed. */
  protected syncAfter(ms: number): void {
    if (this.isInitialized) this.#runner.runAfter(ms);
  }

  /** Requests that the next sync be full (e.g. the kernel state was lost). */
  protected requestFullSync(): void {
    this.#needFull = true;
    this.sync();
  }

  #serviceEvent(old: V1Service | undefined, cur: V1Service | undefined): void {
    if (this.#changes.service(old, cur) && this.isInitialized) this.#queued();
  }

  #sliceEvent(s: V1EndpointSlice, removed: boolean, update = false): void {
    if (this.#changes.slice(s, removed, update) && this.isInitialized) this.#queued();
  }

  #queued(): void {
    this.health.queued(this.family);
    this.metrics.queuedTimestamp.set(this.clock.now() / 1000);
    this.sync();
  }

  #sync(periodic = false): Promise<void> {
    if (!this.isInitialized) return Promise.resolve();
    return this.#exclusive.run(() => this.memory.around(() => this.#syncOnce()), { preempt: !periodic });
  }

  /** `carried`: trigger times of the sync whose failure drift explained, which this one applies. */
  async #syncOnce(carried: readonly number[] = []): Promise<boolean> {
    const start = performance.now();
    const changes = this.#changes.apply(this.serviceMap, this.endpointsMap);
    this.#after.changed(this.serviceMap, changes.changedPorts);
    this.#timings.noteChanges(changes, (service) => this.#changes.hasService(service));
    let full = this.#needFull || this.clock.now() - this.#lastFull >= this.#fullSyncPeriodMs;
    // The cheap check inline (a flushed ruleset or table); the thorough ones run beside the syncs.
    if (!full && !this.partialSyncFailsOnDrift && await this.#drift.found()) full = true;
    const ctx: SyncContext = {
      ...changes,
      full,
      services: this.serviceMap,
      endpoints: this.endpointsMap,
      signal: this.#signal,
    };
    let didFull = full;
    try {
      didFull = (await this.syncRules(ctx)) === true || full;
    } catch (e) {
      // The maps already hold the new state; a full sync rewrites all of it.
      this.#needFull = true;
      this.forgetKernelState();
      if (!full && this.partialSyncFailsOnDrift && !this.#signal.aborted && await this.#drift.found(true)) {
        return this.#syncOnce(changes.endpointChanges.lastChangeTriggerTimes);
      }
      if (!this.#signal.aborted) {
        this.metrics.syncFailuresTotal.inc();
        this.health.failed(this.family);
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
    }
    this.#timings.applied(this.clock.now());
    await this.#afterSync(ctx);
    const elapsed = (performance.now() - start) / 1000;
    this.metrics.syncSucceeded(
      elapsed,
      didFull,
      this.clock.now(),
      [...carried, ...changes.endpointChanges.lastChangeTriggerTimes],
    );
    this.health.updated(this.family);
    this.log.debug("Sync complete", {
      family: this.family,
      full: didFull,
      elapsedMs: Math.round(elapsed * 1000),
      services: this.serviceMap.size,
      changed: changes.changedServices.size,
    });
    return didFull;
  }

  /**
   * Returns what `explain` reads: this family's model as of the last sync and the node facts the
   * rules were written from. Modes add what only they know ({@linkcode modeViewFacts}).
   */
  familyView(): FamilyView {
    return {
      family: this.family,
      services: this.serviceMap,
      endpoints: this.endpointsMap,
      ...this.node.viewFacts(),
      loopbackNodePorts: "none",
      masqueradeAll: false,
      serviceCIDRs: this.serviceCIDRs,
      scheduler: (svc) => this.#policy.schedulers?.describe(svc) ?? null,
      limits: (svc) => [this.#policy.portNotice?.(svc)?.msg ?? []].flat(),
      timing: (service) => this.#timings.get(service),
      ...this.modeViewFacts(),
    };
  }

  /** What only this mode knows of its datapath for {@linkcode familyView}; default nothing. */
  protected modeViewFacts(): Partial<FamilyView> {
    return {};
  }

  /** The post-sync steps every mode shares (`sync/after_sync.ts`): stale flows, health check ports, a metric. */
  async #afterSync(ctx: SyncContext): Promise<void> {
    await this.#after.run(ctx.endpoints, ctx.serviceChanges.removedPorts, () => {
      // Where NodePorts answer, as upstream (its health server reads the same addresses).
      const npa = this.node.nodePortAddresses(true);
      return npa.matchAll ? "all" : npa.nodeIPs(this.node.ips);
    });
  }
}
