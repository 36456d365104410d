/**
 * The lifecycle of the layout's dynamic names: an lb chain per distinct endpoint count and pick
 * (`backends.ts`), an `affinity-T` map (with its chains) per distinct ClientIP timeout, and a
 * Maglev chain and map per table (`maglev_maps.ts`). Each exists while some service port uses it
 * (the precreated lb chains always); one no port uses is deleted once it has been unused for
 * {@linkcode STALE_DELAY_MS}, in a transaction of its own.
 * @module
 */
import type { NFTables } from "../../iptables/nft.ts";
import { NftTransaction } from "../../iptables/nft_transaction.ts";
import { RefCounts } from "../_common/ref_counts.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import type { IPFamily } from "../model/types.ts";
import { isPrecreated, type LbChain, lbChainName, parseLbChain, PRECREATED_LB_COUNTS } from "./backends.ts";
import {
  affinityName,
  affinityRecordChain,
  affinityTimeout,
  DYNAMIC_CHAIN,
  type NftName,
  TABLE,
} from "./layout.ts";
import { MAGLEV_PREFIX } from "./maglev_maps.ts";
import type { PortElements } from "./port_elements.ts";

/**
 * How long a dynamic chain must have been unused before it is deleted: kernels before 6.2 may
 * still count a reference from a map element deleted in the previous transaction.
 */
export const STALE_DELAY_MS = 1000;

/** What a port's elements use beyond the element book: the dynamic names they jump to, their affinity timeout. */
export interface PortUses {
  readonly chains: readonly NftName[];
  readonly affinityTimeout: number;
}

/**
 * The uses of one chain and no affinity (most ports': `lb-1`), by chain, each frozen and shared by
 * every port with them: a port's uses are kept until it changes. At most {@linkcode SHARED_USES_MAX}.
 */
const SHARED_USES = new Map<NftName, PortUses>();
const SHARED_USES_MAX = 256;

/** Returns what `pe` uses beyond its elements (kept per port in place of them; never to be changed). */
export function portUses(pe: PortElements): PortUses {
  const chains = [
    ...pe.lbChains.map(lbChainName),
    ...pe.maglev.map((w) => w.name),
    ...(pe.affinityTimeout > 0 ? [affinityName(pe.affinityTimeout)] : []),
  ];
  if (chains.length !== 1 || pe.affinityTimeout !== 0) return { chains, affinityTimeout: pe.affinityTimeout };
  let uses = SHARED_USES.get(chains[0]);
  if (uses === undefined) {
    uses = Object.freeze({ chains: Object.freeze(chains), affinityTimeout: 0 });
    if (SHARED_USES.size < SHARED_USES_MAX) SHARED_USES.set(chains[0], uses);
  }
  return uses;
}

/** Options of {@linkcode DynamicChains}. */
export interface DynamicChainsOptions {
  readonly family: IPFamily;
  readonly nft: NFTables;
  readonly clock: Clock;
  readonly log: Logger;
  /** `kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total`. */
  readonly cleanupFailures: { inc(): void };
}

/** One family's dynamic names: which ports use each, which the kernel holds, which are stale. */
export class DynamicChains {
  /** Dynamic name -> the service ports using it. */
  readonly #uses = new RefCounts<NftName>();
  /** Dynamic names the kernel holds, as far as the last successful sync knows. */
  #inKernel = new Set<NftName>();
  /** Dynamic names unused since the given time. */
  readonly #stale = new Map<NftName, number>();
  readonly #o: DynamicChainsOptions;

  /** Knows of no name yet; the first full sync reads the kernel's ({@linkcode resetFromKernel}). */
  constructor(o: DynamicChainsOptions) {
    this.#o = o;
  }

  /**
   * A full sync starts over: no port uses anything yet, and the kernel holds the dynamic names of
   * `existing` (the table's chains, when the table is ours; `affinity-record-T` chains go with their
   * `affinity-T`, which alone is tracked).
   */
  resetFromKernel(existing: readonly string[]): void {
    this.#uses.clear();
    this.#inKernel = new Set(
      existing.filter((n) => DYNAMIC_CHAIN.test(n) && !n.startsWith("affinity-record-")),
    );
  }

  /** Adds (+1) or removes (-1) a port's uses; notes in `began` the names whose use began. */
  count(uses: PortUses, delta: 1 | -1, began: Set<NftName>): void {
    for (const n of uses.chains) {
      if (delta < 0) this.#uses.remove(n);
      else if (this.#uses.add(n)) began.add(n);
    }
  }

  /** The affinity maps some port uses, sorted. */
  affinityInUse(): NftName[] {
    return [...this.#uses.keys()].filter((n) => n.startsWith("affinity-")).sort();
  }

  /**
   * The lb chains a rebuild of that backends map writes: the precreated ones, those some port uses,
   * and `extra`; the default's first, each pick's by endpoint count.
   */
  lbChains(cluster: boolean, extra: Iterable<NftName> = []): LbChain[] {
    const names = new Set(PRECREATED_LB_COUNTS.map((n) => lbChainName({ algorithm: "random", n, cluster })));
    for (const name of [...this.#uses.keys(), ...extra]) {
      if (parseLbChain(name)?.cluster === cluster) names.add(name);
    }
    const order = (c: LbChain) => c.algorithm === "random" ? "" : c.algorithm;
    return [...names].map((n) => parseLbChain(n)!).sort((a, b) =>
      order(a) < order(b) ? -1 : order(a) > order(b) ? 1 : a.n - b.n
    );
  }

  /** Dynamic names in the kernel that read `@backends` (`@backends-cluster` with `cluster`). */
  lbInKernel(cluster: boolean): NftName[] {
    return [...this.#inKernel].filter((n) => parseLbChain(n)?.cluster === cluster);
  }

  /** Whether the kernel holds `name` (as far as the last successful sync knows). */
  inKernel(name: NftName): boolean {
    return this.#inKernel.has(name);
  }

  /** Notes that the transaction being built creates `name`. */
  created(name: NftName): void {
    this.#inKernel.add(name);
  }

  /** The affinity maps the kernel holds that no port uses (emptied by a full sync, deleted once stale). */
  unusedAffinity(): NftName[] {
    return [...this.#inKernel].filter((n) => !this.#needed(n) && n.startsWith("affinity-"));
  }

  /** Whether `name` must stay: used by a port, or a precreated lb chain. */
  #needed(name: NftName): boolean {
    return this.#uses.has(name) || isPrecreated(name);
  }

  /**
   * After a sync: notes the names no port needs now (names needed again are no longer stale).
   * Returns in how many ms the first of them may be deleted, or undefined when none waits (a name
   * whose deletion failed is retried by the next sync, whenever it comes).
   */
  markStale(): number | undefined {
    const now = this.#o.clock.now();
    let next: number | undefined;
    for (const name of this.#inKernel) {
      if (this.#needed(name)) this.#stale.delete(name);
      else if (!this.#stale.has(name)) this.#stale.set(name, now);
      const at = this.#stale.get(name);
      if (at !== undefined && at + STALE_DELAY_MS > now) {
        next = Math.min(next ?? Infinity, at + STALE_DELAY_MS - now);
      }
    }
    return next;
  }

  /**
   * Before a sync: deletes the names unused for {@linkcode STALE_DELAY_MS} in their own transaction;
   * returns those deleted. A failure is counted and logged; they are tried again before the next sync.
   */
  async deleteStale(): Promise<NftName[]> {
    const { family, nft, clock, log } = this.#o;
    const due = [...this.#stale].filter(([n, at]) => !this.#uses.has(n) && clock.now() - at >= STALE_DELAY_MS)
      .map(([n]) => n);
    if (due.length === 0) return [];
    const tx = new NftTransaction(family, TABLE);
    for (const name of due) {
      // A chain is deleted with its rules; the map of the same name once nothing reads it.
      const withMap = name.startsWith("affinity-") || name.startsWith(MAGLEV_PREFIX);
      if (name.startsWith("affinity-")) {
        tx.deleteChain(affinityRecordChain(affinityTimeout(name)));
      }
      tx.deleteChain(name);
      if (withMap) tx.deleteSet("map", name);
    }
    try {
      await nft.apply(tx.text());
      for (const n of due) {
        this.#stale.delete(n);
        this.#inKernel.delete(n);
      }
      log.debug("Deleted unused nftables chains", { family, chains: due.length });
      return due;
    } catch (e) {
      this.#o.cleanupFailures.inc();
      log.warn("Cannot delete unused nftables chains; will retry", { family, error: (e as Error).message });
      return [];
    }
  }
}
