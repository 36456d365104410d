/**
 * What changed since the last sync: Service and EndpointSlice events accumulated in the change
 * trackers (with upstream's pending and total counters), checked out by each sync together with the
 * one answer every mode uses for what a partial sync recomputes. The events before the first sync
 * are held, and that sync's maps read from them (`first_checkout.ts`); the trackers take them once
 * it is over.
 * @module
 */
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { EndpointsChangeTracker, type EndpointsUpdateResult } from "./endpoints_change_tracker.ts";
import type { ObjectWarnings } from "./object_warnings.ts";
import { ServiceChangeTracker, type ServiceUpdateResult } from "./service_change_tracker.ts";
import type { ServicePortsOptions } from "./service_port.ts";
import type { EndpointsMap, IPFamily, ServicePortMap } from "./types.ts";
import { firstCheckout, type FirstCheckoutOptions, type HeldEvent } from "./first_checkout.ts";

/**
 * The counters the trackers keep (upstream's pending and total changes), declared here so the model
 * needs no metrics catalogue: the family's metrics (`metrics.ts`'s `FamilyMetrics`) provide them.
 */
export interface ChangeCounters {
  readonly serviceChangesTotal: { inc(v?: number): void };
  readonly serviceChangesPending: { set(v: number): void };
  readonly endpointChangesTotal: { inc(v?: number): void };
  readonly endpointChangesPending: { set(v: number): void };
}

/** What one sync checks out; see {@linkcode PendingChanges.apply}. */
export interface AppliedChanges {
  readonly serviceChanges: ServiceUpdateResult;
  readonly endpointChanges: EndpointsUpdateResult;
  /** `namespace/name` of Services whose ports or endpoints changed. */
  readonly changedServices: ReadonlySet<string>;
  /**
   * The service port keys a partial sync recomputes (upstream's `svcInfo changed || endpoints
   * changed`): every port, before and after, of each changed Service. A key absent from the service
   * map is a port that went away.
   */
  readonly changedPorts: ReadonlySet<string>;
}

/** Accumulates one family's Service and EndpointSlice changes between syncs. */
export class PendingChanges {
  readonly #services: ServiceChangeTracker;
  readonly #endpoints: EndpointsChangeTracker;
  readonly #metrics: ChangeCounters;
  readonly #first: FirstCheckoutOptions;
  readonly #now: () => number;
  readonly #afterSyncs: (task: () => void) => void;
  /** The events since the start, until the trackers take them ({@linkcode settle}). */
  #held: HeldEvent[] | undefined = [];
  /** Of {@linkcode #held}, how many of each kind (upstream's pending counters, until the trackers count). */
  readonly #heldCount = { services: 0, slices: 0 };
  /** Of {@linkcode #held}, how many the first checkout read (none until it ran). */
  #read = 0;
  /** The Services with ports the first checkout read, until the trackers hold them. */
  #firstServices: ReadonlyMap<string, unknown> = new Map();
  /** While the trackers take held events: when the one they take arrived. */
  #arrived: number | undefined;

  /**
   * Builds empty trackers. `afterSyncs` runs a task once no sync is in flight, after the sync
   * running or the next (`SyncMemory.afterSyncs`): there the trackers take the first sync's events.
   */
  constructor(
    o: {
      family: IPFamily;
      nodeName: string;
      warnings: ObjectWarnings;
      metrics: ChangeCounters;
      /** When an event arrives (ms since the epoch); trigger times before its reading at the start are not reported. */
      clock: { now(): number };
      afterSyncs: (task: () => void) => void;
    } & ServicePortsOptions,
  ) {
    this.#now = () => o.clock.now();
    const startMs = o.clock.now();
    // A held event is taken as of when it arrived: its wait counts from then.
    const now = () => this.#arrived ?? this.#now();
    this.#services = new ServiceChangeTracker({ ...o, now });
    this.#endpoints = new EndpointsChangeTracker({
      family: o.family,
      nodeName: o.nodeName,
      warnings: o.warnings,
      startMs,
      now,
    });
    this.#metrics = o.metrics;
    this.#first = { ...o, startMs };
    this.#afterSyncs = o.afterSyncs;
  }

  /**
   * Records a Service event (add, of a Service its source did not hold: `old` undefined; delete:
   * `cur` undefined); true when a change is pending (always while the events are held).
   */
  service(old: V1Service | undefined, cur: V1Service | undefined): boolean {
    if (this.#held !== undefined) return this.#hold({ service: cur, old, at: this.#now() });
    const changed = this.#services.update(old, cur);
    this.#metrics.serviceChangesPending.set(this.#services.pending);
    return changed;
  }

  /**
   * Records an EndpointSlice event (`update`: of a slice its source held already, else an add
   * unless `removed`); true when its Service now has a change pending (always while the events
   * are held).
   */
  slice(s: V1EndpointSlice, removed: boolean, update = false): boolean {
    if (this.#held !== undefined) return this.#hold({ slice: s, removed, update, at: this.#now() });
    const changed = this.#endpoints.update(s, removed);
    this.#metrics.endpointChangesPending.set(this.#endpoints.pending);
    return changed;
  }

  /** True when the Service (`namespace/name`) has ports in the service map as of the last apply. */
  hasService(service: string): boolean {
    return this.#held === undefined ? this.#services.has(service) : this.#firstServices.has(service);
  }

  /**
   * Applies every pending change to `services` and `endpoints`; returns what changed. The first,
   * on empty maps, reads the held events (`first_checkout.ts`) and has the trackers take them once
   * no sync is in flight; any other takes them first.
   */
  apply(services: ServicePortMap, endpoints: EndpointsMap): AppliedChanges {
    const first = this.#held !== undefined && this.#read === 0 && services.size === 0 && endpoints.size === 0
      ? firstCheckout(this.#held, this.#first, services, endpoints)
      : undefined;
    if (first === undefined) this.settle(services, endpoints);
    else {
      this.#read = this.#held!.length;
      this.#heldCount.services = this.#heldCount.slices = 0;
      this.#firstServices = first.serviceChanges.changed;
      this.#afterSyncs(() => this.settle(services, endpoints));
    }
    const serviceChanges = first?.serviceChanges ?? this.#services.apply(services);
    const endpointChanges = first?.endpointChanges ?? this.#endpoints.apply(endpoints);
    this.#metrics.serviceChangesTotal.inc(serviceChanges.changed.size);
    this.#metrics.endpointChangesTotal.inc(endpointChanges.changedSince.size);
    this.#metrics.serviceChangesPending.set(0);
    this.#metrics.endpointChangesPending.set(0);
    // The tracker's set, made for this apply and read nowhere else, grows into the answer. An
    // endpoint change finds its Service's ports in the Service tracker, which holds them anyway.
    const changedPorts = serviceChanges.portKeys;
    for (const service of endpointChanges.changedSince.keys()) {
      this.#services.addPortKeys(service, changedPorts);
    }
    // Without a spread of both into one array first: a first sync holds every Service twice there.
    const changedServices = new Set(serviceChanges.changed.keys());
    for (const service of endpointChanges.changedSince.keys()) changedServices.add(service);
    return { serviceChanges, endpointChanges, changedServices, changedPorts };
  }

  /**
   * Has the trackers take the held events (nothing once they did): those the first checkout read as
   * applied, into `services` and `endpoints` (the maps it filled, whose entries become the
   * trackers' own), the rest as pending.
   */
  settle(services: ServicePortMap, endpoints: EndpointsMap): void {
    const held = this.#held;
    if (held === undefined) return;
    this.#held = undefined;
    const take = (e: HeldEvent) => {
      this.#arrived = e.at;
      if ("slice" in e) this.#endpoints.update(e.slice, e.removed);
      else this.#services.update(e.old, e.service);
    };
    try {
      for (let i = 0; i < this.#read; i++) take(held[i]);
      if (this.#read > 0) this.#applyRead(services, endpoints);
      for (let i = this.#read; i < held.length; i++) take(held[i]);
    } finally {
      this.#arrived = undefined;
      this.#firstServices = new Map();
    }
    this.#metrics.serviceChangesPending.set(this.#services.pending);
    this.#metrics.endpointChangesPending.set(this.#endpoints.pending);
  }

  /** Applies what the trackers took of the events the first checkout read (already counted). */
  #applyRead(services: ServicePortMap, endpoints: EndpointsMap): void {
    this.#services.apply(services);
    this.#endpoints.apply(endpoints);
  }

  #hold(e: HeldEvent): true {
    this.#held!.push(e);
    if ("slice" in e) this.#metrics.endpointChangesPending.set(++this.#heldCount.slices);
    else this.#metrics.serviceChangesPending.set(++this.#heldCount.services);
    return true;
  }
}
