/**
 * One `nft -f` transaction on one table, written statement by statement: the family and the table
 * are stated once, and the text of every statement is written here (as knftables' `Transaction`),
 * so the code that decides what a table holds adds to a transaction instead of formatting
 * statements. `nft -f` applies the whole text or none of it.
 * @module
 */
import type { IPFamily } from "./ip.ts";

/** A base chain's hook: `{ type T hook H priority P; policy accept; }`. */
export interface NftHook {
  readonly type: "filter" | "nat";
  readonly hook: string;
  /** As written: `dstnat - 10`, `-110`. */
  readonly priority: string;
}

/** A set (keys) or a map (keys to values). */
export type NftSetKind = "set" | "map";

/** Elements of one set or map, to be read once, in order: `count` texts (`key [: value]`). */
export interface NftElementSource {
  readonly container: string;
  readonly count: number;
  readonly texts: Iterable<string>;
}

/** Elements to an `add element` statement, unless a caller says otherwise. */
export const ELEMENTS_PER_STATEMENT = 1000;
const PER_STATEMENT = ELEMENTS_PER_STATEMENT;

/** Statements on one table of one family; see the module doc. */
export class NftTransaction {
  /** The family's word in statements and rules: `ip` or `ip6`. */
  readonly family: "ip" | "ip6";
  /** The family's address type in declarations: `ipv4_addr` or `ipv6_addr`. */
  readonly addrType: "ipv4_addr" | "ipv6_addr";
  readonly #ipFamily: IPFamily;
  readonly #tableName: string;
  readonly #table: string;
  #lines: string[] = [];
  /** Where in {@linkcode #lines} the `add element` statements are (ascending). */
  readonly #added: number[] = [];
  /** The base chains this transaction declares, and where in {@linkcode #lines} their rules are. */
  readonly #hooked = new Set<string>();
  readonly #hookRules: number[] = [];

  /** An empty transaction on `table` of `family`. */
  constructor(family: IPFamily, table: string) {
    this.family = family === "IPv4" ? "ip" : "ip6";
    this.addrType = family === "IPv4" ? "ipv4_addr" : "ipv6_addr";
    this.#ipFamily = family;
    this.#tableName = table;
    this.#table = `${this.family} ${table}`;
  }

  /** The number of statements (comments included). */
  get size(): number {
    return this.#lines.length;
  }

  /** The number of `add element` statements. */
  get addedStatements(): number {
    return this.#added.length;
  }

  /** Returns the transaction as `nft -f` reads it, ending in a newline ("" when empty). */
  text(): string {
    return this.#lines.length === 0 ? "" : this.#lines.join("\n") + "\n";
  }

  /** Returns the statements, one to an element (for `NFTables.apply` without joining them). */
  statements(): readonly string[] {
    return this.#lines;
  }

  /** A comment line (nft skips it; a reader of the transaction sees it). */
  comment(text: string): this {
    this.#lines.push(`# ${text}`);
    return this;
  }

  /** Creates the table (with `comment`, which an existing table keeps as it was) when it does not exist. */
  addTable(comment?: string): this {
    this.#lines.push(`add table ${this.#table}${comment === undefined ? "" : ` { comment "${comment}" ; }`}`);
    return this;
  }

  /** Deletes the table and everything in it, whether it exists or not (`add` first). */
  deleteTable(): this {
    this.#lines.push(`add table ${this.#table}`, `delete table ${this.#table}`);
    return this;
  }

  /** Creates a chain (a base chain on `hook`; with `comment`) when it does not exist. */
  addChain(name: string, hook?: NftHook, comment?: string): this {
    const note = comment === undefined ? "" : ` comment "${comment}" ;`;
    if (hook !== undefined) this.#hooked.add(name);
    this.#lines.push(
      hook === undefined
        ? `add chain ${this.#table} ${name}${note === "" ? "" : ` {${note} }`}`
        : `add chain ${this.#table} ${name} { type ${hook.type} hook ${hook.hook} priority ${hook.priority}; policy accept;${note} }`,
    );
    return this;
  }

  /** Removes every rule of a chain. */
  flushChain(name: string): this {
    this.#lines.push(`flush chain ${this.#table} ${name}`);
    return this;
  }

  /** Deletes a chain (it must not be jumped to), whether it exists or not (`add` first). */
  deleteChain(name: string): this {
    this.#lines.push(`add chain ${this.#table} ${name}`, `delete chain ${this.#table} ${name}`);
    return this;
  }

  /** Creates a set or map declared by `spec` (`type ...; flags ...;`) when it does not exist. */
  addSet(kind: NftSetKind, name: string, spec: string): this {
    this.#lines.push(`add ${kind} ${this.#table} ${name} { ${spec} }`);
    return this;
  }

  /** Creates a set or map anew, empty, whether it exists or not (`add`, `delete`, `add`). */
  recreateSet(kind: NftSetKind, name: string, spec: string): this {
    this.addSet(kind, name, spec);
    this.#lines.push(`delete ${kind} ${this.#table} ${name}`);
    return this.addSet(kind, name, spec);
  }

  /** Removes every element of a set or map. */
  flushSet(kind: NftSetKind, name: string): this {
    this.#lines.push(`flush ${kind} ${this.#table} ${name}`);
    return this;
  }

  /** Deletes a set or map that exists (and that no rule reads). */
  deleteSet(kind: NftSetKind, name: string): this {
    this.#lines.push(`delete ${kind} ${this.#table} ${name}`);
    return this;
  }

  /** Appends a rule to a chain. */
  addRule(chain: string, rule: string): this {
    if (this.#hooked.has(chain)) this.#hookRules.push(this.#lines.length);
    this.#lines.push(`add rule ${this.#table} ${chain} ${rule}`);
    return this;
  }

  /**
   * Adds elements (`key [: value]`, as nft writes them), `perLine` to a statement. `elements` is
   * read once, in order: a generator's texts are garbage as soon as their statement is written.
   */
  addElements(container: string, elements: Iterable<string>, perLine = PER_STATEMENT): this {
    return this.#elements("add", container, elements, perLine);
  }

  /** Deletes elements by key, `perLine` to a statement. */
  deleteElements(container: string, keys: Iterable<string>, perLine = PER_STATEMENT): this {
    return this.#elements("delete", container, keys, perLine);
  }

  /**
   * Splits a transaction that creates its table into three steps applied in order: this one keeps
   * every statement but the `add element` ones and the rules of the base chains it declares;
   * `parts` take the `add element` statements, in order, at most `statements` each; `hooks` takes
   * those rules, in order. Until `hooks` is applied no hook of the table runs a rule, so packets
   * pass it untouched while the elements load; together the steps add what this one would have.
   */
  splitForNewTable(statements: number): { parts: NftTransaction[]; hooks: NftTransaction } {
    const part = () => new NftTransaction(this.#ipFamily, this.#tableName);
    const parts: NftTransaction[] = [];
    for (let i = 0; i < this.#added.length; i += statements) {
      const p = part();
      for (const at of this.#added.slice(i, i + statements)) p.#lines.push(this.#lines[at]);
      parts.push(p);
    }
    const hooks = part();
    for (const at of this.#hookRules) hooks.#lines.push(this.#lines[at]);
    const moved = new Set([...this.#added, ...this.#hookRules]);
    this.#lines = this.#lines.filter((_, i) => !moved.has(i));
    this.#added.length = 0;
    this.#hookRules.length = 0;
    return { parts, hooks };
  }

  /**
   * Forgets every statement written so far (they were applied another way: a new table's layout,
   * loaded before the rest of its sync is built); the base chains declared stay known.
   */
  clear(): this {
    this.#lines = [];
    this.#added.length = 0;
    this.#hookRules.length = 0;
    return this;
  }

  /** Appends `other`'s statements (on the same table), as if they were written here. */
  append(other: NftTransaction): this {
    const offset = this.#lines.length;
    this.#lines.push(...other.#lines);
    this.#added.push(...other.#added.map((at) => at + offset));
    this.#hookRules.push(...other.#hookRules.map((at) => at + offset));
    for (const chain of other.#hooked) this.#hooked.add(chain);
    return this;
  }

  /** Returns how many `add element` statements {@linkcode addElements} makes of `sources`. */
  static statementsOf(sources: readonly NftElementSource[]): number {
    return sources.reduce((n, s) => n + Math.ceil(s.count / PER_STATEMENT), 0);
  }

  /**
   * Yields transactions on this table adding the elements of `sources`, at most `statements`
   * statements each. Each is written as it is asked for, so the texts of every element are never
   * held at once.
   */
  *elementParts(sources: readonly NftElementSource[], statements: number): Generator<NftTransaction> {
    let part = new NftTransaction(this.#ipFamily, this.#tableName);
    for (const s of sources) {
      // A part ends at a statement's end.
      for (const line of chunks(s.texts, PER_STATEMENT)) {
        part.#statement("add", s.container, line);
        if (part.addedStatements < statements) continue;
        yield part;
        part = new NftTransaction(this.#ipFamily, this.#tableName);
      }
    }
    if (part.size > 0) yield part;
  }

  #elements(verb: "add" | "delete", container: string, items: Iterable<string>, perLine: number): this {
    for (const line of chunks(items, perLine)) this.#statement(verb, container, line);
    return this;
  }

  #statement(verb: "add" | "delete", container: string, items: readonly string[]): void {
    if (verb === "add") this.#added.push(this.#lines.length);
    this.#lines.push(`${verb} element ${this.#table} ${container} { ${items.join(", ")} }`);
  }
}

/** Yields `items` in arrays of `n` (the last may be shorter), reading them once, in order. */
function* chunks(items: Iterable<string>, n: number): Generator<string[]> {
  let chunk: string[] = [];
  for (const item of items) {
    chunk.push(item);
    if (chunk.length < n) continue;
    yield chunk;
    chunk = [];
  }
  if (chunk.length > 0) yield chunk;
}
