/**
 * The nftables layout's per-port part: the set and map elements one service port contributes
 * (entries, endpoints, no-endpoint verdicts, firewall ranges, affinity), and the statements that
 * add or delete them.
 * @module
 */
import type { Logger } from "../runtime/logger.ts";
import { cidrContains } from "../model/net.ts";
import {
  type CategorizedEndpoints,
  categorizeEndpoints,
  internalEndpoints,
  type NodeTopology,
} from "../model/topology.ts";
import type { EndpointInfo, ServicePortInfo } from "../model/types.ts";
import { servicePortNameString } from "../model/types.ts";
import { nftablesScheduler } from "./schedulers.ts";
import { backendsGroup, type LbChain, lbChainName } from "./backends.ts";
import { type MaglevClass, maglevName, type MaglevParams, type MaglevWant } from "./maglev_maps.ts";
import {
  AFFINITY_CHECK,
  AFFINITY_RECORDS,
  affinityName,
  affinityRecordChain,
  BACKENDS,
  BACKENDS_CLUSTER,
  CLUSTER_IPS,
  EXTERNAL,
  EXTERNAL_LOCAL,
  FIREWALL,
  FIREWALL_ALLOW,
  FIREWALL_IPS,
  HAIRPIN,
  INTERNAL,
  LB,
  LB_CLUSTER,
  type NftName,
  NO_ENDPOINT_SERVICES,
  REJECT_CHAIN,
  SERVICE_IPS,
} from "./layout.ts";

/** One element a service port contributes: a set member (no value) or a map entry. */
export interface Element {
  readonly container: NftName;
  readonly key: string;
  /** The map value; undefined for set members. */
  readonly value?: string;
  /** Shown by `nft list` beside the element (the service port's name). */
  readonly comment?: string;
}

/** What per-port elements depend on beyond the service and its endpoints. */
export interface PortElementOptions {
  readonly topology: NodeTopology;
  /** The node's addresses that answer NodePorts (this family). */
  readonly nodePortIPs: readonly string[];
  /** This node's addresses: a source range containing one also admits the VIP as a source. */
  readonly nodeIPs: readonly string[];
  /** False when this family's nft cannot program ClientIP affinity (IPv6 on nft 1.0.6). */
  readonly affinitySupported: boolean;
  /** Maglev's table size and seed (their names carry them). */
  readonly maglev: MaglevParams;
  readonly log?: Logger;
}

/** Everything one service port contributes. */
export interface PortElements {
  readonly elements: Element[];
  /** The lb chains its elements jump to (`backends.ts`). */
  readonly lbChains: readonly LbChain[];
  /** The Maglev tables they jump to (`maglev_maps.ts`), for a Service with scheduler mh. */
  readonly maglev: readonly MaglevWant[];
  /** Its ClientIP timeout, 0 when none (or unsupported). */
  readonly affinityTimeout: number;
  /** Whether it has internal / external endpoints missing on this node (for the metric). */
  readonly noLocalInternal: boolean;
  readonly noLocalExternal: boolean;
}

/** Returns `ip . proto . port`, the key of an entry. */
export function entryKey(ip: string, proto: string, port: number): string {
  return `${ip} . ${proto} . ${port}`;
}

/** Orders endpoints by `ip:port`, the same on every node. */
const byKey = (a: { key: string }, b: { key: string }) => a.key < b.key ? -1 : a.key > b.key ? 1 : 0;

/** Comments are at most 128 bytes in nft; names are DNS labels, so no quoting is needed. */
function comment(svc: ServicePortInfo): string {
  const s = servicePortNameString(svc.name);
  return s.length > 128 ? s.slice(0, 128) : s;
}

const NO_LB_CHAINS: readonly LbChain[] = Object.freeze([]);
const NO_MAGLEV: readonly MaglevWant[] = Object.freeze([]);

/** An endpoint as a backends map's value: `ip . port`. */
const backendValue = (e: EndpointInfo) => `${e.ip} . ${e.port}`;

/**
 * One port's elements as they are made. A class rather than closures over a call's locals: a
 * full build makes one per service port (50,000 and more), and its collections are made only
 * when the port needs them (most ports have one lb chain and no Maglev table).
 */
class PortBuild {
  readonly elements: Element[] = [];
  lbChains: Map<NftName, LbChain> | undefined;
  maglev: Map<NftName, MaglevWant> | undefined;
  readonly #svc: ServicePortInfo;
  readonly #o: PortElementOptions;
  readonly #scheduler: ReturnType<typeof nftablesScheduler>;
  readonly #hasAny: boolean;
  #note: string | undefined;

  constructor(svc: ServicePortInfo, o: PortElementOptions, hasAny: boolean) {
    this.#svc = svc;
    this.#o = o;
    this.#scheduler = nftablesScheduler(svc.scheduler, svc.schedFlags);
    this.#hasAny = hasAny;
  }

  /** The comment of this port's elements, made once. */
  get note(): string {
    return this.#note ??= comment(this.#svc);
  }

  /** Maglev: one table per class, shared by the classes with the same endpoints. */
  #maglevFor(cls: MaglevClass, list: readonly EndpointInfo[]): NftName {
    const endpoints = list.map((e) => ({ key: e.key, value: backendValue(e) })).sort(byKey);
    const same = JSON.stringify(endpoints);
    this.maglev ??= new Map();
    for (const w of this.maglev.values()) if (JSON.stringify(w.endpoints) === same) return w.name;
    const sourcePort = this.#scheduler.sourcePort;
    const name = maglevName(cls, this.#svc.name, this.#o.maglev, sourcePort);
    this.maglev.set(name, { name, endpoints, sourcePort });
    return name;
  }

  /** The load-balancing entry of `entry` over `all`, and its backends. */
  lb(entry: string, all: readonly EndpointInfo[], cluster: boolean, cls: MaglevClass): void {
    if (all.length === 0) return;
    const container = cluster ? LB_CLUSTER : LB;
    const scheduler = this.#scheduler;
    if (scheduler.algorithm === "mh") {
      this.elements.push({ container, key: entry, value: `goto ${this.#maglevFor(cls, all)}` });
      return;
    }
    const algorithm = scheduler.algorithm === "sh" && scheduler.sourcePort ? "shp" : scheduler.algorithm;
    const chain: LbChain = { algorithm, n: all.length, cluster };
    const name = lbChainName(chain);
    (this.lbChains ??= new Map()).set(name, chain);
    this.elements.push({ container, key: entry, value: `goto ${name}` });
    // A hash picks an index: in the same order on every node, it picks the same endpoint.
    const list = algorithm === "sh" || algorithm === "shp" || algorithm === "dh" ? [...all].sort(byKey) : all;
    this.elements.push(backendsGroup(cluster ? BACKENDS_CLUSTER : BACKENDS, entry, list.map(backendValue)));
  }

  /** The no-endpoint verdict of `entry`, unless it has endpoints here. */
  noEndpoints(entry: string, hasEndpointsHere: boolean): void {
    if (hasEndpointsHere) return;
    this.elements.push({
      container: NO_ENDPOINT_SERVICES,
      key: entry,
      value: this.#hasAny ? "drop" : `goto ${REJECT_CHAIN}`,
      comment: this.note,
    });
  }
}

/** Returns every element one service port contributes; see the module doc for their meaning. */
export function portElements(
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[],
  o: PortElementOptions,
): PortElements {
  const cat: CategorizedEndpoints = categorizeEndpoints(svc, eps, o.topology, o.log);
  const { hasAny, hasInternal, hasExternal } = cat;
  const proto = svc.protocol.toLowerCase();
  const b = new PortBuild(svc, o, hasAny);
  const elements = b.elements;
  const affinityTimeout = svc.stickyMaxAgeSeconds > 0 && o.affinitySupported ? svc.stickyMaxAgeSeconds : 0;
  // The entries served here, for their affinity elements.
  const served: string[] | undefined = affinityTimeout > 0 ? [] : undefined;

  elements.push({ container: CLUSTER_IPS, key: svc.clusterIP });
  const clusterEntry = entryKey(svc.clusterIP, proto, svc.port);
  if (hasInternal) {
    elements.push({ container: SERVICE_IPS, key: clusterEntry, value: `goto ${INTERNAL}` });
    b.lb(clusterEntry, internalEndpoints(svc, cat), false, "internal");
    served?.push(clusterEntry);
  }
  b.noEndpoints(clusterEntry, hasInternal);

  const externalAddresses = svc.externalIPs.length + svc.loadBalancerIPs.length +
    (svc.nodePort === 0 ? 0 : o.nodePortIPs.length);
  if (externalAddresses > 0) {
    const external = [
      ...svc.externalIPs.map((ip) => entryKey(ip, proto, svc.port)),
      ...svc.loadBalancerIPs.map((ip) => entryKey(ip, proto, svc.port)),
      ...(svc.nodePort === 0 ? [] : o.nodePortIPs.map((ip) => entryKey(ip, proto, svc.nodePort))),
    ];
    for (const entry of external) {
      if (hasAny) {
        const chain = svc.externalPolicyLocal ? EXTERNAL_LOCAL : EXTERNAL;
        elements.push({ container: SERVICE_IPS, key: entry, value: `goto ${chain}` });
        if (svc.externalPolicyLocal) {
          b.lb(entry, cat.local, false, "external");
          b.lb(entry, cat.cluster, true, "external-cluster");
        } else b.lb(entry, cat.cluster, false, "external");
        served?.push(entry);
      }
      b.noEndpoints(entry, hasExternal);
    }
  }

  if (svc.loadBalancerIPs.length > 0 && svc.hasSourceRanges) {
    const allowFromNode = o.nodeIPs.some((ip) =>
      svc.loadBalancerSourceRanges.some((c) => cidrContains(c, ip))
    );
    for (const ip of svc.loadBalancerIPs) {
      const entry = entryKey(ip, proto, svc.port);
      elements.push({ container: FIREWALL_IPS, key: entry, value: `goto ${FIREWALL}` });
      for (const cidr of svc.loadBalancerSourceRanges) {
        elements.push({ container: FIREWALL_ALLOW, key: `${entry} . ${cidr}` });
      }
      // A VIP routed locally loops back with itself as the source: admit that when the node is admitted.
      if (allowFromNode) elements.push({ container: FIREWALL_ALLOW, key: `${entry} . ${ip}` });
    }
  }

  for (const entry of served ?? []) {
    elements.push({
      container: AFFINITY_CHECK,
      key: entry,
      value: `jump ${affinityName(affinityTimeout)}`,
    });
    elements.push({
      container: AFFINITY_RECORDS,
      key: entry,
      value: `goto ${affinityRecordChain(affinityTimeout)}`,
    });
  }
  // A pod reaches services through its own node only, so only this node's endpoints can hairpin
  // here; the set stays as small as one node's pods (upstream marks every endpoint, which costs
  // an element per endpoint of the cluster).
  for (const e of cat.all) if (e.isLocal) elements.push({ container: HAIRPIN, key: `${e.ip} . ${e.ip}` });
  return {
    elements,
    lbChains: b.lbChains === undefined ? NO_LB_CHAINS : [...b.lbChains.values()],
    maglev: b.maglev === undefined ? NO_MAGLEV : [...b.maglev.values()],
    affinityTimeout,
    noLocalInternal: hasAny && !hasInternal,
    noLocalExternal: hasAny && !hasExternal && externalAddresses > 0,
  };
}

/**
 * Returns what follows an element's key in `add element`: `[ comment "c"][ : value]`, empty for a
 * set member (its text is its key).
 */
export function elementRest(e: Element): string {
  const c = e.comment === undefined ? "" : ` comment "${e.comment}"`;
  return e.value === undefined ? c : `${c} : ${e.value}`;
}
