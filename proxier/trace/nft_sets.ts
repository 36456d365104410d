/**
 * Looking a packet's values up in an nftables set or map as the kernel does: an exact key, or, in an
 * interval set, elements whose prefix parts hold the values. Linear in the set once, then in the
 * matches: the interpreter (`nft_walker.ts`) may look the same large set up for every path.
 * @module
 */
import { inCIDR } from "../../iptables/ip.ts";
import type { NftSet } from "../../iptables/nft_ruleset.ts";
import { splitTop } from "../../iptables/nft_syntax.ts";

/** Returns the value `values` (a concatenation's parts) finds in `s` ("" for a set), or undefined. */
export function lookupElement(s: NftSet, values: readonly string[]): string | undefined {
  return lookupEntry(s, values)?.value;
}

/**
 * Returns the element `values` finds in `s`: its value ("" for a set) and, for a dynamic set's
 * element as a live listing prints it, the seconds until it expires; undefined when none.
 */
export function lookupEntry(
  s: NftSet,
  values: readonly string[],
): { readonly value: string; readonly expires?: number } | undefined {
  const exact = s.elements.get(values.join(" . "));
  if (exact !== undefined) return exact;
  if (!s.decl.some((d) => d.includes("interval"))) return undefined;
  const index = intervalIndex(s);
  for (const cidrAt of index.shapes) {
    const key = values.map((v, n) => cidrAt.includes(n) ? "*" : v).join(" . ");
    for (const e of index.byExact.get(key) ?? []) {
      if (cidrAt.every((n) => inCIDR(values[n], e.parts[n]))) return { value: e.value };
    }
  }
  return undefined;
}

/**
 * An interval set's elements by their exact parts (a CIDR part as `*`), and the positions of CIDR
 * parts each shape has: a lookup reads only the elements that match it exactly elsewhere, so it costs
 * the matches, not the set. Built once per set (a set is never changed after its transaction).
 */
interface IntervalIndex {
  readonly shapes: number[][];
  readonly byExact: Map<string, Array<{ parts: string[]; value: string }>>;
}

const intervalIndexes = new WeakMap<NftSet, IntervalIndex>();

function intervalIndex(s: NftSet): IntervalIndex {
  let index = intervalIndexes.get(s);
  if (index !== undefined) return index;
  const shapes = new Map<string, number[]>();
  const byExact = new Map<string, Array<{ parts: string[]; value: string }>>();
  for (const [k, v] of s.elements) {
    const parts = k.split(" . ");
    const cidrAt = parts.flatMap((p, n) => p.includes("/") ? [n] : []);
    shapes.set(cidrAt.join(), cidrAt);
    const key = parts.map((p, n) => cidrAt.includes(n) ? "*" : p).join(" . ");
    let list = byExact.get(key);
    if (list === undefined) byExact.set(key, list = []);
    list.push({ parts, value: v.value });
  }
  index = { shapes: [...shapes.values()], byExact };
  intervalIndexes.set(s, index);
  return index;
}

/**
 * The anonymous map of a rule (`{ 0 : goto endpoint-a, 1 : goto endpoint-b }`, upstream's endpoint
 * choice) as a set to look values up in; memoized per text (a listing repeats each rule's text).
 */
export function inlineMap(text: string): NftSet {
  let s = inlineMaps.get(text);
  if (s === undefined) {
    const elements = new Map<string, { value: string }>();
    for (const e of splitTop(text.slice(1, -1), ",")) {
      const colon = e.indexOf(" : ");
      if (colon < 0) elements.set(e.trim(), { value: "" });
      else elements.set(e.slice(0, colon).trim(), { value: e.slice(colon + 3).trim() });
    }
    inlineMaps.set(text, s = { kind: "map", decl: [], elements });
  }
  return s;
}

const inlineMaps = new Map<string, NftSet>();
