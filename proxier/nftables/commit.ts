/**
 * How a sync's transaction reaches the kernel. On a table that exists, one `nft -f`: the kernel
 * swaps every change at once, so traffic never meets half a sync. On a table that does not exist
 * yet (a new node, a reboot) nothing is served that half a sync could break, and the bulk of a
 * large table is its map elements: when they fill more than one part of
 * {@linkcode FRESH_CHUNK_STATEMENTS} statements, the table, chains, rules and maps go first, then
 * the elements in parts, a few at a time, then the rules of the hooked chains (`fresh_load.ts`; a
 * full build may have begun that load already, with the elements it finished):
 * until those are in, packets pass the half-loaded table untouched (to the rules of a mode or a
 * kube-proxy this start replaces, when there are any). nft reads a whole input, then parses
 * and checks it on one core before the kernel takes it, so two at once take about two thirds of
 * one transaction's time, and each nft holds a fraction of the elements (about 1.4 KiB of its
 * memory each). A lane is one nft kept running for the load (`NFTables.lane`), taking a part
 * `LANE_STATEMENTS` statements at a time: its memory is taken once, not once a part, and both
 * lanes take from the same part, so neither loads a part alone while the other idles. What is left
 * once the build has ended goes in parts as even as the lanes allow, so nfts started one a part end
 * together too. A part's statements are written when a lane is free for it and handed to nft one by
 * one, so the program never holds the text of every element at once. Whichever way, the
 * sync-generation element goes last: the drift check takes it as the sign that the whole sync is in
 * the kernel.
 * @module
 */
import type { NFTables } from "../../iptables/nft.ts";
import { type NftElementSource, NftTransaction } from "../../iptables/nft_transaction.ts";
import { SYNC_GENERATION } from "./layout.ts";
import { evenPartStatements, FRESH_CHUNK_STATEMENTS, FreshLoad, type FreshStream } from "./fresh_load.ts";

/** What {@linkcode commitSync} applies. */
export interface SyncCommit {
  readonly nft: NFTables;
  readonly tx: NftTransaction;
  /** The sync-generation element this sync ends with. */
  readonly generation: string;
  /**
   * The table did not exist when the sync was built (this transaction creates it): true, or the
   * stream that handed the elements the build finished to the table's load (`fresh_load.ts`); then
   * `tx` holds only what the build's end added, and `elements` may hold some the load already has.
   */
  readonly fresh: boolean | FreshStream | undefined;
  readonly signal?: AbortSignal;
  /** Statements per element transaction of a fresh table; default {@linkcode FRESH_CHUNK_STATEMENTS}. */
  readonly chunkStatements?: number;
  /**
   * Elements added after everything in `tx` (a full sync's book): into `tx` itself, or, when a
   * fresh table loads in parts, into each part as it is about to be applied, so that the texts of
   * every element are never held at once.
   */
  readonly elements?: readonly NftElementSource[];
  /** Runs after each element transaction of a fresh table is in, before its lane writes another. */
  readonly betweenParts?: () => void;
}

/**
 * Applies `c.tx` and the generation element, as the module doc says. Resolves once all of it is in
 * the kernel; rejects with the first failure (the element transactions still running are stopped,
 * and what a fresh table already holds stays: the next sync, full, rewrites it in one transaction).
 */
export async function commitSync(c: SyncCommit): Promise<void> {
  const chunk = c.chunkStatements ?? FRESH_CHUNK_STATEMENTS;
  const stream = typeof c.fresh === "object" ? c.fresh : undefined;
  const elements = stream?.rest(c.elements ?? []) ?? c.elements ?? [];
  // A table whose elements fit one part loads as fast in one transaction.
  const statements = c.tx.addedStatements + NftTransaction.statementsOf(elements);
  let load = stream?.load;
  const size = evenPartStatements(statements, chunk);
  // A new table not loading yet: its structure goes now, its own elements first among the parts.
  const own = load === undefined && c.fresh && statements > chunk ? c.tx.splitForNewTable(size) : undefined;
  if (own !== undefined) {
    load = new FreshLoad({ nft: c.nft, signal: c.signal, betweenParts: c.betweenParts });
    load.start(c.tx.text(), own.hooks);
    c.tx.clear();
  }
  if (load === undefined) {
    for (const e of elements) c.tx.addElements(e.container, e.texts);
    c.tx.flushSet("set", SYNC_GENERATION).addElements(SYNC_GENERATION, [c.generation]);
    return await c.nft.apply(c.tx.text(), c.signal);
  }
  // What the build's end added goes before the parts that need it; its own elements are parts too.
  const { parts, hooks } = c.tx.splitForNewTable(size);
  const later = [(own?.parts ?? []).values(), parts.values(), c.tx.elementParts(elements, size)];
  await load.finish(c.tx, later);
  const last = load.hooks!.append(hooks);
  last.flushSet("set", SYNC_GENERATION).addElements(SYNC_GENERATION, [c.generation]);
  await c.nft.apply(last.text(), c.signal);
}
