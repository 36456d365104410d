/**
 * How a sync's transaction reaches the kernel. On a table that exists, one `nft -f`: the kernel
 * swaps every change at once, so traffic never meets half a sync. On a table that does not exist
 * yet (a new node, a reboot) nothing is served that half a sync could break, and the bulk of a
 * large table is its map elements: when they fill more than one part of
 * {@linkcode FRESH_CHUNK_STATEMENTS} statements, the table, chains, rules and maps go first, then
 * the elements in parts, {@linkcode FRESH_LANES} at a time, then the rules of the hooked chains:
 * until those are in, packets pass the half-loaded table untouched (to the rules of a mode or a
 * kube-proxy this start replaces, when there are any). nft reads a whole input, then parses
 * and checks it on one core before the kernel takes it, so two at once take about two thirds of
 * one transaction's time, and each nft holds a fraction of the elements (about 1.4 KiB of its
 * memory each). A part's statements are written when a lane is free for it and handed to nft one
 * by one, so the program never holds the text of every element at once. Whichever way, the
 * sync-generation element goes last: the drift check takes it
 * as the sign that the whole sync is in the kernel.
 * @module
 */
import type { NFTables } from "../../iptables/nft.ts";
import { type NftElementSource, NftTransaction } from "../../iptables/nft_transaction.ts";
import { SYNC_GENERATION } from "./layout.ts";

/** `add element` statements (of up to 1,000 elements each) in one transaction of a fresh table. */
export const FRESH_CHUNK_STATEMENTS = 64;

/**
 * Element transactions of a fresh table run at once: one parses while another's is in the kernel;
 * each more adds an nft's memory, and the kernel takes one transaction at a time.
 */
export const FRESH_LANES = 2;

/** What {@linkcode commitSync} applies. */
export interface SyncCommit {
  readonly nft: NFTables;
  readonly tx: NftTransaction;
  /** The sync-generation element this sync ends with. */
  readonly generation: string;
  /** The table did not exist when the sync was built (this transaction creates it). */
  readonly fresh: boolean;
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
  const elements = c.elements ?? [];
  // A table whose elements fit one part loads as fast in one transaction.
  const statements = c.tx.addedStatements + NftTransaction.statementsOf(elements);
  const split = c.fresh && statements > chunk ? c.tx.splitForNewTable(chunk) : undefined;
  if (split === undefined) { for (const e of elements) c.tx.addElements(e.container, e.texts); }
  const last = split?.hooks ?? c.tx;
  last.flushSet("set", SYNC_GENERATION).addElements(SYNC_GENERATION, [c.generation]);
  if (split !== undefined) {
    await c.nft.apply(c.tx.text(), c.signal);
    const queues = [split.parts.values(), c.tx.elementParts(elements, chunk)];
    await inLanes(c.nft, queues, c.betweenParts ?? (() => {}), c.signal);
  }
  await c.nft.apply(last.text(), c.signal);
}

/**
 * Applies the parts `queues` yield, in order, {@linkcode FRESH_LANES} at once, `between` after each;
 * after a failure starts no more, stops the rest and waits for them.
 */
async function inLanes(
  nft: NFTables,
  queues: Iterator<NftTransaction>[],
  between: () => void,
  signal?: AbortSignal,
): Promise<void> {
  const stop = new AbortController();
  const both = signal === undefined ? stop.signal : AbortSignal.any([signal, stop.signal]);
  let failure: { error: unknown } | undefined;
  // Each part is taken (or written) as a lane is free for it, and is garbage once its nft has read it.
  const next = (): NftTransaction | undefined => {
    while (queues.length > 0) {
      const n = queues[0].next();
      if (!n.done) return n.value;
      queues.shift();
    }
    return undefined;
  };
  const lane = async () => {
    for (let part = next(); part !== undefined && failure === undefined; part = next()) {
      try {
        await nft.apply(part.statements(), both);
        between();
      } catch (error) {
        failure ??= { error };
        stop.abort();
      }
    }
  };
  await Promise.all(Array.from({ length: FRESH_LANES }, lane));
  if (failure !== undefined) throw failure.error;
}
