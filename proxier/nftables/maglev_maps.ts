/**
 * The nftables mode's Maglev Services (`kube-router.io/service.scheduler: mh`): per service port and
 * traffic class, a chain and a map of the same name,
 * `mh-<class>/<namespace>/<name>[/<port>]/m<M>-s<seed>-<5t|3t>` (the hash's parameters in the
 * name: a table of other parameters is another table, never one rewritten in place). The map holds
 * the lookup table (`loadbalancer/maglev.ts`): slot -> endpoint, M elements. The chain
 * DNATs through it with slot = `jhash` of the source address and port (the source address alone
 * for the 3-tuple) `mod M`, seeded with the cluster-wide seed, so every node given the same
 * endpoints sends a connection to the same one. The map is written whole when it is created and
 * then kept up to date slot by slot: a change of endpoints rewrites only the slots that move.
 * @module
 */
import { maglevLookup } from "../../loadbalancer/maglev.ts";
import type { IPFamily, ServicePortName } from "../model/types.ts";
import { type NftName, seedHex } from "./layout.ts";
import { nftFamily } from "../../iptables/nft.ts";
import type { NftTransaction } from "../../iptables/nft_transaction.ts";

/** The traffic classes a Service port may have a table for (the layout's chains of those names). */
export type MaglevClass = "internal" | "external" | "external-cluster";

/** The prefix of every Maglev chain and map. */
export const MAGLEV_PREFIX = "mh-";

/** The parameters every node must share for its tables to agree. */
export interface MaglevParams {
  /** M: the number of slots, a prime. */
  readonly tableSize: number;
  /** The cluster-wide seed of the tables and of the slot hash. */
  readonly seed: number;
}

/** Returns the chain and map name of `port`'s table for `cls` (`sourcePort`: the 5-tuple). */
export function maglevName(
  cls: MaglevClass,
  port: ServicePortName,
  o: MaglevParams,
  sourcePort: boolean,
): NftName {
  const p = port.port === "" ? "" : `/${port.port}`;
  return `${MAGLEV_PREFIX}${cls}/${port.namespace}/${port.name}${p}/m${o.tableSize}-s${seedHex(o.seed)}-${
    sourcePort ? "5t" : "3t"
  }`;
}

/** A table a service port needs. */
export interface MaglevWant {
  readonly name: NftName;
  /** Its endpoints: `key` (`ip:port`, the name hashed) and `ip . port` as the map holds it. */
  readonly endpoints: ReadonlyArray<{ readonly key: string; readonly value: string }>;
  /** The source port is hashed too (the 5-tuple); else the source address alone (the 3-tuple). */
  readonly sourcePort: boolean;
}

/** What the kernel holds for one table, as this process wrote (or read) it. */
interface Held {
  /** Map values by backend index. */
  readonly values: readonly string[];
  readonly slots: Int32Array;
}

/** Options of {@linkcode MaglevMaps}. */
export interface MaglevMapsOptions extends MaglevParams {
  readonly family: IPFamily;
}

/** One family's Maglev tables: what the kernel holds of each, and the statements that change it. */
export class MaglevMaps {
  readonly #o: MaglevMapsOptions;
  readonly #held = new Map<NftName, Held>();

  /** Knows of no table yet. */
  constructor(o: MaglevMapsOptions) {
    this.#o = o;
  }

  /** The table size M. */
  get tableSize(): number {
    return this.#o.tableSize;
  }

  /** The expression giving a connection's slot (the chain's lookup key). */
  slotExpr(sourcePort: boolean): string {
    const fam = nftFamily(this.#o.family);
    const port = sourcePort ? " . th sport" : "";
    return `jhash ${fam} saddr${port} mod ${this.#o.tableSize} seed 0x${seedHex(this.#o.seed)}`;
  }

  /** Whether the kernel's content of table `name` is known (written or adopted by this process). */
  holds(name: NftName): boolean {
    return this.#held.has(name);
  }

  /**
   * Takes the kernel's listing of table `name` (left by an earlier run) as what it holds, so that
   * only the slots that differ are written; returns false, taking nothing, unless every slot is
   * there.
   */
  adopt(
    name: NftName,
    elements: ReadonlyArray<{ key: readonly string[]; value: readonly string[] }>,
  ): boolean {
    const m = this.#o.tableSize;
    if (elements.length !== m) return false;
    const values: string[] = [];
    const index = new Map<string, number>();
    const slots = new Int32Array(m).fill(-1);
    for (const e of elements) {
      const slot = Number(e.key[0]);
      if (!Number.isInteger(slot) || slot < 0 || slot >= m || slots[slot] >= 0 || e.value.length !== 2) {
        return false;
      }
      const value = e.value.join(" . ");
      let i = index.get(value);
      if (i === undefined) index.set(value, i = values.push(value) - 1);
      slots[slot] = i;
    }
    this.#held.set(name, { values, slots });
    return true;
  }

  /**
   * Adds to `tx` the statements that make the kernel hold `want`: the chain and the whole map when
   * the kernel has no such table known to this process (nft 1.0.6 cannot add a rule reading a
   * `typeof` map that exists, so both are written anew), else the deletes and adds of the slots
   * whose endpoint changed (none when nothing did).
   */
  write(tx: NftTransaction, want: MaglevWant): void {
    const fam = tx.family;
    const m = this.#o.tableSize;
    const byKey = new Map(want.endpoints.map((e) => [e.key, e.value]));
    const lookup = maglevLookup(byKey.keys(), m, this.#o.seed);
    const next: Held = { values: lookup.names.map((k) => byKey.get(k)!), slots: lookup.slots };
    const old = this.#held.get(want.name);
    this.#held.set(want.name, next);
    const slot = (h: Held, i: number) => `${i} : ${h.values[h.slots[i]]}`;
    // Said in the transaction, so `render` shows it (nft skips comment lines).
    const about = `${want.name}: Maglev, ${m} slots over ${next.values.length} endpoint${
      next.values.length === 1 ? "" : "s"
    }, slot = hash of the source address${want.sourcePort ? " and port" : ""}`;
    if (old === undefined) {
      const name = want.name;
      tx.comment(about).addChain(name).flushChain(name)
        .recreateSet("map", name, `typeof numgen random mod 1 : ${fam} daddr . th dport;`)
        .addRule(
          name,
          `meta l4proto { tcp, udp, sctp } th dport != 0 dnat ${fam} to ${
            this.slotExpr(want.sourcePort)
          } map @${name}`,
        )
        .addElements(name, Array.from({ length: m }, (_, i) => slot(next, i)));
      return;
    }
    const moved: number[] = [];
    for (let i = 0; i < m; i++) {
      if (old.values[old.slots[i]] !== next.values[next.slots[i]]) moved.push(i);
    }
    if (moved.length === 0) return;
    tx.comment(`${about}: ${moved.length} slots move`)
      .deleteElements(want.name, moved.map(String))
      .addElements(want.name, moved.map((i) => slot(next, i)));
  }

  /** The endpoint (`ip . port`) of every slot of table `name`, as written; undefined when none. */
  table(name: NftName): string[] | undefined {
    const h = this.#held.get(name);
    return h === undefined ? undefined : Array.from(h.slots, (i) => h.values[i]);
  }

  /** Forgets table `name` (deleted from the kernel). */
  forget(name: NftName): void {
    this.#held.delete(name);
  }

  /** Forgets every table: a full sync writes each anew. */
  clear(): void {
    this.#held.clear();
  }
}
