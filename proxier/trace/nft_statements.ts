/**
 * The statements the nftables interpreter (`nft_walker.ts`) executes besides matches and verdicts:
 * `dnat` (to a literal address, through a named or anonymous map keyed by a pick), a verdict map
 * read by a pick, `meta mark set`, and set updates; with the state one path through the rules
 * carries. Each works on the path's state and returns its outcomes; the rule interpreter decides
 * what a rule's tokens mean and calls them.
 * @module
 */
import type { NftSet } from "../../iptables/nft_ruleset.ts";
import type { DnatPick, TraceStep } from "./packet.ts";
import { dnatPick, type HashInput, pickIndices } from "./nft_picks.ts";
import { inlineMap, lookupElement, lookupEntry } from "./nft_sets.ts";

/** One path's state: where the packet now goes, its mark, what it did. */
export interface PathState {
  dst: string;
  port: number;
  mark: number;
  /** `ip:port` it was DNATed to, if any. */
  dnat?: string;
  masq: boolean;
  /** The chains it went through. */
  trail: string[];
  /** The share of new connections on this path. */
  p: number;
  /** The rules this path acted on. */
  steps: TraceStep[];
  /** The path went by this client's ClientIP affinity entry (seconds it has left; null: not said). */
  pinned?: number | null;
}

/** How a chain or rule ended for a path: a verdict, or undefined when it fell through. */
export type End = "accept" | "drop" | "reject" | "return" | undefined;

/** One path's state after a rule or chain, and how it ended. */
export interface Outcome {
  st: PathState;
  end: End;
}

/** What a statement asks of the interpreter running it. */
export interface Evaluation {
  /** Explore every index a hash may give, not only this packet's. */
  readonly exploreHashes: boolean;
  /** Record set updates (a live trace does not: the kernel's sets are read, not written). */
  readonly record: boolean;
  /** Every DNAT choice made, once each. */
  readonly picks: DnatPick[];
  /** Evaluates a (possibly concatenated) expression at `i`. */
  expr(tokens: string[], i: number, st: PathState, rule: string): { values: string[]; next: number };
  /** The named set or map `ref` (`@name`). */
  set(ref: string, rule: string): NftSet;
  /** Applies verdict `v` (`jump x`, `accept`...). */
  verdict(v: string, st: PathState, depth: number): Outcome[];
  /** The packet's fields a hash reads, as this path has rewritten them. */
  hashInput(st: PathState): HashInput;
}

/** `ip:port` (`[ip]:port` for IPv6) of a DNAT map value `ip . port`. */
export function endpointOf(value: string): string {
  const [ip, port] = value.split(" . ");
  return ip.includes(":") ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/** Splits a rule into tokens; `{ ... }` groups and `"..."` strings (comments) stay one token. */
export function tokenize(rule: string): string[] {
  const out: string[] = [];
  let cur = "";
  let depth = 0;
  let quoted = false;
  for (const ch of rule) {
    if (ch === '"') quoted = !quoted;
    if (ch === "{" && !quoted) depth++;
    if (ch === "}" && !quoted) depth--;
    if (ch === " " && depth === 0 && !quoted) {
      if (cur !== "") out.push(cur);
      cur = "";
    } else cur += ch;
  }
  if (cur !== "") out.push(cur);
  return out;
}

/** The map a statement reads: an anonymous one written in the rule, or a named one. */
function mapOf(ev: Evaluation, token: string, rule: string): NftSet {
  return token.startsWith("{") ? inlineMap(token) : ev.set(token, rule);
}

/**
 * `meta mark set meta mark | M` (or `^ M`, or `set M`) at `tokens[0]`: returns the new mark and how
 * many tokens the statement took.
 * @throws {Error} for any other mark statement.
 */
export function markStatement(tokens: string[], st: PathState, rule: string): { mark: number; took: number } {
  // `meta mark set 0x4000`: a literal mark.
  if (tokens[3] !== "meta") {
    const mark = Number(tokens[3]);
    if (Number.isNaN(mark)) throw new Error(`nft tracer: unsupported mark statement in: ${rule}`);
    return { mark, took: 4 };
  }
  const op = tokens[5];
  const m = Number(tokens[6]);
  const mark = op === "|" ? st.mark | m : op === "^" ? st.mark ^ m : op === "&" ? st.mark & m : NaN;
  if (Number.isNaN(mark)) throw new Error(`nft tracer: unsupported mark statement in: ${rule}`);
  return { mark, took: 7 };
}

/**
 * `dnat [ip|ip6] to <addr>:<port>`, or `dnat ... to <expr> map @m` / `map { ... }`: one outcome per
 * reachable value. `numgen` explores every branch; a `jhash` gives the one index the kernel computes
 * for this packet (`nft_picks.ts`). A key no element holds falls through to the next rule.
 */
export function dnatStatement(
  ev: Evaluation,
  tokens: string[],
  st: PathState,
  rule: string,
  chain: string,
): Outcome[] {
  const to = tokens.indexOf("to");
  const mapAt = tokens.lastIndexOf("map");
  if (mapAt < 0) {
    // `dnat to 10.0.0.1:80` / `dnat ip6 to [fd00::1]:80`: one endpoint.
    const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(tokens[to + 1] ?? "");
    if (m === null) throw new Error(`nft tracer: unsupported dnat in: ${rule}`);
    return [{
      st: { ...st, dst: m[1], port: Number(m[2]), dnat: endpointOf(`${m[1]} . ${m[2]}`) },
      end: "accept",
    }];
  }
  const keyTokens = tokens.slice(to + 1, mapAt);
  const pick = dnatPick(keyTokens, ev.hashInput(st), rule);
  const keys: string[][] = [];
  if (pick !== undefined) {
    // The key: the values before the pick (if any), then the index.
    const head = pick.at === 0 ? [] : ev.expr(keyTokens.slice(0, pick.at - 1), 0, st, rule).values;
    for (const k of pickIndices(pick, ev.exploreHashes)) keys.push([...head, String(k)]);
  } else keys.push(ev.expr(keyTokens, 0, st, rule).values);
  // Each index takes an equal share of this path's connections; indices that lead to the same
  // endpoint are one path (a Maglev table's 16,381 slots are a few endpoints, not 16,381 paths).
  const map = mapOf(ev, tokens[mapAt + 1], rule);
  // A map of pins (this layout's `affinity-T`): a hit is this client's entry.
  const pins = tokens[mapAt + 1].startsWith("@affinity-");
  const hits = new Map<string | undefined, number>();
  let expires: number | undefined;
  for (const key of keys) {
    const entry = lookupEntry(map, key);
    if (pins && entry !== undefined) expires = entry.expires;
    hits.set(entry?.value, (hits.get(entry?.value) ?? 0) + 1);
  }
  const out: Outcome[] = [];
  for (const [hit, count] of hits) {
    const p = (st.p * count) / keys.length;
    // A miss breaks the rule: evaluation goes on with the next one.
    if (hit === undefined) {
      out.push({ st: { ...st, p }, end: undefined });
      continue;
    }
    const [ip, port] = hit.split(" . ");
    const pinned = pins ? { pinned: expires ?? null } : {};
    out.push({
      st: { ...st, p, dst: ip, port: Number(port), dnat: endpointOf(hit), ...pinned },
      end: "accept",
    });
  }
  if (pick !== undefined && !ev.picks.some((x) => x.chain === chain && x.expr === pick.expr)) {
    const at = pick.slot === undefined
      ? undefined
      : lookupElement(map, [...keys[0].slice(0, -1), String(pick.slot)]);
    const endpoint = at === undefined ? undefined : endpointOf(at);
    const { expr, of, slot } = pick;
    ev.picks.push({
      chain,
      expr,
      of,
      ...(slot === undefined ? {} : { slot }),
      ...(endpoint === undefined ? {} : { endpoint }),
    });
  }
  // Branches that all missed are one fall-through, with their shares together.
  const falls = out.filter((o) => o.end === undefined);
  const fallP = falls.reduce((sum, o) => sum + o.st.p, 0);
  return [
    ...out.filter((o) => o.end !== undefined),
    ...(falls.length > 0 ? [{ st: { ...st, p: fallP }, end: undefined as End }] : []),
  ];
}

/**
 * A verdict map read by a pick (`numgen random mod N vmap { ... }`): each index the pick can give
 * takes an equal share of this path, as {@linkcode dnatStatement}'s map does.
 */
export function pickVerdict(
  ev: Evaluation,
  tokens: string[],
  st: PathState,
  depth: number,
  rule: string,
): Outcome[] {
  const at = tokens.indexOf("vmap");
  const pick = dnatPick(tokens.slice(0, at), ev.hashInput(st), rule)!;
  const map = mapOf(ev, tokens[at + 1], rule);
  const indices = pickIndices(pick, ev.exploreHashes);
  const out: Outcome[] = [];
  for (const k of indices) {
    const hit = lookupElement(map, [String(k)]);
    const branch = { ...st, p: st.p / indices.length };
    out.push(
      ...(hit === undefined ? [{ st: branch, end: undefined as End }] : ev.verdict(hit, branch, depth)),
    );
  }
  return out;
}

/** `update @m { key : value }` (a map) or `update @s { key }` (a set): recorded when asked to. */
export function updateStatement(ev: Evaluation, tokens: string[], st: PathState, rule: string): void {
  if (!ev.record) return;
  const map = ev.set(tokens[1], rule);
  const body = tokens[2].slice(1, -1);
  const [k, v] = body.split(" : ");
  const key = ev.expr(tokenize(k), 0, st, rule).values.join(" . ");
  const value = v === undefined ? "" : ev.expr(tokenize(v), 0, st, rule).values.join(" . ");
  map.elements.set(key, { value });
}
