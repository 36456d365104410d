/**
 * An nftables ruleset as text describes it: the statements the nftables mode writes (tables,
 * chains base and regular, rules, sets and maps with `type` or `typeof`, flags, timeouts, and their
 * elements), applied as the kernel applies a transaction: all or nothing, rejecting a jump or goto
 * to a missing chain (in a rule or a map element), a reference to a missing set, the deletion of a
 * chain or set still referenced (a chain's own rules do not hold it), adding a map key that exists
 * with another value, and deleting a missing element. `listTable` prints what `nft list table`
 * prints (elements sorted, one a line). The model behind the nftables tracer (rendered transactions) and the
 * tests' fake `nft`.
 * @module
 */
import type { IPFamily } from "./ip.ts";
import { type NftChainInfo, type NftElement, NftError, nftFamily } from "./nft.ts";
import { parseBaseHook } from "./nft_priority.ts";
import type { NftRefusal } from "./nft.ts";
import { formatSeconds, parseElement, parseSeconds, setRefs, splitTop, targets } from "./nft_syntax.ts";

/** A chain: base chain properties (`type filter hook input priority -110`) and rules. */
export interface NftChain {
  readonly base?: string;
  /** Its comment, as created (an existing chain keeps its own). */
  readonly comment?: string;
  rules: string[];
}

/** A set or map: its declaration lines and elements (key -> value text, "" for sets). */
export interface NftSet {
  readonly kind: "set" | "map";
  /** The declaration between the braces, split on `;` and trimmed. */
  readonly decl: readonly string[];
  /** Elements by key: the value, a comment, and (a dynamic set's, as listed) seconds until it expires. */
  readonly elements: Map<string, { value: string; comment?: string; expires?: number }>;
  /**
   * It existed before the transaction being applied. nft 1.0.6 cannot add a rule reading such a
   * map when it is declared with `typeof` (it rebuilds the key's expressions from the kernel
   * without their protocol context: "conflicting protocols specified"); the fake refuses it too.
   */
  readonly fromKernel?: boolean;
}

/** One table's state. */
export interface NftTable {
  readonly chains: Map<string, NftChain>;
  readonly sets: Map<string, NftSet>;
  /** Its comment, as created (an existing table keeps its own). */
  readonly comment?: string;
}

type State = Map<string, NftTable>; // "ip kube-proxy" -> table

function clone(s: State): State {
  const out: State = new Map();
  for (const [k, t] of s) {
    out.set(k, {
      ...(t.comment === undefined ? {} : { comment: t.comment }),
      chains: new Map([...t.chains].map(([n, c]) => [n, { ...c, rules: [...c.rules] }])),
      sets: new Map(
        [...t.sets].map((
          [n, x],
        ) => [n, { kind: x.kind, decl: x.decl, elements: new Map(x.elements), fromKernel: true }]),
      ),
    });
  }
  return out;
}

/**
 * Checks that `add chain NAME { want }` may meet the chain as it is, as the kernel does: the same
 * hook at the same priority (by number: `dstnat - 10` is `-110`) is a no-op; another priority or
 * hook, or a hook on a regular chain, is refused (EOPNOTSUPP), another type too (EEXIST).
 */
function sameHook(name: string, held: string | undefined, want: string): void {
  const a = held === undefined ? undefined : parseBaseHook(held);
  const b = parseBaseHook(want);
  if (a === undefined || b === undefined || a.hook !== b.hook || a.priority !== b.priority) {
    throw new Error(`Could not process rule: Operation not supported: chain ${name} { ${want} }`);
  }
  if (a.type !== b.type) throw new Error(`Could not process rule: File exists: chain ${name} { ${want} }`);
}

/** A statement refused over one part of it (`at`: what nft points at, as a name or an element). */
class Refused extends Error {
  constructor(message: string, readonly at: string) {
    super(message);
  }
}

/** Every table of every family, as the kernel holds them. */
export class NftRuleset {
  #state: State = new Map();

  /**
   * Applies a transaction, all or nothing; with `commit` false only checks it (`nft -c`).
   * @throws {NftError} naming the failing line.
   */
  apply(script: string, commit = true): void {
    const next = this.#run(script);
    if (commit) this.#state = next;
  }

  /** Checks a transaction as `nft -c` does: every refused statement, with its message. */
  refusals(script: string): NftRefusal[] {
    const out: NftRefusal[] = [];
    this.#run(script, (r) => out.push(r));
    return out;
  }

  /** Runs `script` on a copy; the first refusal throws, unless `refused` takes each (as the kernel goes on). */
  #run(script: string, refused?: (r: NftRefusal) => void): State {
    let next = clone(this.#state);
    const lines = script.split("\n");
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i].trim();
      if (line === "" || line.startsWith("#")) continue;
      // A statement refused part-way leaves nothing behind; the next sees what those before it did.
      const trial = refused === undefined ? next : clone(next);
      try {
        this.#statement(trial, line);
        next = trial;
      } catch (e) {
        const message = (e as Error).message;
        const error = `nft -f - exited 1: /dev/stdin:${i + 1}:1: Error: ${message}`;
        if (refused === undefined) throw new NftError(error, 1, lines[i], i + 1);
        refused({ lineNumber: i + 1, line: lines[i], message, at: e instanceof Refused ? e.at : "" });
      }
    }
    return next;
  }

  #statement(s: State, line: string): void {
    const m = /^(add|delete|flush) (table|chain|rule|set|map|element) (ip6?|inet) (\S+)(?: (\S+))?(?: (.*))?$/
      .exec(line);
    if (m === null) throw new Error(`syntax error: ${line}`);
    const [, verb, what, fam, tableName, name, rest] = m;
    const tk = `${fam} ${tableName}`;
    if (what === "table") {
      if (verb === "add") {
        const comment = / comment "([^"]*)"/.exec(line)?.[1];
        if (!s.has(tk)) {
          s.set(tk, { chains: new Map(), sets: new Map(), ...(comment === undefined ? {} : { comment }) });
        }
      } else if (verb === "delete") {
        if (!s.delete(tk)) throw new Error(`No such file or directory: table ${tk}`);
      } else if (verb === "flush") {
        // As `nft flush table`: every chain's rules go; chains, sets and maps stay.
        const t = s.get(tk);
        if (t === undefined) throw new Error(`No such file or directory: table ${tk}`);
        for (const c of t.chains.values()) c.rules = [];
      } else throw new Error(`unsupported: ${line}`);
      return;
    }
    const t = s.get(tk);
    if (t === undefined) throw new Error(`No such file or directory: table ${tk}`);
    if (name === undefined) throw new Error(`syntax error: ${line}`);
    switch (what) {
      case "chain":
        return this.#chain(t, verb, name, rest);
      case "rule": {
        const c = t.chains.get(name);
        if (c === undefined) throw new Error(`No such file or directory: chain ${name}`);
        if (verb !== "add" || rest === undefined) throw new Error(`unsupported: ${line}`);
        for (const target of targets(rest)) {
          if (!t.chains.has(target)) {
            throw new Error(`Could not process rule: No such file or directory: ${target}`);
          }
        }
        for (const ref of setRefs(rest)) {
          const set = t.sets.get(ref);
          if (set === undefined) {
            throw new Error(`Could not process rule: No such file or directory: @${ref}`);
          }
          if (set.fromKernel === true && set.decl.some((d) => d.startsWith("typeof "))) {
            throw new Error(
              `conflicting protocols specified (rule reads typeof map @${ref} from the kernel)`,
            );
          }
        }
        c.rules.push(rest.trim());
        return;
      }
      case "set":
      case "map":
        return this.#set(t, what, verb, name, rest);
      case "element":
        return this.#element(t, verb, name, rest);
    }
  }

  #chain(t: NftTable, verb: string, name: string, rest: string | undefined): void {
    const c = t.chains.get(name);
    if (verb === "add") {
      const spec = rest === undefined ? undefined : /^\{\s*(.*?)\s*\}$/.exec(rest)?.[1];
      if (rest !== undefined && spec === undefined) throw new Error(`syntax error: chain ${name} ${rest}`);
      // `{ type ... hook ... priority ...; policy ...; comment "..." ; }`: a comment alone is a
      // regular chain's.
      const parts = spec === undefined
        ? []
        : splitTop(spec, ";").map((p) => p.trim()).filter((p) => p !== "");
      const comment = parts.map((p) => /^comment "([^"]*)"$/.exec(p)?.[1]).find((x) => x !== undefined);
      const hooked = parts.filter((p) => !p.startsWith("comment "));
      const base = hooked.length === 0 ? undefined : `${hooked.join("; ")};`;
      if (c === undefined) {
        t.chains.set(name, { base, rules: [], ...(comment === undefined ? {} : { comment }) });
      } else if (base !== undefined) sameHook(name, c.base, base);
    } else if (verb === "flush") {
      if (c === undefined) throw new Error(`No such file or directory: chain ${name}`);
      c.rules = [];
    } else {
      if (c === undefined) throw new Error(`No such file or directory: chain ${name}`);
      for (const [other, oc] of t.chains) {
        if (other !== name && oc.rules.some((r) => targets(r).includes(name))) {
          throw new Error(`Device or resource busy: chain ${name} is referenced by chain ${other}`);
        }
      }
      for (const [setName, set] of t.sets) {
        for (const e of set.elements.values()) {
          if (targets(e.value).includes(name)) {
            throw new Error(`Device or resource busy: chain ${name} is referenced by map ${setName}`);
          }
        }
      }
      t.chains.delete(name);
    }
  }

  #set(t: NftTable, kind: "set" | "map", verb: string, name: string, rest: string | undefined): void {
    const cur = t.sets.get(name);
    if (verb === "add") {
      const body = rest === undefined ? undefined : /^\{\s*(.*?)\s*\}$/.exec(rest)?.[1];
      if (body === undefined) throw new Error(`syntax error: ${kind} ${name} needs a declaration`);
      const decl = splitTop(body, ";");
      if (!decl.some((d) => d.startsWith("type ") || d.startsWith("typeof "))) {
        throw new Error(`syntax error: ${kind} ${name} has no type`);
      }
      if (kind === "map" && !decl[0].includes(" : ")) {
        throw new Error(`syntax error: map ${name} needs a value type`);
      }
      if (cur === undefined) t.sets.set(name, { kind, decl, elements: new Map() });
      else if (cur.kind !== kind || cur.decl.join(";") !== decl.join(";")) {
        throw new Error(`File exists: ${kind} ${name} exists with another declaration`);
      }
      return;
    }
    if (cur === undefined || cur.kind !== kind) throw new Error(`No such file or directory: ${kind} ${name}`);
    if (verb === "flush") {
      cur.elements.clear();
      return;
    }
    for (const [chainName, c] of t.chains) {
      if (c.rules.some((r) => setRefs(r).includes(name))) {
        throw new Refused(
          `Device or resource busy: ${kind} ${name} is referenced by chain ${chainName}`,
          name,
        );
      }
    }
    t.sets.delete(name);
  }

  #element(t: NftTable, verb: string, name: string, rest: string | undefined): void {
    const set = t.sets.get(name);
    if (set === undefined) throw new Error(`No such file or directory: set ${name}`);
    const body = rest === undefined ? undefined : /^\{\s*(.*?)\s*\}$/.exec(rest)?.[1];
    if (body === undefined) throw new Error(`syntax error: element list of ${name}`);
    for (const item of splitTop(body, ",")) {
      const e = parseElement(item);
      if (verb === "add") {
        if (set.kind === "map" && e.value === "") {
          throw new Error(`syntax error: map ${name} element ${e.key} needs a value`);
        }
        for (const target of targets(e.value)) {
          if (!t.chains.has(target)) {
            throw new Error(`Could not process rule: No such file or directory: ${target}`);
          }
        }
        const old = set.elements.get(e.key);
        if (old !== undefined && old.value !== e.value) {
          throw new Error(`Could not process rule: File exists: ${name} ${e.key}`);
        }
        set.elements.set(e.key, {
          value: e.value,
          comment: e.comment ?? old?.comment,
          ...(e.expires === undefined ? {} : { expires: e.expires }),
        });
      } else if (verb === "delete") {
        if (!set.elements.delete(e.key)) {
          throw new Refused(`Could not process rule: No such file or directory: ${name} ${e.key}`, e.key);
        }
      } else throw new Error(`unsupported: ${verb} element`);
    }
  }

  /** The table's state (undefined when absent), for tracers and tests. */
  table(family: IPFamily, table: string): NftTable | undefined {
    return this.#state.get(`${nftFamily(family)} ${table}`);
  }

  /** Names of `table`'s chains, or undefined when the table does not exist. */
  listChains(family: IPFamily, table: string): string[] | undefined {
    const t = this.table(family, table);
    return t === undefined ? undefined : [...t.chains.keys()];
  }

  /** `table`'s chains as `nft -j list chains` reports them, or undefined when it has none. */
  chainInfos(family: IPFamily, table: string): NftChainInfo[] | undefined {
    const t = this.table(family, table);
    if (t === undefined || t.chains.size === 0) return undefined;
    return [...t.chains].map(([name, c]) => ({
      name,
      base: c.base === undefined ? undefined : parseBaseHook(c.base),
    }));
  }

  /** Elements of a set or map as `nft -j` reports them; empty when absent. */
  listElements(family: IPFamily, table: string, name: string): NftElement[] {
    const set = this.table(family, table)?.sets.get(name);
    if (set === undefined) return [];
    return [...set.elements].map(([k, v]) => ({
      key: k.split(" . "),
      value: v.value === "" ? [] : v.value.split(" . "),
      ...(v.comment === undefined ? {} : { comment: v.comment }),
    }));
  }

  /** Deletes every table, as `nft flush ruleset` does. */
  flush(): void {
    this.#state = new Map();
  }

  /** Prints the table as `nft list table` does, elements sorted. */
  listTable(family: IPFamily, table: string): string {
    const t = this.table(family, table);
    if (t === undefined) throw new Error(`No such file or directory: table ${table}`);
    const out = [`table ${nftFamily(family)} ${table} {`];
    if (t.comment !== undefined) out.push(`\tcomment "${t.comment}"`);
    const blocks: string[][] = [];
    for (const [name, set] of t.sets) {
      const b = [`\t${set.kind} ${name} {`];
      const dynamic = set.decl.some((d) => d.startsWith("flags") && d.includes("dynamic"));
      for (const d of set.decl) {
        if (d.startsWith("timeout ")) continue;
        if (d.startsWith("flags") && dynamic) b.push("\t\tsize 65535");
        b.push(`\t\t${d}`);
      }
      const timeout = set.decl.find((d) => d.startsWith("timeout "));
      if (timeout) b.push(`\t\ttimeout ${formatSeconds(parseSeconds(timeout.slice(8)))}`);
      const elems = [...set.elements].map(([k, v]) =>
        `${k}${v.comment === undefined ? "" : ` comment "${v.comment}"`}${
          v.value === "" ? "" : ` : ${v.value}`
        }`
      ).sort();
      // As nft prints a set: one element after another over as many lines as it takes.
      if (elems.length > 0) b.push(`\t\telements = { ${elems.join(",\n\t\t\t     ")} }`);
      b.push("\t}");
      blocks.push(b);
    }
    for (const [name, c] of t.chains) {
      const b = [`\tchain ${name} {`];
      if (c.base !== undefined) b.push(`\t\t${c.base}`);
      if (c.comment !== undefined) b.push(`\t\tcomment "${c.comment}"`);
      for (const r of c.rules) b.push(`\t\t${r}`);
      b.push("\t}");
      blocks.push(b);
    }
    out.push(blocks.map((b) => b.join("\n")).join("\n\n"));
    out.push("}");
    return out.join("\n") + "\n";
  }
}
