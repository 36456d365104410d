/**
 * EndpointSlice -> endpoints per service port, for one IP family.
 * @module
 */
import type { V1EndpointSlice } from "@kubernetes/client-node";
import { ipFamily, isDNSLabel, isDNSSubdomain, isLabelValue, isPort, parseProtocol } from "./net.ts";
import { objectName, show, ValidationError } from "../runtime/errors.ts";
import type { EndpointInfo, IPFamily, ServicePortName } from "./types.ts";
import { joinHostPort, servicePortKey } from "./types.ts";
import { flat } from "./flat_string.ts";

/** The label that ties an EndpointSlice to its Service. */
export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";

/** The annotation carrying when the change that produced a slice happened. */
export const LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time";

/** One service port of a slice: its key (`servicePortKey` of its name) and the slice's endpoints for it. */
export interface SlicePort {
  readonly key: string;
  readonly endpoints: EndpointInfo[];
}

/**
 * Where a slice read ahead (parsed and read on another thread, and kept as a stub without its
 * endpoints) carries its reading, which {@linkcode sliceEndpoints} returns for that family and node
 * instead of reading the stub.
 */
export const READ_AHEAD: unique symbol = Symbol("the slice's reading, made ahead");

/** A slice's reading made ahead: for `family` on `nodeName`, its endpoints, none (not this proxy's), or why it is malformed. */
export interface ReadAhead {
  readonly family: IPFamily;
  readonly nodeName: string;
  readonly reading: SliceEndpoints | undefined | ValidationError;
}

/** The endpoints one slice contributes, for one family. */
export interface SliceEndpoints {
  /** The slice's own name. */
  readonly name: string;
  /** `namespace/service` the slice belongs to. */
  readonly service: string;
  /**
   * Per service port: its key, its name and the slice's endpoints for it (an array: a slice has a
   * port or two, and a map would cost each of tens of thousands of slices 150 bytes more).
   */
  readonly ports: readonly SlicePort[];
  /** Milliseconds since the epoch, or undefined when the slice carries no trigger time. */
  readonly triggerTime?: number;
  /** Endpoints left out because a field of theirs is malformed, one error each (usually none). */
  readonly skipped: readonly ValidationError[];
}

/**
 * Converts one EndpointSlice. Returns undefined for slices of another family, FQDN slices and
 * slices without the service-name label.
 * An endpoint with a malformed address, condition or hint is left out (listed in `skipped`); the
 * slice's other endpoints stay.
 * @throws {ValidationError} when a field of the slice itself (names, address type, ports) is
 * malformed: no endpoint of it can then be programmed correctly.
 */
export function sliceEndpoints(
  slice: V1EndpointSlice,
  family: IPFamily,
  nodeName: string,
): SliceEndpoints | undefined {
  // The other family's tracker validates its slices; this one skips them without a second warning.
  if ((slice?.addressType === "IPv4" || slice?.addressType === "IPv6") && slice.addressType !== family) {
    return undefined;
  }
  const ahead = (slice as { [READ_AHEAD]?: ReadAhead } | null)?.[READ_AHEAD];
  if (ahead !== undefined && ahead.family === family) {
    // What carries a reading keeps no endpoints of its own: read again, it would have none.
    if (ahead.nodeName !== nodeName) {
      throw new Error(`an EndpointSlice read for node ${ahead.nodeName} was read again for node ${nodeName}`);
    }
    if (ahead.reading instanceof ValidationError) throw ahead.reading;
    return ahead.reading;
  }
  const namespace = slice?.metadata?.namespace ?? "default";
  // Named only for an error: most slices have none.
  const obj = () => objectName("EndpointSlice", slice?.metadata?.namespace, slice?.metadata?.name);
  if (!isDNSLabel(namespace)) throw new ValidationError(obj(), "metadata.namespace", show(namespace));
  if (!isDNSSubdomain(slice.metadata?.name)) {
    throw new ValidationError(obj(), "metadata.name", show(slice.metadata?.name));
  }
  const svcName = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
  if (svcName === undefined) return undefined;
  if (!isDNSLabel(svcName)) {
    throw new ValidationError(obj(), `metadata.labels[${SERVICE_NAME_LABEL}]`, show(svcName));
  }
  if (slice.addressType === "FQDN") return undefined;
  if (slice.addressType !== "IPv4" && slice.addressType !== "IPv6") {
    throw new ValidationError(obj(), "addressType", show(slice.addressType));
  }
  if (slice.addressType !== family) return undefined;

  const endpoints: Array<Omit<EndpointInfo, "port" | "key">> = [];
  let skipped: ValidationError[] | undefined;
  (Array.isArray(slice.endpoints) ? slice.endpoints : []).forEach((ep, i) => {
    try {
      endpoints.push(parseEndpoint(obj, `endpoints[${i}]`, ep, family, nodeName));
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      (skipped ??= []).push(e);
    }
  });

  const ports: SlicePort[] = [];
  (Array.isArray(slice.ports) ? slice.ports : []).forEach((p, i) => {
    const field = `ports[${i}]`;
    const portName = p?.name ?? "";
    if (portName !== "" && !isDNSLabel(portName)) {
      throw new ValidationError(obj(), `${field}.name`, show(portName));
    }
    const protocol = parseProtocol(p?.protocol);
    if (protocol === undefined) throw new ValidationError(obj(), `${field}.protocol`, show(p.protocol));
    if (p.port === undefined || p.port === null) return; // "all ports": nothing to program
    if (!isPort(p.port)) throw new ValidationError(obj(), `${field}.port`, show(p.port));
    const port = p.port;
    // Kept by its key alone: slices are merged by key, and a name each would cost every slice an object.
    const name: ServicePortName = { namespace, name: svcName, port: portName, protocol };
    const key = flat(servicePortKey(name));
    const entry: SlicePort = {
      key,
      // Written out, not spread: a spread copy keeps the two added fields out of the object, in a
      // second array (about 40 bytes more per endpoint, at hundreds of thousands of endpoints).
      endpoints: endpoints.map((e) => ({
        ip: e.ip,
        ready: e.ready,
        serving: e.serving,
        terminating: e.terminating,
        isLocal: e.isLocal,
        zoneHints: e.zoneHints,
        nodeHints: e.nodeHints,
        port,
        key: flat(joinHostPort(e.ip, port)),
      })),
    };
    // A port listed twice: the later stands, as a map's later entry would.
    const at = ports.findIndex((q) => q.key === key);
    if (at < 0) ports.push(entry);
    else ports[at] = entry;
  });

  const trigger = slice.metadata?.annotations?.[LAST_CHANGE_TRIGGER_TIME];
  const triggerTime = trigger === undefined ? undefined : Date.parse(trigger);
  return {
    name: slice.metadata?.name as string, // checked above: a DNS subdomain
    service: `${namespace}/${svcName}`,
    // Exactly as long as it is: an array grown by push keeps room for 16 more.
    ports: ports.length === 0 ? NO_PORTS : ports.slice(),
    triggerTime: Number.isFinite(triggerTime) ? triggerTime : undefined,
    skipped: skipped ?? NONE_SKIPPED,
  };
}

const NONE_SKIPPED: readonly ValidationError[] = Object.freeze([]);
const NO_PORTS: readonly SlicePort[] = Object.freeze([]);

/** Parses one endpoint of a slice. @throws {ValidationError} naming the field. */
function parseEndpoint(
  obj: () => string,
  field: string,
  ep: NonNullable<V1EndpointSlice["endpoints"]>[number],
  family: IPFamily,
  nodeName: string,
): Omit<EndpointInfo, "port" | "key"> {
  const addrs = ep?.addresses;
  if (!Array.isArray(addrs) || addrs.length === 0) {
    throw new ValidationError(obj(), `${field}.addresses`, "empty");
  }
  // Upstream uses only the first address of an endpoint.
  const ip = addrs[0];
  if (ipFamily(ip) !== family) {
    throw new ValidationError(obj(), `${field}.addresses[0]`, `${show(ip)} is not an ${family} address`);
  }
  const c = ep.conditions ?? {};
  for (const k of ["ready", "serving", "terminating"] as const) {
    if (c[k] !== undefined && c[k] !== null && typeof c[k] !== "boolean") {
      throw new ValidationError(obj(), `${field}.conditions.${k}`, show(c[k]));
    }
  }
  // Unset conditions mean: ready, serving when ready, not terminating (as upstream).
  const ready = c.ready ?? true;
  const serving = c.serving ?? ready;
  const terminating = c.terminating ?? false;
  const isLocal = nodeName !== "" && ep.nodeName === nodeName;
  const hints = ep.hints ?? {};
  const zoneHints = hintNames(
    obj,
    `${field}.hints.forZones`,
    hints.forZones,
    (z) => isLabelValue(z) && z !== "",
  );
  const nodeHints = hintNames(obj, `${field}.hints.forNodes`, hints.forNodes, isDNSSubdomain);
  return { ip, ready, serving, terminating, isLocal, zoneHints, nodeHints };
}

/** Shared by every endpoint without hints, which is most of them. */
const NO_HINTS: readonly string[] = Object.freeze([]);

/** Returns the names of a hint list (`[{name}]`), each checked by `valid`. */
function hintNames(
  obj: () => string,
  field: string,
  list: unknown,
  valid: (name: unknown) => boolean,
): readonly string[] {
  if (list === undefined || list === null) return NO_HINTS;
  if (!Array.isArray(list)) throw new ValidationError(obj(), field, show(list));
  if (list.length === 0) return NO_HINTS;
  return list.map((h, j) => {
    const name = (h as { name?: unknown } | null)?.name;
    if (!valid(name)) throw new ValidationError(obj(), `${field}[${j}].name`, show(name));
    return name as string;
  });
}

/**
 * Merges the slices of one service into endpoints per service port: duplicates (the same
 * `ip:port` in two slices, as during a slice handover) are dropped, a ready copy winning, and the
 * result is sorted so that rule text does not depend on event order. A port only one slice lists,
 * already sorted without duplicates (one endpoint, say), is the slice's own list, not a copy.
 */
export function mergeSlices(slices: Iterable<SliceEndpoints>): Map<string, readonly EndpointInfo[]> {
  // Each run of one key of a sorted list cut to its winner: no map per port (the first sync of
  // tens of thousands of Services merges each once).
  const out = new Map<string, readonly EndpointInfo[]>();
  /** Keys whose list joins several slices': a copy of this merge's own. */
  let joined: Set<string> | undefined;
  for (const s of slices) {
    for (const { key, endpoints } of s.ports) {
      const all = out.get(key);
      if (all === undefined) out.set(key, endpoints);
      else {
        out.set(key, all.concat(endpoints));
        (joined ??= new Set()).add(key);
      }
    }
  }
  for (const [key, all] of out) {
    if (joined?.has(key)) winners((all as EndpointInfo[]).sort(compareEndpoints));
    else if (!sortedOnce(all)) out.set(key, winners([...all].sort(compareEndpoints)));
  }
  return out;
}

/** Whether `list` is sorted by key with no key twice: the merge of it alone is itself. */
export function sortedOnce(list: readonly EndpointInfo[]): boolean {
  for (let i = 1; i < list.length; i++) if (!(list[i - 1].key < list[i].key)) return false;
  return true;
}

/**
 * Keeps, of each run of `sorted` with one key, the first endpoint, or the first ready one after a
 * not-ready one (in the slices' order: the sort is stable), as a map filled in that order would.
 */
function winners(sorted: EndpointInfo[]): EndpointInfo[] {
  let kept = 0;
  for (const e of sorted) {
    const last = sorted[kept - 1];
    if (kept > 0 && last.key === e.key) {
      if (!last.ready && e.ready) sorted[kept - 1] = e;
      continue;
    }
    sorted[kept++] = e;
  }
  sorted.length = kept;
  return sorted;
}

function compareEndpoints(a: EndpointInfo, b: EndpointInfo): number {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}
