/**
 * The nftables mode's drift check (`drift.ts`). Cheap, before every partial sync: the layout's marker
 * chain (the table deleted, the ruleset flushed, another layout in it). Thorough, between syncs, one
 * `nft -c` run whose statements the kernel refuses or accepts each on its own: the `sync-generation`
 * element deleted (refused: a transaction nft said it applied that the kernel does not hold, or one
 * another instance wrote), the next window of `service-ips` keys this process wrote deleted (refused:
 * one deleted by hand), and each map a rule must use deleted (accepted: a chain or the table
 * flushed). nft fetches every element of the table to list a chain and of a map to list it, seconds
 * at scale: the check lists nothing, and its window bounds its cost whatever the table holds.
 * @module
 */
import type { NFTables, NftRefusal } from "../../iptables/nft.ts";
import { NftTransaction } from "../../iptables/nft_transaction.ts";
import { foreignLayout, REFERENCED, SERVICE_IPS, SYNC_GENERATION, TABLE } from "./layout.ts";
import { generationElement, otherWriterOf } from "./sync_generation.ts";

/**
 * The `service-ips` keys one thorough check asks about: about 40 ms of nft however large the table
 * (listing 50,000 elements takes nft 2 s); successive checks take the next, so each key comes round.
 */
export const SERVICE_IPS_WINDOW = 5000;

/** What the check reads of the proxier. */
export interface DriftState {
  readonly nft: NFTables;
  /** The last transaction this process applied (0: none yet). */
  readonly generation: number;
  /** Who writes the rules (the running proxy's identity). */
  readonly writer?: string;
  /** The next `count` `service-ips` keys the last sync wrote (`ElementBook.window`). */
  readonly serviceIPKeys: (count: number) => string[];
}

/** Returns what drifted (undefined: nothing found); `signal` stops its nft runs when a sync is asked for. */
export async function nftablesDrift(
  s: DriftState,
  thorough: boolean,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const chains = await s.nft.listChains(TABLE);
  if (chains === undefined) return `the ${TABLE} table is gone (ruleset flushed?)`;
  const foreign = foreignLayout(chains);
  if (foreign !== undefined) return `another writer changed the ${TABLE} table: ${foreign}`;
  if (!thorough) return undefined;
  const tx = new NftTransaction(s.nft.family, TABLE);
  if (s.generation > 0) tx.deleteElements(SYNC_GENERATION, [generationElement(s.generation)]);
  const generationLines = tx.size;
  tx.deleteElements(SERVICE_IPS, s.serviceIPKeys(SERVICE_IPS_WINDOW));
  const keyLines = tx.size;
  for (const [kind, name] of REFERENCED) tx.deleteSet(kind, name);
  const refused = new Map<number, NftRefusal>();
  for (const r of await s.nft.refusals(tx.text(), signal)) refused.set(r.lineNumber, r);
  if (generationLines > 0 && refused.has(1)) {
    const generation = await s.nft.listElements(TABLE, SYNC_GENERATION, signal);
    return otherWriterOf(generation, s.writer) ??
      `the last transaction (${s.generation}) is not in the kernel (nft exited 0 having done nothing?)`;
  }
  for (const [i, [kind, name, chain]] of REFERENCED.entries()) {
    const r = refused.get(keyLines + i + 1);
    if (r === undefined) {
      return `no rule uses ${kind} ${name} any more (chain ${chain} or the table flushed?)`;
    }
    if (!/Device or resource busy/.test(r.message)) return `${kind} ${name}: ${r.message}`;
  }
  for (let line = generationLines + 1; line <= keyLines; line++) {
    const r = refused.get(line);
    if (r !== undefined) {
      return `map ${SERVICE_IPS} lacks ${r.at || "an element"}, which the last sync wrote (${r.message})`;
    }
  }
  return undefined;
}
