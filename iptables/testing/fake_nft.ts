/**
 * A stateful fake of `nft` over {@linkcode NftRuleset} (the same rules the kernel applies to a
 * transaction): records every transaction and can be told to fail the next one.
 * @module
 */
import type { IPFamily } from "../ip.ts";
import { type NFTables, type NftElement, NftError, type NftScript, scriptText } from "../nft.ts";
import { type NftChain, NftRuleset, type NftSet, type NftTable } from "../nft_ruleset.ts";

export { formatSeconds, splitTop } from "../nft_syntax.ts";
export { normalizeListing } from "../nft_listing.ts";
/** A chain of the fake's tables. */
export type FakeChain = NftChain;
/** A set or map of the fake's tables. */
export type FakeSet = NftSet;
/** One table of the fake. */
export type FakeTable = NftTable;

/** The fake; one instance holds every family, as the kernel does. */
export class FakeNft {
  readonly #ruleset = new NftRuleset();
  /** Every transaction applied (or attempted), in order. */
  readonly transactions: string[] = [];
  /** When set, the next transaction fails with this stderr and changes nothing. */
  failNext?: string;

  /** Returns the NFTables view of one family. */
  forFamily(family: IPFamily): NFTables {
    return {
      family,
      apply: (script) => this.apply(script),
      check: (script) => this.#run(script, false),
      refusals: (script) => Promise.resolve(this.#ruleset.refusals(script)),
      listChains: (table) => Promise.resolve(this.#ruleset.chainInfos(family, table)),
      listElements: (table, name) => Promise.resolve(this.listElements(family, table, name)),
      countRules: (table, chain) =>
        Promise.resolve(this.table(family, table)?.chains.get(chain)?.rules.length),
    };
  }

  /** Applies a transaction, all or nothing. @throws {NftError} naming the failing line. */
  apply(input: NftScript): Promise<void> {
    const script = scriptText(input);
    this.transactions.push(script);
    if (this.failNext !== undefined) {
      const msg = this.failNext;
      this.failNext = undefined;
      return Promise.reject(new NftError(`nft -f - exited 1: ${msg}`, 1));
    }
    return this.#run(script, true);
  }

  #run(script: string, commit: boolean): Promise<void> {
    try {
      this.#ruleset.apply(script, commit);
      return Promise.resolve();
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** The table's state (undefined when absent), for tracers and tests. */
  table(family: IPFamily, table: string): FakeTable | undefined {
    return this.#ruleset.table(family, table);
  }

  /** Names of `table`'s chains, or undefined when the table does not exist. */
  listChains(family: IPFamily, table: string): string[] | undefined {
    return this.#ruleset.listChains(family, table);
  }

  /** Elements of a set or map as `nft -j` reports them; empty when absent. */
  listElements(family: IPFamily, table: string, name: string): NftElement[] {
    return this.#ruleset.listElements(family, table, name);
  }

  /** Deletes every table, as `nft flush ruleset` does. */
  flushRuleset(): void {
    this.#ruleset.flush();
  }

  /** Prints the table as `nft list table` does, elements sorted. */
  listTable(family: IPFamily, table: string): string {
    return this.#ruleset.listTable(family, table);
  }
}
