/**
 * The nftables layout's per-count part: the `backends` maps (endpoint by entry and index) and the
 * `lb-N` / `lbc-N` chains that DNAT with `numgen random mod N`, one per distinct endpoint count.
 * @module
 */
import type { IPFamily } from "../types.ts";
import { BACKENDS, BACKENDS_CLUSTER, lbChain, lbClusterChain, type NftName, TABLE, words } from "./layout.ts";

/** Returns the size a backends map is created with for `elements`: room to double, at least 65,536. */
export function backendsSize(elements: number): number {
  let size = 65536;
  while (size < elements * 2) size *= 2;
  return size;
}

/** Endpoint counts whose `lb-N` / `lbc-N` chains always exist, so most partial syncs need none. */
export const PRECREATED_LB_COUNTS: readonly number[] = Array.from({ length: 32 }, (_, i) => i + 1);

/**
 * Returns the statements that recreate {@linkcode BACKENDS} (or {@linkcode BACKENDS_CLUSTER}) empty,
 * with an `lb-N` (`lbc-N`) chain for each of `counts`. The map's key holds a `numgen` value, so it
 * is declared with `typeof`; nft 1.0.6 cannot add a rule that reads such a map once it exists in the
 * kernel ("conflicting protocols specified"), so the map and every rule reading it are written
 * together, after `inKernel` (every chain that may still read it) has been flushed. `size` bounds
 * the map and sizes its hash up front, so the kernel need not grow it while loading.
 */
export function backendsStatements(
  family: IPFamily,
  cluster: boolean,
  inKernel: Iterable<NftName>,
  counts: Iterable<number>,
  size: number,
): string[] {
  const { fam } = words(family);
  const t = `${fam} ${TABLE}`;
  const map = cluster ? BACKENDS_CLUSTER : BACKENDS;
  const decl =
    `{ typeof ${fam} daddr . meta l4proto . th dport . numgen random mod 1 : ${fam} daddr . th dport; size ${size}; }`;
  const out = [...inKernel].map((c) => `flush chain ${t} ${c}`);
  // "add" first, so the delete succeeds when the map does not exist yet.
  out.push(`add map ${t} ${map} ${decl}`, `delete map ${t} ${map}`, `add map ${t} ${map} ${decl}`);
  for (const n of counts) {
    const chain = cluster ? lbClusterChain(n) : lbChain(n);
    out.push(
      `add chain ${t} ${chain}`,
      `flush chain ${t} ${chain}`,
      `add rule ${t} ${chain} meta l4proto { tcp, udp, sctp } th dport != 0 dnat ${fam} to ${fam} daddr . meta l4proto . th dport . numgen random mod ${n} map @${map}`,
    );
  }
  return out;
}
