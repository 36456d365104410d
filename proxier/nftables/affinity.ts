/**
 * The nftables layout's ClientIP affinity: per distinct timeout T, a dynamic map `affinity-T` of
 * pins (client . entry -> endpoint) with its DNAT chain and the chain that records new pins; and the
 * cleanup of pins that lead nowhere valid any more.
 * @module
 */
import type { NFTables } from "../../iptables/nft.ts";
import { NftTransaction } from "../../iptables/nft_transaction.ts";
import type { Logger } from "../runtime/logger.ts";
import type { IPFamily } from "../model/types.ts";
import type { PortUses } from "./dynamic_chains.ts";
import type { ElementBook } from "./element_book.ts";
import { backendsOf } from "./backends.ts";
import {
  AFFINITY_CHECK,
  affinityName,
  affinityRecordChain,
  BACKENDS,
  BACKENDS_CLUSTER,
  TABLE,
} from "./layout.ts";

/**
 * Adds to `tx` the affinity map for timeout `t` (kept if it exists: it holds the clients' pins) and
 * its two chains (flushed and rewritten). The map is declared with explicit types, so its rules can
 * be rewritten while it exists.
 */
export function addAffinity(tx: NftTransaction, t: number): void {
  const { family: fam, addrType: addr } = tx;
  const name = affinityName(t);
  const rec = affinityRecordChain(t);
  tx.addSet(
    "map",
    name,
    `type ${addr} . ${addr} . inet_proto . inet_service : ${addr} . inet_service; flags dynamic,timeout; timeout ${t}s;`,
  );
  tx.addChain(name).flushChain(name).addRule(
    name,
    `meta l4proto { tcp, udp, sctp } th dport != 0 dnat ${fam} to ${fam} saddr . ${fam} daddr . meta l4proto . th dport map @${name}`,
  );
  tx.addChain(rec).flushChain(rec);
  // `P dport != 0` is the protocol dependency `ct original proto-dst` needs; after DNAT the port is
  // the endpoint's, never 0. (`meta l4proto P` would do, but nft prints it in a form it cannot
  // read back.)
  for (const p of ["tcp", "udp", "sctp"]) {
    tx.addRule(
      rec,
      `${p} dport != 0 update @${name} { ${fam} saddr . ct original ${fam} daddr . meta l4proto . ct original proto-dst : ${fam} daddr . ${p} dport }`,
    );
  }
}

/** What {@linkcode dropStalePins} reads. */
export interface PinCleanup {
  readonly family: IPFamily;
  readonly nft: NFTables;
  readonly log: Logger;
  /** The elements the last sync wrote, with the ports claiming them. */
  readonly book: ElementBook;
  /** What each service port uses, its affinity timeout among it. */
  readonly ports: ReadonlyMap<string, PortUses>;
  /** Whether the kernel holds a dynamic name (the affinity map). */
  readonly inKernel: (name: string) => boolean;
}

/**
 * Deletes the pins of the affinity maps of `timeouts` that lead nowhere valid any more (an endpoint
 * removed from the entry, or the entry gone), so a pinned client is balanced afresh instead of sent
 * to a dead endpoint. Each deletion is preceded by an `add` of the same key so that a pin expiring
 * meanwhile cannot fail the transaction. Failures are logged (the pins expire on their own).
 */
export async function dropStalePins(o: PinCleanup, timeouts: ReadonlySet<number>): Promise<void> {
  const { family, nft, log, book } = o;
  for (const timeout of timeouts) {
    const map = affinityName(timeout);
    if (!o.inKernel(map)) continue;
    const valid = new Map<string, Set<string>>();
    for (const [port, uses] of o.ports) {
      if (uses.affinityTimeout !== timeout) continue;
      for (const c of book.claimsOf(port)) {
        if (c.container !== BACKENDS && c.container !== BACKENDS_CLUSTER) continue;
        // A backends claim is the entry's group of endpoints.
        let set = valid.get(c.key);
        if (set === undefined) valid.set(c.key, set = new Set());
        for (const e of backendsOf(c.rest)) set.add(e);
      }
    }
    const stale: string[] = [];
    let pins;
    try {
      pins = await nft.listElements(TABLE, map);
    } catch (e) {
      log.warn("Cannot list affinity pins", { family, map, error: (e as Error).message });
      continue;
    }
    for (const p of pins) {
      const entry = p.key.slice(1).join(" . ");
      const endpoint = p.value.join(" . ");
      const checked = book.effective(AFFINITY_CHECK, entry) !== undefined;
      if (!checked || !valid.get(entry)?.has(endpoint)) stale.push(`${p.key.join(" . ")} : ${endpoint}`);
    }
    if (stale.length === 0) continue;
    const tx = new NftTransaction(family, TABLE);
    for (let i = 0; i < stale.length; i += 500) {
      const chunk = stale.slice(i, i + 500);
      // Re-adding with a short timeout first makes the delete succeed for a pin that expired meanwhile.
      tx.addElements(map, chunk.map((s) => s.replace(" : ", " timeout 1s : ")), 500);
      tx.deleteElements(map, chunk.map((s) => s.slice(0, s.indexOf(" : "))), 500);
    }
    try {
      await nft.apply(tx.text());
      log.debug("Dropped stale affinity pins", { family, map, pins: stale.length });
    } catch (e) {
      log.warn("Cannot drop stale affinity pins", { family, map, error: (e as Error).message });
    }
  }
}
