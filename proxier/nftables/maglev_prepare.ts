/**
 * The Maglev tables' part of a sync. Before a full sync's transaction the kernel's tables are made
 * known, so that the transaction carries only the slots that move: a table an earlier run left is read back (its name
 * carries its M, seed and hash); a new one, which nothing reads yet, is written in transactions of
 * its own, of at most {@linkcode MAGLEV_CHUNK_ELEMENTS} elements (a table is M elements, and nft's
 * memory grows by about 1.4 KiB per element it loads at once: 2.4 GiB for 100 tables of 16,381).
 * @module
 */
import type { NFTables } from "../../iptables/nft.ts";
import { NftTransaction } from "../../iptables/nft_transaction.ts";
import type { IPFamily } from "../model/types.ts";
import type { DynamicChains } from "./dynamic_chains.ts";
import { TABLE } from "./layout.ts";
import type { MaglevMaps, MaglevWant } from "./maglev_maps.ts";

/** The most Maglev elements one transaction of new tables carries (about 90 MiB of nft's memory). */
export const MAGLEV_CHUNK_ELEMENTS = 65_536;

/** What {@linkcode prepareMaglevTables} works on. */
export interface MaglevPreparation {
  readonly family: IPFamily;
  readonly nft: NFTables;
  readonly maglev: MaglevMaps;
  /** Which dynamic names the kernel holds; the new tables are recorded there. */
  readonly dynamic: DynamicChains;
}

/** Reads back or writes each table of `wants` the kernel is not known to hold; see the module doc. */
export async function prepareMaglevTables(
  o: MaglevPreparation,
  wants: readonly MaglevWant[],
  signal: AbortSignal,
): Promise<void> {
  const fresh = () => new NftTransaction(o.family, TABLE).addTable();
  let chunk = fresh();
  let elements = 0;
  const flush = async () => {
    if (elements === 0) return;
    await o.nft.apply(chunk.text(), signal);
    chunk = fresh();
    elements = 0;
  };
  for (const w of wants) {
    if (o.maglev.holds(w.name)) continue;
    if (o.dynamic.inKernel(w.name)) {
      // Left by an earlier run: what it holds. When that is incomplete, the sync's own transaction
      // writes it whole.
      o.maglev.adopt(w.name, await o.nft.listElements(TABLE, w.name));
      continue;
    }
    if (elements + o.maglev.tableSize > MAGLEV_CHUNK_ELEMENTS) await flush();
    o.maglev.write(chunk, w);
    elements += o.maglev.tableSize;
    o.dynamic.created(w.name);
  }
  await flush();
}

/**
 * Adds to `tx` the statements bringing the kernel's tables to `wants` (whole when new, else the
 * slots that move), recording each as held.
 */
export function writeMaglevTables(
  tx: NftTransaction,
  maglev: MaglevMaps,
  dynamic: DynamicChains,
  wants: readonly MaglevWant[],
): void {
  for (const w of wants) {
    maglev.write(tx, w);
    dynamic.created(w.name);
  }
}
