/**
 * An EndpointSlice as a row of plain values, read on the thread that parsed it and rebuilt on the
 * one that keeps it: the row holds what identifies the slice (what `endpointSliceStub` keeps) and
 * its reading for its own address family (`sliceEndpoints`), so the receiving thread neither parses
 * the slice nor reads it again. A row of values, not the reading's objects: structured cloning
 * writes every object's property names out and reads them back (at 50,000 slices of one endpoint
 * the objects took 0.4 s to post, the rows 0.07).
 * @module
 */
import type { V1EndpointSlice } from "@kubernetes/client-node";
import {
  READ_AHEAD,
  type ReadAhead,
  SERVICE_NAME_LABEL,
  type SliceEndpoints,
  sliceEndpoints,
  type SlicePort,
} from "../model/endpoint.ts";
import type { EndpointInfo } from "../model/types.ts";
import { ValidationError } from "../runtime/errors.ts";
import { sliceStub } from "./handlers.ts";

/**
 * `[namespace, name, resourceVersion, service label, addressType, reading?]`: no reading for a slice
 * whose address type is no IP family (its identity alone decides what the trackers do with it);
 * `null` for none (not this proxy's); an error's `[0, object, field, message]`; else
 * `[1, service, triggerTime | null, skipped, ports, ...(key, count, ...(ip, conditions, zoneHints,
 * nodeHints, port, key) per endpoint) per port]`, `skipped` a list of errors' `[object, field, message]`.
 */
export type SliceRow = unknown[];

type ErrorRow = [object: string, field: string, message: string];

/** Shared by every rebuilt endpoint without hints, as `sliceEndpoints` shares its own. */
const NO_HINTS: readonly string[] = Object.freeze([]);
const NO_PORTS: readonly SlicePort[] = Object.freeze([]);
const NONE_SKIPPED: readonly ValidationError[] = Object.freeze([]);

const errorRow = (e: ValidationError): ErrorRow => [e.object, e.field, e.message];

/** Returns the ValidationError `row` describes (its message as it was). */
function validationErrorOf([object, field, message]: ErrorRow): ValidationError {
  const e = new ValidationError(object, field, "");
  e.message = message;
  return e;
}

/**
 * Returns `slice` (slimmed) as a row, with its reading for its address family on `nodeName`.
 * @throws what `sliceEndpoints` throws other than a ValidationError.
 */
export function sliceRow(slice: V1EndpointSlice, nodeName: string): SliceRow {
  const m = slice?.metadata;
  const addressType = slice?.addressType;
  const row: SliceRow = [
    m?.namespace,
    m?.name,
    m?.resourceVersion,
    m?.labels?.[SERVICE_NAME_LABEL],
    addressType,
  ];
  if (addressType !== "IPv4" && addressType !== "IPv6") return row;
  let reading: SliceEndpoints | undefined;
  try {
    reading = sliceEndpoints(slice, addressType, nodeName);
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    row.push([0, ...errorRow(e)]);
    return row;
  }
  if (reading === undefined) {
    row.push(null);
    return row;
  }
  const r: unknown[] = [
    1,
    reading.service,
    reading.triggerTime ?? null,
    reading.skipped.map(errorRow),
    reading.ports.length,
  ];
  for (const p of reading.ports) {
    r.push(p.key, p.endpoints.length);
    for (const e of p.endpoints) {
      const conditions = (e.ready ? 1 : 0) | (e.serving ? 2 : 0) | (e.terminating ? 4 : 0) |
        (e.isLocal ? 8 : 0);
      const zones = e.zoneHints.length === 0 ? null : e.zoneHints;
      const nodes = e.nodeHints.length === 0 ? null : e.nodeHints;
      r.push(e.ip, conditions, zones, nodes, e.port, e.key);
    }
  }
  row.push(r);
  return row;
}

/**
 * Returns the slice of `row`: its stub (`sliceStub`), carrying its reading for its
 * address family on `nodeName` (`READ_AHEAD`), which the endpoints trackers take as it is.
 */
export function sliceFromRow(row: SliceRow, nodeName: string): V1EndpointSlice {
  const [namespace, name, resourceVersion, service, addressType] = row as [
    string | undefined,
    string | undefined,
    string | undefined,
    string | undefined,
    string | undefined,
  ];
  const slice: V1EndpointSlice & { [READ_AHEAD]?: ReadAhead } = sliceStub(
    namespace,
    name,
    resourceVersion,
    service,
    addressType,
  );
  if (row.length > 5) {
    const family = addressType as "IPv4" | "IPv6";
    slice[READ_AHEAD] = { family, nodeName, reading: readingOf(row[5], name as string) };
  }
  return slice;
}

function readingOf(r: unknown, name: string): ReadAhead["reading"] {
  if (r === null) return undefined;
  const v = r as unknown[];
  if (v[0] === 0) return validationErrorOf(v.slice(1) as ErrorRow);
  const skipped = v[3] as ErrorRow[];
  const ports: SlicePort[] = [];
  let i = 5;
  for (let p = 0; p < (v[4] as number); p++) {
    const key = v[i++] as string;
    const count = v[i++] as number;
    const endpoints: EndpointInfo[] = [];
    for (let k = 0; k < count; k++, i += 6) {
      const c = v[i + 1] as number;
      endpoints.push({
        ip: v[i] as string,
        ready: (c & 1) !== 0,
        serving: (c & 2) !== 0,
        terminating: (c & 4) !== 0,
        isLocal: (c & 8) !== 0,
        zoneHints: (v[i + 2] as string[] | null) ?? NO_HINTS,
        nodeHints: (v[i + 3] as string[] | null) ?? NO_HINTS,
        port: v[i + 4] as number,
        key: v[i + 5] as string,
      });
    }
    ports.push({ key, endpoints });
  }
  return {
    name,
    service: v[1] as string,
    ports: ports.length === 0 ? NO_PORTS : ports,
    triggerTime: (v[2] as number | null) ?? undefined,
    skipped: skipped.length === 0 ? NONE_SKIPPED : skipped.map(validationErrorOf),
  };
}
