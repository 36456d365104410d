/**
 * Accumulates EndpointSlice events between syncs, as upstream's EndpointsChangeTracker.
 * @module
 */
import type { V1EndpointSlice } from "@kubernetes/client-node";
import { mergeSlices, type SliceEndpoints, sliceEndpoints, type SlicePort, sortedOnce } from "./endpoint.ts";
import { flat } from "./flat_string.ts";
import type { ObjectProblem, ObjectWarnings } from "./object_warnings.ts";
import { ValidationError } from "../runtime/errors.ts";
import type { EndpointInfo, EndpointsMap, IPFamily } from "./types.ts";
import { sameEntries } from "./types.ts";
import { holdsSlice, type ServiceSlices, slicesOf, withoutSlice, withSlice } from "./service_slices.ts";

/** What applying the pending endpoint changes did to the map. */
export interface EndpointsUpdateResult {
  /** Trigger times (ms since epoch) of the applied changes, for the programming latency metric. */
  readonly lastChangeTriggerTimes: number[];
  /** Per updated Service: the latest trigger time of its applied change, when a slice gave one. */
  readonly triggerTimes: ReadonlyMap<string, number>;
  /**
   * Per Service whose endpoints changed (`namespace/name`): when its change began to wait (the
   * first event since it was last applied). The tracker's own map, handed over, not copied.
   */
  readonly changedSince: ReadonlyMap<string, number>;
}

type PortEndpoints = ReadonlyMap<string, readonly EndpointInfo[]>;

/** A Service without endpoints (most Services before their first sync): one shared empty map. */
const NO_ENDPOINTS: PortEndpoints = new Map();

/** Tracks EndpointSlice changes for one IP family until the next sync checks them out. */
export class EndpointsChangeTracker {
  readonly #family: IPFamily;
  readonly #warnings: ObjectWarnings;
  #nodeName: string;
  /** The current slices per service: `namespace/service` -> its parsed slices by name. */
  readonly #slices = new Map<string, ServiceSlices>();
  /**
   * Which Service holds each slice held: namespace -> slice name -> `namespace/service`. A slice
   * that names no Service of this family (the other family's, malformed, its label gone), or now
   * names another, is found here, not by walking every Service's slices: in a dual-stack cluster
   * every other slice is one.
   */
  readonly #holders = new Map<string, Map<string, string>>();
  /** Per service with a pending change: its endpoints at the last sync. */
  readonly #previous = new Map<string, PortEndpoints>();
  readonly #triggerTimes = new Map<string, number[]>();
  /** Per service with a pending change: when it began to wait. */
  #since = new Map<string, number>();
  readonly #startMs: number;
  readonly #now: () => number;

  /**
   * Builds an empty tracker; `nodeName` decides which endpoints are local. Trigger times before
   * `startMs` (the proxy's start; default: none skipped) are not reported, as upstream: a change
   * made before the proxy ran was not waiting for it.
   */
  constructor(
    opts: {
      family: IPFamily;
      nodeName: string;
      warnings: ObjectWarnings;
      startMs?: number;
      now?: () => number;
    },
  ) {
    this.#family = opts.family;
    this.#now = opts.now ?? Date.now;
    this.#nodeName = opts.nodeName;
    this.#warnings = opts.warnings;
    this.#startMs = opts.startMs ?? -Infinity;
  }

  /** Number of Services with endpoint changes not yet applied. */
  get pending(): number {
    return this.#previous.size;
  }

  /**
   * Records one slice event. Returns true when the slice's Service now has a change pending.
   * A malformed slice is logged and dropped, as if deleted; a malformed endpoint is logged and
   * left out; the rest keeps working. Each problem is logged once per slice version.
   */
  update(slice: V1EndpointSlice, removed: boolean): boolean {
    let parsed: SliceEndpoints | undefined;
    const problems: ObjectProblem[] = [];
    const problem = (e: ValidationError, what: string) =>
      problems.push({ msg: `${what} ${e.message}`, fields: { object: e.object, field: e.field } });
    try {
      parsed = sliceEndpoints(slice, this.#family, this.#nodeName);
      for (const e of parsed?.skipped ?? []) problem(e, "Skipping malformed endpoint of");
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      problem(e, "Skipping malformed");
    }
    const namespace = slice?.metadata?.namespace ?? "default";
    const warningKey = `EndpointSlice/${namespace}/${slice?.metadata?.name}`;
    if (removed) this.#warnings.forget(warningKey);
    else this.#warnings.report(warningKey, slice, problems);
    const sliceName = String(slice?.metadata?.name);
    const holder = this.#holders.get(namespace)?.get(sliceName);
    const service = parsed?.service ?? holder;
    if (service === undefined) return false;
    // A slice that now names another Service (its label changed) leaves the one that held it, as a
    // removal there: no Service keeps endpoints that none of its slices lists.
    const left = holder !== undefined && holder !== service &&
      this.#place(holder, namespace, sliceName, undefined);
    return this.#place(service, namespace, sliceName, removed ? undefined : parsed) || left;
  }

  /**
   * Makes `parsed` the slice `sliceName` of `service` (undefined: takes that slice from it), noting
   * the Service's endpoints as they were before its first pending change. Returns true when the
   * Service now has a change pending.
   */
  #place(service: string, namespace: string, sliceName: string, parsed: SliceEndpoints | undefined): boolean {
    const before = this.#slices.get(service);
    let previous = this.#previous.get(service);
    if (previous === undefined) {
      previous = this.#endpointsOf(service);
      this.#previous.set(service, previous);
      this.#since.set(service, this.#now());
    }
    const after = parsed === undefined ? withoutSlice(before, sliceName) : withSlice(before, parsed);
    if (after === undefined) this.#slices.delete(service);
    else this.#slices.set(service, after);
    this.#noteHolder(namespace, sliceName, service, holdsSlice(after, sliceName));
    if (parsed?.triggerTime !== undefined && parsed.triggerTime >= this.#startMs) {
      const times = this.#triggerTimes.get(service) ?? [];
      times.push(parsed.triggerTime);
      this.#triggerTimes.set(service, times);
    }
    // A Service that had no endpoint ports and now has one has changed, without merging its slices
    // to see it (every Service of a first list): the merge waits for the sync.
    const same = previous.size === 0 ? !hasPorts(after) : sameEntries(previous, this.#endpointsOf(service));
    if (!same) return true;
    this.#previous.delete(service);
    this.#since.delete(service);
    this.#triggerTimes.delete(service);
    return false;
  }

  /** Applies and forgets the pending changes; returns what changed. */
  apply(map: EndpointsMap): EndpointsUpdateResult {
    for (const [service, previous] of this.#previous) {
      for (const key of previous.keys()) map.delete(key);
      const slices = this.#slices.get(service);
      if (slices !== undefined && !(slices instanceof Map) && slices.ports.every(isMerged)) {
        // One slice whose lists are as the merge would make them (most Services): no merge, no map.
        for (const { key, endpoints } of slices.ports) map.set(key, endpoints);
      } else for (const [key, eps] of this.#endpointsOf(service)) map.set(key, eps);
    }
    const { lastChangeTriggerTimes, triggerTimes } = triggerResults(this.#triggerTimes);
    // Handed over, not copied: a first sync's holds every Service.
    const changedSince = this.#since;
    this.#since = new Map();
    this.#previous.clear();
    this.#triggerTimes.clear();
    return { lastChangeTriggerTimes, triggerTimes, changedSince };
  }

  #endpointsOf(service: string): PortEndpoints {
    const slices = this.#slices.get(service);
    return slices === undefined ? NO_ENDPOINTS : mergeSlices(slicesOf(slices));
  }

  /** Notes whether `service` holds the slice `name` of `namespace` now. */
  #noteHolder(namespace: string, name: string, service: string, holds: boolean): void {
    let names = this.#holders.get(namespace);
    if (holds) {
      if (names === undefined) this.#holders.set(namespace, names = new Map());
      if (names.get(name) !== service) names.set(name, flat(service));
    } else if (names?.get(name) === service) {
      names.delete(name);
      if (names.size === 0) this.#holders.delete(namespace);
    }
  }
}

/**
 * Returns the applied changes' trigger times (`EndpointsUpdateResult`) from each changed Service's
 * trigger times: all of them, and the latest per Service.
 */
export function triggerResults(
  triggers: ReadonlyMap<string, readonly number[]>,
): Pick<EndpointsUpdateResult, "lastChangeTriggerTimes" | "triggerTimes"> {
  const lastChangeTriggerTimes: number[] = [];
  const triggerTimes = new Map<string, number>();
  for (const [service, times] of triggers) {
    lastChangeTriggerTimes.push(...times);
    triggerTimes.set(service, Math.max(...times));
  }
  return { lastChangeTriggerTimes, triggerTimes };
}

/** Whether a slice's port list is its own merge (`mergeSlices` of that slice alone keeps it). */
const isMerged = (p: SlicePort) => sortedOnce(p.endpoints);

/** Whether any of `slices` has a port: merged, they would have an entry (`mergeSlices`). */
function hasPorts(slices: ServiceSlices | undefined): boolean {
  for (const s of slicesOf(slices)) if (s.ports.length > 0) return true;
  return false;
}
