/**
 * A Service's EndpointSlices by name, as the endpoints tracker holds them: the one slice most
 * Services have, held as it is (it knows its name), or a map when there are several (a map, or a
 * wrapper naming the one slice, would cost each of tens of thousands of Services an object more).
 * @module
 */
import type { SliceEndpoints } from "./endpoint.ts";

/** A Service's slices: one, or a map of two or more by name. */
export type ServiceSlices = SliceEndpoints | Map<string, SliceEndpoints>;

/** Returns `s` with `slice` set under its name (a map is changed in place and returned). */
export function withSlice(s: ServiceSlices | undefined, slice: SliceEndpoints): ServiceSlices {
  if (s === undefined || (!(s instanceof Map) && s.name === slice.name)) return slice;
  if (s instanceof Map) return s.set(slice.name, slice);
  return new Map([[s.name, s], [slice.name, slice]]);
}

/** Returns `s` without slice `name`; undefined when none is left (a map is changed in place). */
export function withoutSlice(s: ServiceSlices | undefined, name: string): ServiceSlices | undefined {
  if (s === undefined) return undefined;
  if (!(s instanceof Map)) return s.name === name ? undefined : s;
  s.delete(name);
  if (s.size > 1) return s;
  for (const slice of s.values()) return slice;
  return undefined;
}

/** Returns the slices `s` holds. */
export function slicesOf(s: ServiceSlices | undefined): Iterable<SliceEndpoints> {
  if (s === undefined) return [];
  return s instanceof Map ? s.values() : [s];
}

/** Whether `s` holds a slice named `name`. */
export function holdsSlice(s: ServiceSlices | undefined, name: string): boolean {
  if (s === undefined) return false;
  return s instanceof Map ? s.has(name) : s.name === name;
}
