/**
 * Accumulates Service events between syncs, as upstream's ServiceChangeTracker.
 * @module
 */
import type { V1Service } from "@kubernetes/client-node";
import type { ObjectProblem, ObjectWarnings } from "./object_warnings.ts";
import { ValidationError } from "../runtime/errors.ts";
import { servicePorts, type ServicePortsOptions } from "./service_port.ts";
import type { IPFamily, ServicePortInfo, ServicePortMap } from "./types.ts";
import { namespacedName, servicePortKey } from "./types.ts";
import { flat } from "./flat_string.ts";

/** What applying the pending Service changes did to the map. */
export interface ServiceUpdateResult {
  /**
   * Per Service whose ports changed (`namespace/name`): when its change began to wait (the first
   * event since it was last applied). The tracker's own pending map, handed over, not copied.
   */
  readonly changed: ReadonlyMap<string, { readonly since: number }>;
  /**
   * Ports that went away or changed (as they were): the conntrack reconciler deletes the flows to
   * their addresses and node port that no current port serves.
   */
  readonly removedPorts: ServicePortInfo[];
  /**
   * Service port keys of the updated Services, before or after the change (`PendingChanges.apply`
   * adds the ports whose endpoints changed, as its `changedPorts`).
   */
  readonly portKeys: Set<string>;
}

/**
 * A Service's ports with their keys: pairs, not a map (a Service has a port or two, and a map would
 * cost each of the tens of thousands of Services held about 150 bytes more). Keys are unique: a
 * Service naming one port twice is malformed.
 */
type PortsByKey = ReadonlyArray<readonly [key: string, info: ServicePortInfo]>;

/** A Service with no ports (new, gone or malformed): one shared empty list. */
const NO_PORTS: PortsByKey = Object.freeze([]);

/** Returns the port of `ports` with key `key`, if any. */
function portOf(ports: PortsByKey, key: string): ServicePortInfo | undefined {
  for (const [k, info] of ports) if (k === key) return info;
  return undefined;
}

/** Returns true when both hold the same keys with JSON-equal ports. */
function samePorts(a: PortsByKey, b: PortsByKey): boolean {
  if (a.length !== b.length) return false;
  for (const [key, info] of a) {
    const other = portOf(b, key);
    if (other === undefined || JSON.stringify(info) !== JSON.stringify(other)) return false;
  }
  return true;
}

/** Tracks Service changes for one IP family until the next sync checks them out. */
export class ServiceChangeTracker {
  readonly #family: IPFamily;
  readonly #warnings: ObjectWarnings;
  readonly #read: ServicePortsOptions;
  readonly #now: () => number;
  /** Per `namespace/name`: the ports at the last sync and the ports now. */
  #items = new Map<string, { previous: PortsByKey; current: PortsByKey; since: number }>();
  /**
   * Per `namespace/name`: the ports the last {@linkcode apply} gave it. A change's "before" comes
   * from here, not from the old object, so a source need not keep whole Services between events.
   */
  readonly #applied = new Map<string, PortsByKey>();

  /** Builds an empty tracker; nothing runs until events arrive. */
  constructor(
    opts: { family: IPFamily; warnings: ObjectWarnings; now?: () => number } & ServicePortsOptions,
  ) {
    this.#family = opts.family;
    this.#warnings = opts.warnings;
    this.#now = opts.now ?? Date.now;
    this.#read = {
      allowExternalIPs: opts.allowExternalIPs,
      schedulerNotice: opts.schedulerNotice,
      portNotice: opts.portNotice,
    };
  }

  /** Number of Services with changes not yet applied. */
  get pending(): number {
    return this.#items.size;
  }

  /**
   * Records one event (add: `previous` undefined; delete: `current` undefined). Returns true when
   * the Service now has a change pending. Only `previous`'s namespace and name are read (the ports
   * before the change are the ones last applied). A malformed Service is logged and treated as
   * absent, so a bad update removes the Service's rules rather than keeping stale ones.
   */
  update(previous: V1Service | undefined, current: V1Service | undefined): boolean {
    const svc = current ?? previous;
    if (svc === undefined) return false;
    const key = namespacedName(svc.metadata?.namespace ?? "default", String(svc.metadata?.name));
    const item = this.#items.get(key);
    const ports = this.#toPorts(key, current);
    if (current === undefined) this.#warnings.forget(`Service/${key}`);
    // An event that changes nothing since the last apply writes no entry: on a node running both
    // families, every Service of the other family is one (tens of thousands at a first list).
    const before = item?.previous ?? this.#applied.get(key) ?? NO_PORTS;
    if (samePorts(before, ports)) {
      if (item !== undefined) this.#items.delete(key);
      return false;
    }
    if (item === undefined) this.#items.set(key, { previous: before, current: ports, since: this.#now() });
    else item.current = ports;
    return true;
  }

  /** True when `service` (`namespace/name`) has ports as of the last {@linkcode apply}. */
  has(service: string): boolean {
    return this.#applied.has(service);
  }

  /** Adds the keys of `service`'s ports as of the last {@linkcode apply} to `into`. */
  addPortKeys(service: string, into: Set<string>): void {
    for (const [key] of this.#applied.get(service) ?? NO_PORTS) into.add(key);
  }

  /** Applies and forgets the pending changes; returns what changed. */
  apply(map: ServicePortMap): ServiceUpdateResult {
    const removedPorts: ServicePortInfo[] = [];
    const portKeys = new Set<string>();
    const changed = this.#items;
    this.#items = new Map();
    for (const [svc, { previous, current }] of changed) {
      for (const [key, info] of previous) {
        portKeys.add(key);
        map.delete(key);
        if (portOf(current, key) !== info) removedPorts.push(info);
      }
      for (const [key, info] of current) {
        portKeys.add(key);
        map.set(key, info);
      }
      if (current.length === 0) this.#applied.delete(svc);
      else this.#applied.set(svc, current);
    }
    return { changed, removedPorts, portKeys };
  }

  /** Parses `svc` (named `key`), reporting its problems once per version. */
  #toPorts(key: string, svc: V1Service | undefined): PortsByKey {
    if (svc === undefined) return NO_PORTS;
    let out: PortsByKey = NO_PORTS;
    const problems: ObjectProblem[] = [];
    try {
      const { ports, warnings, notices = [] } = servicePorts(svc, this.#family, this.#read);
      problems.push(
        ...warnings.map((msg) => ({ msg })),
        ...notices.map(({ msg, reason }) => ({ msg, event: reason })),
      );
      if (ports.length > 0) out = ports.map((p) => [flat(servicePortKey(p.name)), p] as const);
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      problems.push({ msg: `Skipping malformed ${e.message}`, fields: { object: e.object, field: e.field } });
    }
    this.#warnings.report(`Service/${key}`, svc, problems);
    return out;
  }
}
