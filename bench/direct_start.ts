/**
 * The cold bench's references between the lean start and the program: a process that lists what
 * the program lists, parses each list whole and runs the nftables proxier's own first full sync into
 * an empty ruleset, with the program's own readings of every object, but without the rest of the
 * program (flags, kernel probes, informers, the IPv6 family, health and metrics servers). Two ways:
 * - `direct`: every Service's ports and every slice's endpoints read straight into the maps a sync
 *   reads ({@linkcode directMaps}), no handler or change tracker between;
 * - `handled`: the objects through the proxier's own handlers and change trackers, then its first
 *   sync as any sync runs (the checkout of the trackers included).
 *
 * The program's start less `handled` is what the rest of the program adds; `handled` less `direct`
 * what the change trackers and their checkout add; `direct` less the lean start what the proxier's
 * own first sync adds. Neither runs the memory step that follows a sync: the program's first sync is
 * in the kernel before it.
 *
 * Run as a file, it is that process: `direct_start.ts MASTER direct|handled`.
 * @module
 */
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { DenoSessionExecutor } from "../iptables/tool_session.ts";
import type { NFTables } from "../iptables/nft.ts";
import { requestURL, sourceQueries } from "../proxier/sources/api_client.ts";
import { servicePorts } from "../proxier/model/service_port.ts";
import { mergeSlices, type SliceEndpoints, sliceEndpoints } from "../proxier/model/endpoint.ts";
import type { EndpointsMap, IPFamily, ServicePortMap } from "../proxier/model/types.ts";
import { servicePortKey } from "../proxier/model/types.ts";
import { NftablesProxier } from "../proxier/nftables/proxier.ts";
import { SyncMemory } from "../proxier/runtime/sync_memory.ts";
import { benchNftablesOptions } from "./nftables_proxier.ts";

/** The ways of a direct start; see the module doc. */
export const DIRECT_WAYS = ["direct", "handled"] as const;

/** One of {@linkcode DIRECT_WAYS}. */
export type DirectWay = typeof DIRECT_WAYS[number];

/**
 * Returns the maps a sync reads for `family` on node `nodeName`, read straight from the objects with
 * the program's own readings (`servicePorts`, `sliceEndpoints`, `mergeSlices`): what the change
 * trackers hold after their first checkout, for objects that are well formed.
 */
export function directMaps(
  services: readonly V1Service[],
  slices: readonly V1EndpointSlice[],
  family: IPFamily,
  nodeName: string,
): { services: ServicePortMap; endpoints: EndpointsMap } {
  const ports: ServicePortMap = new Map();
  for (const s of services) {
    for (const p of servicePorts(s, family).ports) ports.set(servicePortKey(p.name), p);
  }
  const byService = new Map<string, SliceEndpoints[]>();
  for (const s of slices) {
    const read = sliceEndpoints(s, family, nodeName);
    if (read === undefined) continue;
    const list = byService.get(read.service);
    if (list === undefined) byService.set(read.service, [read]);
    else list.push(read);
  }
  const endpoints: EndpointsMap = new Map();
  for (const list of byService.values()) for (const [key, eps] of mergeSlices(list)) endpoints.set(key, eps);
  return { services: ports, endpoints };
}

/** The bench's nftables proxier, whose first full sync can be run on maps made outside it. */
export class DirectProxier extends NftablesProxier {
  /** Runs a full sync of `maps` into the kernel (every port counted as changed); resolves once it is in. */
  async syncDirect(maps: { services: ServicePortMap; endpoints: EndpointsMap }): Promise<void> {
    const none = new Map();
    await this.syncRules({
      ...maps,
      full: true,
      signal: new AbortController().signal,
      changedPorts: new Set(maps.services.keys()),
      changedServices: new Set(),
      serviceChanges: { changed: none, removedPorts: [], portKeys: new Set() },
      endpointChanges: { lastChangeTriggerTimes: [], triggerTimes: none, changedSince: none },
    });
  }

  /** Feeds `services` and `slices` to the handlers as a first list of each, then syncs once. */
  async syncHandled(services: readonly V1Service[], slices: readonly V1EndpointSlice[]): Promise<void> {
    for (const s of services) this.onServiceAdd(s);
    for (const s of slices) this.onEndpointSliceAdd(s);
    this.onServicesSynced();
    this.onEndpointSlicesSynced();
    await this.syncNow();
  }
}

/**
 * Returns the bench's proxier on `nft` (default an nft of the process's own) with no memory step
 * after its syncs: collections within a sync still run.
 */
export function directProxier(nft?: NFTables): DirectProxier {
  const none = () => {};
  return new DirectProxier({
    ...benchNftablesOptions(new DenoSessionExecutor(), { nft }),
    memory: new SyncMemory({ now: Date.now, thorough: none, ifDue: none, trim: none }),
  });
}

/** The direct start itself: see the module doc. */
async function directStart(master: string, way: DirectWay): Promise<void> {
  const list = async (kind: "Service" | "EndpointSlice") => {
    const { path, query } = sourceQueries("node-a")[kind];
    const res = await fetch(requestURL(master, path, query));
    if (!res.ok) throw new Error(`listing ${path} answered ${res.status}`);
    return JSON.parse(await res.text()).items;
  };
  const [services, slices]: [V1Service[], V1EndpointSlice[]] = await Promise.all([
    list("Service"),
    list("EndpointSlice"),
  ]);
  const p = directProxier();
  try {
    if (way === "direct") await p.syncDirect(directMaps(services, slices, "IPv4", "node-a"));
    else await p.syncHandled(services, slices);
  } finally {
    p.close();
  }
}

if (import.meta.main) {
  const [master, way] = Deno.args;
  if (!(DIRECT_WAYS as readonly string[]).includes(way)) {
    throw new Error(`way: one of ${DIRECT_WAYS.join(", ")}`);
  }
  await directStart(master, way as DirectWay);
}
