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
 * memory each). Whichever way, the sync-generation element goes last: the drift check takes it
 * as the sign that the whole sync is in the kernel.
 * @module
 */
import type { NFTables } from "../../iptables/nft.ts";
import type { NftTransaction } from "../../iptables/nft_transaction.ts";
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
}

/**
 * Applies `c.tx` and the generation element, as the module doc says. Resolves once all of it is in
 * the kernel; rejects with the first failure (the element transactions still running are stopped,
 * and what a fresh table already holds stays: the next sync, full, rewrites it in one transaction).
 */
export async function commitSync(c: SyncCommit): Promise<void> {
  const chunk = c.chunkStatements ?? FRESH_CHUNK_STATEMENTS;
  // A table whose elements fit one part loads as fast in one transaction.
  const split = c.fresh && c.tx.addedStatements > chunk ? c.tx.splitForNewTable(chunk) : undefined;
  const last = split?.hooks ?? c.tx;
  last.flushSet("set", SYNC_GENERATION).addElements(SYNC_GENERATION, [c.generation]);
  if (split !== undefined) {
    await c.nft.apply(c.tx.text(), c.signal);
    await inLanes(c.nft, split.parts, c.signal);
  }
  await c.nft.apply(last.text(), c.signal);
}

/** Applies `parts`, {@linkcode FRESH_LANES} at once; after a failure starts no more, stops the rest and waits for them. */
async function inLanes(nft: NFTables, parts: NftTransaction[], signal?: AbortSignal): Promise<void> {
  const stop = new AbortController();
  const both = signal === undefined ? stop.signal : AbortSignal.any([signal, stop.signal]);
  let failure: { error: unknown } | undefined;
  const lane = async () => {
    // Taken off the queue as applied: each text is garbage once its nft has read it.
    for (let part = parts.shift(); part !== undefined && failure === undefined; part = parts.shift()) {
      try {
        await nft.apply(part.text(), both);
      } catch (error) {
        failure ??= { error };
        stop.abort();
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(FRESH_LANES, parts.length) }, lane));
  if (failure !== undefined) throw failure.error;
}
