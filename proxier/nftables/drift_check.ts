/**
 * The nftables mode's drift check (`drift.ts`). Cheap, before every partial sync: the layout's marker
 * chain (the table deleted, the ruleset flushed, another layout in it). Thorough, between syncs: the
 * `sync-generation` element (a transaction nft said it applied that the kernel does not hold, or one
 * another instance wrote), a kernel check per map that a rule still uses it (a chain or the table
 * flushed), and, paced, the number of `service-ips` elements (one deleted by hand). nft fetches
 * every element of the table to list a chain and of a map to list it, seconds at scale: none of
 * the checks but the paced count lists more than one element.
 * @module
 */
import { isReferenced, type NFTables } from "../../iptables/nft.ts";
import type { Paced } from "../drift.ts";
import { foreignLayout, REFERENCED, SERVICE_IPS, SYNC_GENERATION, TABLE } from "./layout.ts";
import { otherWriterOf } from "./sync_generation.ts";

/** The element count runs at most once per this many times its duration: 1% of a core. */
export const ELEMENT_COUNT_PACE = 100;

/** What the check reads of the proxier. */
export interface DriftState {
  readonly nft: NFTables;
  /** The last transaction this process applied (0: none yet). */
  readonly generation: number;
  /** Who writes the rules (the running proxy's identity). */
  readonly writer?: string;
  /** How many `service-ips` elements the last sync wrote. */
  readonly serviceIPs: () => number;
  readonly countDue: Paced;
  readonly now: () => number;
}

/** Returns what drifted (undefined: nothing found); `signal` stops a listing when a sync is asked for. */
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
  const generation = await s.nft.listElements(TABLE, SYNC_GENERATION, signal);
  if (s.generation > 0 && (generation.length !== 1 || Number(generation[0].key[0]) !== s.generation)) {
    return otherWriterOf(generation, s.writer) ??
      `the last transaction (${s.generation}) is not in the kernel (nft exited 0 having done nothing?)`;
  }
  for (const [kind, name, chain] of REFERENCED) {
    if (!await isReferenced(s.nft, TABLE, kind, name)) {
      return `no rule uses ${kind} ${name} any more (chain ${chain} or the table flushed?)`;
    }
  }
  if (!s.countDue.due(s.now())) return undefined;
  const start = s.now();
  const held = (await s.nft.listElements(TABLE, SERVICE_IPS, signal)).length;
  s.countDue.ran(start, s.now());
  const written = s.serviceIPs();
  return held === written
    ? undefined
    : `map ${SERVICE_IPS} holds ${held} elements; the last sync wrote ${written}`;
}
