/**
 * Reading what `nft list table` / `nft list ruleset` print: the statements that recreate a listing's
 * tables (so a listing loads into an `NftRuleset` as a transaction does), and a form of a
 * listing that compares equal whatever order nft printed the elements in.
 * @module
 */
import { splitTop } from "./nft_syntax.ts";

/**
 * Normalizes an `nft list table` text for comparison: every `elements = { ... }` block (which nft
 * wraps and orders by hash) becomes one sorted line.
 */
export function normalizeListing(text: string): string {
  return text.replace(/elements = \{([^}]*)\}/g, (_, body: string) => {
    const items = splitTop(body.replace(/\s+/g, " "), ",").map((x) => x.replace(/ expires \S+/, "")).sort();
    return `elements = { ${items.join(", ")} }`;
  });
}

/**
 * Returns the statements that recreate the tables of an `nft list table` / `nft list ruleset`
 * output: tables, every chain (base chains with their hook), every set and map, then the rules, then
 * the elements (map values jump to chains a listing may print later). Lines it does not know
 * (table comments, flags) are left out.
 * @throws {Error} naming the line, for text that is not a listing.
 */
export function listingStatements(text: string): string[] {
  const tables: string[] = [], chains: string[] = [], sets: string[] = [], rules: string[] = [];
  const elements: string[] = [];
  let table = "";
  let block: { kind: string; name: string; lines: string[] } | undefined;
  // An `elements = { ...` spanning lines (nft prints a large set over thousands): its lines, and how
  // many braces are open after them, kept as it grows so each line is read once.
  let pending: string[] = [];
  let open = 0;
  const depth = (s: string) => {
    let d = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c === 123) d++;
      else if (c === 125) d--;
    }
    return d;
  };
  const close = () => {
    const b = block!;
    const t = `${table} ${b.name}`;
    if (b.kind === "chain") {
      const base = b.lines.find((l) => /^type \S+ hook /.test(l));
      // A line of its own `comment "..."` is the chain's, not a rule.
      const comment = b.lines.find((l) => /^comment "[^"]*"$/.test(l));
      const spec = [base, comment === undefined ? undefined : `${comment} ;`].filter((x) => x !== undefined);
      chains.push(`add chain ${t}${spec.length === 0 ? "" : ` { ${spec.join(" ")} }`}`);
      for (const r of b.lines) if (r !== base && r !== comment) rules.push(`add rule ${t} ${r}`);
      return;
    }
    const decl = b.lines.filter((l) => !l.startsWith("elements = ") && !/^size \d+$/.test(l));
    sets.push(`add ${b.kind} ${t} { ${decl.map((d) => `${d};`).join(" ")} }`);
    const elems = b.lines.find((l) => l.startsWith("elements = "));
    if (elems !== undefined) elements.push(`add element ${t} ${elems.slice("elements = ".length)}`);
  };
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "") return;
    if (pending.length > 0) {
      pending.push(line);
      open += depth(line);
      if (open === 0) {
        block!.lines.push(pending.join(" ").replace(/\s+/g, " "));
        pending = [];
      }
      return;
    }
    if (table === "") {
      const m = /^table (ip6?|inet) (\S+) \{$/.exec(line);
      if (m === null) throw new Error(`line ${i + 1}: not an nft listing: ${line.slice(0, 80)}`);
      table = `${m[1]} ${m[2]}`;
      tables.push(`add table ${table}`);
      return;
    }
    if (block === undefined) {
      if (line === "}") table = "";
      const m = /^(chain|set|map) (\S+) \{$/.exec(line);
      if (m !== null) block = { kind: m[1], name: m[2], lines: [] };
      return;
    }
    if (line === "}") {
      close();
      block = undefined;
    } else if (line.startsWith("elements = ") && (open = depth(line)) !== 0) pending = [line];
    else block.lines.push(line);
  });
  return [...tables, ...chains, ...sets, ...rules, ...elements];
}
