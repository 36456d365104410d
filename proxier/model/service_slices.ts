/**
 * A Service's EndpointSlices by name, as the endpoints tracker holds them: the one slice most
 * Services have, held with its name, or a map when there are several (a map would cost each of
 * tens of thousands of Services about 180 bytes).
 * @module
 */
import type { SliceEndpoints } from "./endpoint.ts";

/** One named slice. */
interface OneSlice {
  readonly name: string;
  readonly slice: SliceEndpoints;
}

/** A Service's slices: one, or a map of two or more by name. */
export type ServiceSlices = OneSlice | Map<string, SliceEndpoints>;

/** Returns `s` with slice `name` set to `slice` (a map is changed in place and returned). */
export function withSlice(s: ServiceSlices | undefined, name: string, slice: SliceEndpoints): ServiceSlices {
  if (s === undefined || (!(s instanceof Map) && s.name === name)) return { name, slice };
  if (s instanceof Map) return s.set(name, slice);
  return new Map([[s.name, s.slice], [name, slice]]);
}

/** Returns `s` without slice `name`; undefined when none is left (a map is changed in place). */
export function withoutSlice(s: ServiceSlices | undefined, name: string): ServiceSlices | undefined {
  if (s === undefined) return undefined;
  if (!(s instanceof Map)) return s.name === name ? undefined : s;
  s.delete(name);
  if (s.size > 1) return s;
  for (const [n, slice] of s) return { name: n, slice };
  return undefined;
}

/** Returns the slices `s` holds. */
export function slicesOf(s: ServiceSlices | undefined): Iterable<SliceEndpoints> {
  if (s === undefined) return [];
  return s instanceof Map ? s.values() : [s.slice];
}

/** Whether `s` holds a slice named `name`. */
export function holdsSlice(s: ServiceSlices | undefined, name: string): boolean {
  if (s === undefined) return false;
  return s instanceof Map ? s.has(name) : s.name === name;
}
