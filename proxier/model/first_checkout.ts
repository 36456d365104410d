/**
 * A family's first checkout, read straight from the events held until the first sync. Until then
 * every object of the first lists is new, and the change trackers' bookkeeping of what each was
 * before (their pending maps, the slices' holders, each Service's applied ports) compares nothing
 * and serves only the syncs after it: at 50,000 Services it held the main thread for about 0.6 s
 * before the first build, with the node's second core mostly idle. So the first sync's maps are
 * read here, with the trackers' own readings (`servicePorts`, `sliceEndpoints`, `mergeSlices`),
 * and the trackers take the same events once that sync is over (`pending_changes.ts`).
 * @module
 */
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { mergeSlices, type SliceEndpoints, sliceEndpoints, sortedOnce } from "./endpoint.ts";
import { type EndpointsUpdateResult, triggerResults } from "./endpoints_change_tracker.ts";
import { flat } from "./flat_string.ts";
import { ValidationError } from "../runtime/errors.ts";
import type { ServiceUpdateResult } from "./service_change_tracker.ts";
import { servicePorts, type ServicePortsOptions } from "./service_port.ts";
import type { EndpointsMap, IPFamily, ServicePortInfo, ServicePortMap } from "./types.ts";
import { namespacedName, servicePortKey } from "./types.ts";

/**
 * One event held before the first sync, with when it arrived (ms since the epoch): a Service's
 * (`old` undefined: added; `service` undefined: deleted) or a slice's (`update`: one the source
 * held already; `removed`: deleted).
 */
export type HeldEvent =
  | { readonly service: V1Service | undefined; readonly old: V1Service | undefined; readonly at: number }
  | {
    readonly slice: V1EndpointSlice;
    readonly removed: boolean;
    readonly update: boolean;
    readonly at: number;
  };

/** What the events are read with: the trackers' own options. */
export interface FirstCheckoutOptions extends ServicePortsOptions {
  readonly family: IPFamily;
  readonly nodeName: string;
  /** Trigger times before this (the proxy's start) are not reported, as the endpoints tracker. */
  readonly startMs: number;
}

/** The trackers' two answers for the same events, as their first apply gives them. */
export interface FirstCheckout {
  readonly serviceChanges: ServiceUpdateResult;
  readonly endpointChanges: EndpointsUpdateResult;
}

/**
 * Fills `services` and `endpoints` (both empty) from `held` as the trackers' first apply would,
 * and returns what that apply returns. Undefined, both maps left empty, when an event is not an
 * object's first sight (an update, a deletion, a Service or slice added twice): the trackers then
 * take the events, as for any sync. A slice's add is trusted to be its first (a source's add is an object it
 * did not hold), which spares a set of every slice's name. A malformed object is left out, as
 * the trackers leave it out; they say so when they take the events.
 */
export function firstCheckout(
  held: readonly HeldEvent[],
  o: FirstCheckoutOptions,
  services: ServicePortMap,
  endpoints: EndpointsMap,
): FirstCheckout | undefined {
  const changed = new Map<string, { since: number }>();
  const bySlices = new Map<string, SliceEndpoints | SliceEndpoints[]>();
  const since = new Map<string, number>();
  const triggers = new Map<string, number[]>();
  for (const e of held) {
    if ("slice" in e) {
      if (e.removed || e.update) return abandon(services);
      const parsed = readSlice(e.slice, o);
      if (parsed?.service === undefined) continue;
      const had = bySlices.get(parsed.service);
      if (had === undefined) bySlices.set(parsed.service, parsed);
      else if (!Array.isArray(had)) bySlices.set(parsed.service, [had, parsed]);
      else had.push(parsed);
      noteSlice(parsed, e.at, o.startMs, since, triggers);
      continue;
    }
    if (e.old !== undefined || e.service === undefined) return abandon(services);
    const key = namespacedName(e.service.metadata?.namespace ?? "default", String(e.service.metadata?.name));
    // A second sight of a Service read with ports would leave its first ports behind. After a
    // sight without ports, the last sight is all the tracker keeps too.
    if (changed.has(key)) return abandon(services);
    const ports = readPorts(e.service, o);
    if (ports.length === 0) continue;
    for (const p of ports) services.set(flat(servicePortKey(p.name)), p);
    changed.set(key, { since: e.at });
  }
  for (const slices of bySlices.values()) {
    if (Array.isArray(slices) && new Set(slices.map((s) => s.name)).size < slices.length) {
      return abandon(services, endpoints);
    }
    if (!Array.isArray(slices) && slices.ports.every((p) => sortedOnce(p.endpoints))) {
      // One slice whose lists are as the merge would make them (most Services): no merge, no map.
      for (const { key, endpoints: eps } of slices.ports) endpoints.set(key, eps);
    } else {
      for (const [key, eps] of mergeSlices(Array.isArray(slices) ? slices : [slices])) {
        endpoints.set(key, eps);
      }
    }
  }
  return {
    serviceChanges: { changed, removedPorts: [], portKeys: new Set(services.keys()) },
    endpointChanges: { ...triggerResults(triggers), changedSince: since },
  };
}

/** Empties the maps filled so far; returns undefined (the trackers take the events instead). */
function abandon(services: ServicePortMap, endpoints?: EndpointsMap): undefined {
  services.clear();
  endpoints?.clear();
  return undefined;
}

/**
 * Notes `parsed`'s Service as the endpoints tracker would: changed from the first of its slices
 * with a port, when it arrived; its trigger times kept while it is changed, dropped while it is not.
 */
function noteSlice(
  parsed: SliceEndpoints,
  at: number,
  startMs: number,
  since: Map<string, number>,
  triggers: Map<string, number[]>,
): void {
  const service = parsed.service;
  if (parsed.triggerTime !== undefined && parsed.triggerTime >= startMs) {
    const times = triggers.get(service);
    if (times === undefined) triggers.set(service, [parsed.triggerTime]);
    else times.push(parsed.triggerTime);
  }
  if (parsed.ports.length > 0) {
    if (!since.has(service)) since.set(service, at);
  } else if (!since.has(service)) triggers.delete(service);
}

/** `svc`'s ports as the Service tracker reads them; none when it is malformed. */
function readPorts(svc: V1Service, o: FirstCheckoutOptions): ServicePortInfo[] {
  try {
    return servicePorts(svc, o.family, o).ports;
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    return [];
  }
}

/** `slice`'s reading as the endpoints tracker reads it; undefined when malformed or not this family's. */
function readSlice(slice: V1EndpointSlice, o: FirstCheckoutOptions): SliceEndpoints | undefined {
  try {
    return sliceEndpoints(slice, o.family, o.nodeName);
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    return undefined;
  }
}
