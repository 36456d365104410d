/**
 * What changed since the last sync: Service and EndpointSlice events accumulated in the change
 * trackers (with upstream's pending and total counters), checked out by each sync together with the
 * one answer every mode uses for what a partial sync recomputes.
 * @module
 */
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { EndpointsChangeTracker, type EndpointsUpdateResult } from "./endpoints_change_tracker.ts";
import type { ObjectWarnings } from "./object_warnings.ts";
import { ServiceChangeTracker, type ServiceUpdateResult } from "./service_change_tracker.ts";
import type { ServicePortsOptions } from "./service_port.ts";
import type { EndpointsMap, IPFamily, ServicePortMap } from "./types.ts";

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

  /** Builds empty trackers. */
  constructor(
    o: {
      family: IPFamily;
      nodeName: string;
      warnings: ObjectWarnings;
      metrics: ChangeCounters;
      startMs: number;
      /** When an event arrives (ms since the epoch); default the wall clock. */
      now?: () => number;
    } & ServicePortsOptions,
  ) {
    this.#services = new ServiceChangeTracker(o);
    this.#endpoints = new EndpointsChangeTracker({
      family: o.family,
      nodeName: o.nodeName,
      warnings: o.warnings,
      startMs: o.startMs,
      now: o.now,
    });
    this.#metrics = o.metrics;
  }

  /** Records a Service event (add: `old` undefined; delete: `cur` undefined); true when a change is pending. */
  service(old: V1Service | undefined, cur: V1Service | undefined): boolean {
    const changed = this.#services.update(old, cur);
    this.#metrics.serviceChangesPending.set(this.#services.pending);
    return changed;
  }

  /** Records an EndpointSlice event; true when its Service now has a change pending. */
  slice(s: V1EndpointSlice, removed: boolean): boolean {
    const changed = this.#endpoints.update(s, removed);
    this.#metrics.endpointChangesPending.set(this.#endpoints.pending);
    return changed;
  }

  /** True when the Service (`namespace/name`) has ports in the service map as of the last apply. */
  hasService(service: string): boolean {
    return this.#services.has(service);
  }

  /** Applies every pending change to `services` and `endpoints`; returns what changed. */
  apply(services: ServicePortMap, endpoints: EndpointsMap): AppliedChanges {
    const serviceChanges = this.#services.apply(services);
    const endpointChanges = this.#endpoints.apply(endpoints);
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
}
