/**
 * A stateful fake of one family's iptables for unit tests: holds tables, chains and rules;
 * `restoreAll` parses real restore input, honours `--noflush` and `-X`, and rejects (leaving the
 * previous state untouched) a jump to a missing chain or the deletion of a referenced chain.
 * @module
 */
import type { IPFamily } from "../ip.ts";
import {
  type Chain,
  type IPTables,
  RestoreError,
  type RestoreInput,
  type RestoreOptions,
  type Table,
} from "../iptables.ts";
import { inputText } from "../executor.ts";
import { jumpTarget, splitArgs } from "./parse.ts";

const BUILTIN: Record<Table, readonly string[]> = {
  nat: ["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"],
  filter: ["INPUT", "FORWARD", "OUTPUT"],
  mangle: ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"],
};

/** Targets that are not chains. */
const TARGETS = new Set([
  "ACCEPT",
  "DROP",
  "RETURN",
  "REJECT",
  "DNAT",
  "SNAT",
  "MASQUERADE",
  "MARK",
  "REDIRECT",
  "LOG",
  "CONNMARK",
  "NOTRACK",
]);

type State = Map<Table, Map<Chain, string[]>>;

/** One stored rule: its chain and its text after `-A CHAIN `. */
export interface FakeRule {
  readonly table: Table;
  readonly chain: Chain;
  readonly rule: string;
}

/** The fake; see the module doc. */
export class FakeIPTables implements IPTables {
  readonly family: IPFamily;
  #state: State = new Map();
  /** Every restore input received, in order (for asserting what a sync wrote). */
  readonly restores: string[] = [];
  /** When set, the next restoreAll fails with this message (after recording the input). */
  failNextRestore?: string;

  /** Starts with the built-in chains of every table, empty. */
  constructor(family: IPFamily = "IPv4") {
    this.family = family;
    for (const t of Object.keys(BUILTIN) as Table[]) {
      this.#state.set(t, new Map(BUILTIN[t].map((c) => [c, []])));
    }
  }

  /** Returns the rules of a chain (text after `-A CHAIN `), or undefined when it does not exist. */
  rules(table: Table, chain: Chain): readonly string[] | undefined {
    return this.#state.get(table)!.get(chain);
  }

  /** Returns the chain names of a table. */
  chains(table: Table): Chain[] {
    return [...this.#state.get(table)!.keys()];
  }

  /** @inheritdoc The fake holds every table from the start. */
  tables(): Promise<ReadonlySet<Table>> {
    return Promise.resolve(new Set(this.#state.keys()));
  }

  /** @inheritdoc */
  save(table: Table): Promise<string> {
    return Promise.resolve(this.saveSync(table));
  }

  /** Renders iptables-save text for one table (no counters, no timestamps). */
  saveSync(table: Table): string {
    const chains = this.#state.get(table)!;
    const lines = [`*${table}`];
    for (const c of chains.keys()) lines.push(`:${c} ${BUILTIN[table].includes(c) ? "ACCEPT" : "-"} [0:0]`);
    for (const [c, rules] of chains) for (const r of rules) lines.push(`-A ${c} ${r}`);
    lines.push("COMMIT");
    return lines.join("\n") + "\n";
  }

  /** @inheritdoc */
  restoreAll(input: RestoreInput, opts: RestoreOptions): Promise<void> {
    const data = inputText(input);
    this.restores.push(data);
    if (this.failNextRestore !== undefined) {
      const msg = this.failNextRestore;
      this.failNextRestore = undefined;
      return Promise.reject(new RestoreError(`iptables-restore exited 1: ${msg}`, 1));
    }
    try {
      this.#state = this.#apply(data, opts.flush);
      return Promise.resolve();
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Parses and applies a restore input on a copy; returns the new state or throws. */
  #apply(data: string, flush: boolean): State {
    const next: State = new Map(
      [...this.#state].map(([t, cs]) => [t, new Map([...cs].map(([c, r]) => [c, [...r]]))]),
    );
    const lines = data.split("\n");
    let table: Table | undefined;
    let chains: Map<Chain, string[]> | undefined;
    const fail = (i: number, why: string): never => {
      throw new RestoreError(`iptables-restore: line ${i + 1} failed: ${why}`, 1, lines[i]);
    };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i].trim();
      if (line === "" || line.startsWith("#")) continue;
      if (line.startsWith("*")) {
        table = line.slice(1) as Table;
        if (!(table in BUILTIN)) fail(i, `unknown table ${table}`);
        chains = next.get(table)!;
        if (flush) {
          for (const c of [...chains.keys()]) {
            if (BUILTIN[table].includes(c)) chains.set(c, []);
            else chains.delete(c);
          }
        }
        continue;
      }
      if (table === undefined || chains === undefined) fail(i, "no table selected");
      if (line === "COMMIT") {
        this.#check(table!, chains!, lines, i);
        table = undefined;
        chains = undefined;
        continue;
      }
      if (line.startsWith(":")) {
        const m = /^:(\S+) (\S+) \[\d+:\d+\]$/.exec(line);
        if (m === null) fail(i, "bad chain line");
        // Declaring a chain creates it or flushes it.
        chains!.set(m![1], []);
        continue;
      }
      let args: string[];
      try {
        args = splitArgs(line);
      } catch (e) {
        fail(i, (e as Error).message);
      }
      const [op, chain, ...rest] = args!;
      if (chain === undefined) fail(i, "missing chain");
      switch (op) {
        case "-A":
        case "-I": {
          const rules = chains!.get(chain);
          if (rules === undefined) fail(i, `chain ${chain} does not exist`);
          const text = renderArgs(rest);
          if (op === "-A") rules!.push(text);
          else rules!.unshift(text);
          break;
        }
        case "-X": {
          if (BUILTIN[table!].includes(chain)) fail(i, `cannot delete built-in chain ${chain}`);
          if (!chains!.has(chain)) fail(i, `chain ${chain} does not exist`);
          for (const [c, rules] of chains!) {
            if (c !== chain && rules.some((r) => jumpTarget(splitArgs(r)) === chain)) {
              fail(i, `chain ${chain} is referenced by ${c}`);
            }
          }
          if (chains!.get(chain)!.length > 0) fail(i, `chain ${chain} is not empty`);
          chains!.delete(chain);
          break;
        }
        case "-F":
          if (!chains!.has(chain)) fail(i, `chain ${chain} does not exist`);
          chains!.set(chain, []);
          break;
        default:
          fail(i, `unsupported command ${op}`);
      }
    }
    if (table !== undefined) throw new RestoreError("iptables-restore: COMMIT expected at end of input", 1);
    return next;
  }

  /** Rejects jumps to chains that do not exist in the table at COMMIT. */
  #check(table: Table, chains: Map<Chain, string[]>, lines: string[], commitLine: number): void {
    for (const [c, rules] of chains) {
      for (const r of rules) {
        const target = jumpTarget(splitArgs(r));
        if (target !== undefined && !TARGETS.has(target) && !chains.has(target)) {
          const idx = lines.findIndex((l) => l.startsWith(`-A ${c} `) && l.includes(target));
          throw new RestoreError(
            `iptables-restore: line ${
              (idx >= 0 ? idx : commitLine) + 1
            } failed: ${table} chain ${c} jumps to missing chain ${target}`,
            1,
            lines[idx >= 0 ? idx : commitLine],
          );
        }
      }
    }
  }

  /** @inheritdoc */
  ensureChain(table: Table, chain: Chain): Promise<boolean> {
    const chains = this.#state.get(table)!;
    if (chains.has(chain)) return Promise.resolve(true);
    chains.set(chain, []);
    return Promise.resolve(false);
  }

  /** @inheritdoc */
  chainExists(table: Table, chain: Chain): Promise<boolean> {
    return Promise.resolve(this.#state.get(table)!.has(chain));
  }

  /** @inheritdoc */
  existingChains(table: Table, chains: readonly Chain[]): Promise<Chain[]> {
    const held = this.#state.get(table);
    return Promise.resolve(held === undefined ? [] : chains.filter((c) => held.has(c)));
  }

  /** @inheritdoc */
  listRules(table: Table, chain: Chain): Promise<string[] | undefined> {
    const rules = this.#state.get(table)!.get(chain);
    return Promise.resolve(rules?.map((r) => `-A ${chain} ${r}`));
  }

  /** Flushes every chain of `table`, as `iptables -t table -F` does (the chains stay). */
  flushTable(table: Table): void {
    for (const rules of this.#state.get(table)!.values()) rules.length = 0;
  }

  /** @inheritdoc */
  ensureRule(
    pos: "append" | "prepend",
    table: Table,
    chain: Chain,
    args: readonly string[],
  ): Promise<boolean> {
    const rules = this.#state.get(table)!.get(chain);
    if (rules === undefined) return Promise.reject(new Error(`iptables: chain ${chain} does not exist`));
    const target = jumpTarget(args);
    if (target !== undefined && !TARGETS.has(target) && !this.#state.get(table)!.has(target)) {
      return Promise.reject(new Error(`iptables: chain ${target} does not exist`));
    }
    const text = renderArgs(args);
    if (rules.includes(text)) return Promise.resolve(true);
    if (pos === "append") rules.push(text);
    else rules.unshift(text);
    return Promise.resolve(false);
  }

  /** @inheritdoc */
  deleteRule(table: Table, chain: Chain, args: readonly string[]): Promise<void> {
    const rules = this.#state.get(table)!.get(chain);
    const i = rules?.indexOf(renderArgs(args)) ?? -1;
    if (i >= 0) rules!.splice(i, 1);
    return Promise.resolve();
  }

  /** @inheritdoc */
  deleteChain(table: Table, chain: Chain): Promise<void> {
    const chains = this.#state.get(table)!;
    for (const [c, rules] of chains) {
      if (rules.some((r) => jumpTarget(splitArgs(r)) === chain)) {
        return Promise.reject(new Error(`iptables: chain ${chain} is referenced by ${c}`));
      }
    }
    chains.delete(chain);
    return Promise.resolve();
  }

  /** Drops a chain and every rule jumping to it, as an administrator flushing the tables would. */
  removeChainForTest(table: Table, chain: Chain): void {
    const chains = this.#state.get(table)!;
    chains.delete(chain);
    for (const [c, rules] of chains) chains.set(c, rules.filter((r) => jumpTarget(splitArgs(r)) !== chain));
  }
}

/** Renders arguments back to rule text as iptables-save does: comments always quoted. */
export function renderArgs(args: readonly string[]): string {
  return args.map((a, i) =>
    a === "" || /[\s"]/.test(a) || args[i - 1] === "--comment" ? `"${a.replaceAll('"', '\\"')}"` : a
  ).join(" ");
}
