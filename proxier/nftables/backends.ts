/**
 * The nftables layout's per-count part: the `backends` maps (endpoint by entry and index) and the
 * lb chains that DNAT to one of an entry's N endpoints, one chain per distinct endpoint count and
 * way of picking: `lb-N` (`numgen random mod N`, the default), `lb-rr-N` (`numgen inc mod N`),
 * `lb-sh-N` / `lb-shp-N` (`jhash` of the source address / and port), `lb-dh-N` (`jhash` of the
 * destination address); `lbc-...` the same over `backends-cluster`.
 * @module
 */
import { nftablesScheduler, type NftAlgorithm } from "./schedulers.ts";
import type { EndpointsMap, IPFamily, ServicePortMap } from "../model/types.ts";
import { BACKENDS, BACKENDS_CLUSTER, type NftName, seedHex } from "./layout.ts";
import { nftFamily } from "../../iptables/nft.ts";
import type { NftTransaction } from "../../iptables/nft_transaction.ts";

/** How an lb chain picks the index: the schedulers other than Maglev, sh with or without the port. */
export type LbAlgorithm = Exclude<NftAlgorithm, "mh"> | "shp";

/** One lb chain. */
export interface LbChain {
  readonly algorithm: LbAlgorithm;
  /** The number of endpoints it picks from. */
  readonly n: number;
  /** Over {@linkcode BACKENDS_CLUSTER} (externalTrafficPolicy Local's cluster-wide endpoints). */
  readonly cluster: boolean;
}

/** Returns the chain's name: `lb-N`, `lbc-N`, `lb-rr-N`, `lbc-shp-N`... */
export function lbChainName(c: LbChain): NftName {
  return `${c.cluster ? "lbc" : "lb"}${c.algorithm === "random" ? "" : `-${c.algorithm}`}-${c.n}`;
}

const LB_CHAIN = /^(lbc?)(?:-(rr|sh|shp|dh))?-([1-9]\d{0,5})$/;

/** Returns the lb chain `name` stands for; undefined for any other name. */
export function parseLbChain(name: NftName): LbChain | undefined {
  const m = LB_CHAIN.exec(name);
  if (m === null) return undefined;
  return { cluster: m[1] === "lbc", algorithm: (m[2] ?? "random") as LbAlgorithm, n: Number(m[3]) };
}

/**
 * Returns the expression giving the index for `c`. The hashes take the cluster-wide `seed`, so every
 * node picks the same index for the same packet (over endpoints listed in the same order).
 */
export function lbIndexExpr(family: IPFamily, c: LbChain, seed: number): string {
  const fam = nftFamily(family);
  const s = `seed 0x${seedHex(seed)}`;
  switch (c.algorithm) {
    case "random":
      return `numgen random mod ${c.n}`;
    case "rr":
      return `numgen inc mod ${c.n}`;
    case "sh":
      return `jhash ${fam} saddr mod ${c.n} ${s}`;
    case "shp":
      return `jhash ${fam} saddr . th sport mod ${c.n} ${s}`;
    case "dh":
      return `jhash ${fam} daddr mod ${c.n} ${s}`;
  }
}

/** Between the endpoints of one entry's backends group (an endpoint, `ip . port`, holds no comma). */
const BETWEEN = ", ";

/**
 * Returns the one element standing for an entry's backends (the backends map holds `entry . i :
 * endpoint i`): the book keeps a group per entry, not an element per endpoint.
 */
export function backendsGroup(container: NftName, entry: string, endpoints: readonly string[]): {
  container: NftName;
  key: string;
  value: string;
} {
  return { container, key: entry, value: endpoints.join(BETWEEN) };
}

/** Returns the endpoints (`ip . port`, by index) of a backends group's rest (` : e0, e1, ...`). */
export function backendsOf(rest: string): string[] {
  return rest.slice(3).split(BETWEEN);
}

/** How the element book spells out a backends group: `entry . i : endpoint i`. */
export const BACKENDS_GROUP = {
  elements(entry: string, rest: string): Array<[string, string]> {
    return backendsOf(rest).map((e, i) => [`${entry} . ${i}`, ` : ${e}`]);
  },
  *texts(entry: string, rest: string): Generator<string> {
    let i = 0;
    for (const e of backendsOf(rest)) yield `${entry} . ${i++} : ${e}`;
  },
  count(rest: string): number {
    let n = 1;
    for (let at = rest.indexOf(BETWEEN); at >= 0; at = rest.indexOf(BETWEEN, at + 1)) n++;
    return n;
  },
};

/** Returns the size a backends map is created with for `elements`: room to double, at least 65,536. */
export function backendsSize(elements: number): number {
  let size = 65536;
  while (size < elements * 2) size *= 2;
  return size;
}

/** Endpoint counts whose `lb-N` / `lbc-N` chains always exist, so most partial syncs need none. */
export const PRECREATED_LB_COUNTS: readonly number[] = Array.from({ length: 32 }, (_, i) => i + 1);

/** Returns true for a precreated chain (`lb-N` / `lbc-N`, N in {@linkcode PRECREATED_LB_COUNTS}). */
export function isPrecreated(name: NftName): boolean {
  const c = parseLbChain(name);
  return c !== undefined && c.algorithm === "random" && PRECREATED_LB_COUNTS.includes(c.n);
}

/**
 * Returns the most elements {@linkcode BACKENDS} and {@linkcode BACKENDS_CLUSTER} can take for the
 * ports of `services` (each entry's group holds at most every endpoint of its port; `nodePortIPs`:
 * how many addresses answer a NodePort), when every lb chain they can need is precreated (the
 * default scheduler, at most 32 endpoints). Undefined when a port may need another: the maps are
 * then created with every chain their ports need once all are built (see {@linkcode addBackends}).
 */
export function precreatedBackendsBound(
  services: ServicePortMap,
  endpoints: EndpointsMap,
  nodePortIPs: number,
): [number, number] | undefined {
  let local = 0;
  let cluster = 0;
  for (const [key, svc] of services) {
    const eps = endpoints.get(key)?.length ?? 0;
    if (eps > PRECREATED_LB_COUNTS.length) return undefined;
    if (nftablesScheduler(svc.scheduler, svc.schedFlags).algorithm !== "random") return undefined;
    const external = svc.externalIPs.length + svc.loadBalancerIPs.length +
      (svc.nodePort === 0 ? 0 : nodePortIPs);
    local += eps * (1 + external);
    if (svc.externalPolicyLocal) cluster += eps * external;
  }
  return [local, cluster];
}

/**
 * Adds to `tx` the statements that recreate {@linkcode BACKENDS} (or {@linkcode BACKENDS_CLUSTER})
 * empty, with each of `chains`. The map's key holds a `numgen` value, so it is declared with `typeof`; nft
 * 1.0.6 cannot add a rule that reads such a map once it exists in the kernel ("conflicting protocols
 * specified"), so the map and every rule reading it are written together, after `inKernel` (every
 * chain that may still read it) has been flushed. `size` bounds the map and sizes its hash up
 * front, so the kernel need not grow it while loading.
 */
export function addBackends(
  tx: NftTransaction,
  family: IPFamily,
  cluster: boolean,
  inKernel: Iterable<NftName>,
  chains: Iterable<LbChain>,
  size: number,
  seed: number,
): void {
  const fam = tx.family;
  const map = cluster ? BACKENDS_CLUSTER : BACKENDS;
  for (const c of inKernel) tx.flushChain(c);
  tx.recreateSet(
    "map",
    map,
    `typeof ${fam} daddr . meta l4proto . th dport . numgen random mod 1 : ${fam} daddr . th dport; size ${size};`,
  );
  for (const c of chains) {
    const chain = lbChainName(c);
    tx.addChain(chain).flushChain(chain).addRule(
      chain,
      `meta l4proto { tcp, udp, sctp } th dport != 0 dnat ${fam} to ${fam} daddr . meta l4proto . th dport . ${
        lbIndexExpr(family, c, seed)
      } map @${map}`,
    );
  }
}
