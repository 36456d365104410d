/**
 * The nftables interpreter: follows a new connection through the base chains of one table of an
 * {@linkcode NftTable} (a rendered transaction, a listing, or the tests' fake), hook by hook in priority
 * order (prerouting, then input or forward, then postrouting; output first for the node's own traffic),
 * exploring every branch of `numgen random mod N` (and `numgen inc`), taking the one index `jhash ...`
 * gives for the packet (`nft_picks.ts`), and reports the endpoints it can reach, whether it is masqueraded,
 * and the verdict. It interprets the expressions the nftables mode writes and throws on any other.
 * @module
 */
import { addressFamily, inCIDR, type IPFamily } from "../../iptables/ip.ts";
import type { NftSet, NftTable } from "../../iptables/nft_ruleset.ts";
import { splitTop } from "../../iptables/nft_syntax.ts";
import { parseBaseHook } from "../../iptables/nft_priority.ts";
import { type DnatPick, interfaceMatches, type Packet, type TraceStep } from "./packet.ts";
import { DEFAULT_SOURCE_PORT } from "../options/config.ts";
import type { HashInput } from "./nft_picks.ts";
import { inlineMap, lookupElement, lookupEntry } from "./nft_sets.ts";
import {
  dnatStatement,
  type End,
  type Evaluation,
  markStatement,
  type Outcome,
  type PathState as State,
  pickVerdict,
  tokenize,
  updateStatement,
} from "./nft_statements.ts";

/** A packet opening a connection, as the rule walker takes it (`fromHost`: the output hook). */
export type NftPacket = Pick<
  Packet,
  "src" | "dst" | "port" | "protocol" | "fromHost" | "inInterface" | "sport" | "ctState"
>;

/** Where the packet went. */
export interface NftTraceResult {
  /** `ip:port` (`[ip]:port` for IPv6) of every endpoint some path DNATs to, sorted. */
  readonly endpoints: string[];
  /** The endpoints with the share of new connections each gets (`numgen` branches weighted). */
  readonly reach: ReadonlyArray<{ readonly endpoint: string; readonly probability: number }>;
  /** Every rule some path acted on (matched and did something), in the order first reached. */
  readonly steps: readonly TraceStep[];
  /** Some path went through an `affinity-check` entry: a returning client keeps its endpoint. */
  readonly affinity: boolean;
  /** Every path that reaches an endpoint is masqueraded. */
  readonly masq: boolean;
  /** Some such paths are masqueraded and some are not. */
  readonly masqMixed: boolean;
  readonly verdict: "DNAT" | "REJECT" | "DROP" | "none";
  /** The chains each distinct path went through, for messages. */
  readonly paths: string[][];
  /** How each DNAT some path reached chose its endpoint. */
  readonly picks: readonly DnatPick[];
  /** This client's ClientIP affinity entry sends it to `endpoint` (for `expiresSeconds` more). */
  readonly pinned?: { readonly endpoint: string; readonly expiresSeconds?: number };
}

/** The value of a header the packet does not have. */
const ABSENT = "\0absent";

/** Traces `pkt` through `table` of `family`; `nodeIPs` are this node's addresses. */
export function traceNft(
  nft: { table(family: IPFamily, table: string): NftTable | undefined },
  family: IPFamily,
  table: string,
  pkt: NftPacket,
  nodeIPs: readonly string[],
  opts: { record?: boolean; exploreHashes?: boolean } = {},
): NftTraceResult {
  const t = nft.table(family, table);
  if (t === undefined) throw new Error(`nft tracer: no table ${table}`);
  const isLocal = (ip: string) =>
    nodeIPs.includes(ip) || (addressFamily(ip) === "IPv4" ? inCIDR(ip, "127.0.0.0/8") : ip === "::1");
  const ev = new Evaluator(t, table, family, pkt, isLocal, opts.record ?? false, opts.exploreHashes ?? false);
  let states: State[] = [{ dst: pkt.dst, port: pkt.port, mark: 0, masq: false, trail: [], p: 1, steps: [] }];
  const finished: Array<{ st: State; verdict: "REJECT" | "DROP" }> = [];
  const runHook = (hook: string, list: State[]): State[] => {
    const next: State[] = [];
    for (const st of list) {
      let alive: State[] = [st];
      for (const chain of ev.baseChains(hook)) {
        const after: State[] = [];
        for (const s of alive) {
          for (const o of ev.chain(chain, s, 0)) {
            if (o.end === "drop" || o.end === "reject") {
              finished.push({ st: o.st, verdict: o.end === "drop" ? "DROP" : "REJECT" });
            } else after.push(o.st);
          }
        }
        alive = after;
      }
      next.push(...alive);
    }
    return next;
  };
  states = runHook(pkt.fromHost ? "output" : "prerouting", states);
  // After DNAT the route follows the new destination.
  const local = states.filter((s) => isLocal(s.dst));
  const remote = states.filter((s) => !isLocal(s.dst));
  const delivered = pkt.fromHost ? runHook("postrouting", states) : [
    ...runHook("input", local),
    ...runHook("postrouting", runHook("forward", remote)),
  ];
  const reached = delivered.filter((s) => s.dnat !== undefined);
  const shares = new Map<string, number>();
  for (const s of reached) shares.set(s.dnat!, (shares.get(s.dnat!) ?? 0) + s.p);
  const endpoints = [...shares.keys()].sort();
  const seen = new Set<string>();
  const steps: TraceStep[] = [];
  for (const s of [...delivered, ...finished.map((f) => f.st)]) {
    for (const step of s.steps) {
      const k = `${step.chain}\u0000${step.rule}`;
      if (!seen.has(k)) seen.add(k), steps.push(step);
    }
  }
  const masqCount = reached.filter((s) => s.masq).length;
  const blocked = finished[0]?.verdict;
  // A client with an affinity entry has one path, through it.
  const pinned = reached.length > 0 && reached.every((s) => s.pinned !== undefined) && endpoints.length === 1
    ? { endpoint: endpoints[0], ...(reached[0].pinned == null ? {} : { expiresSeconds: reached[0].pinned }) }
    : undefined;
  return {
    ...(pinned === undefined ? {} : { pinned }),
    endpoints,
    reach: endpoints.map((endpoint) => ({
      endpoint,
      probability: Math.round(shares.get(endpoint)! * 1e6) / 1e6,
    })),
    steps,
    affinity: ev.affinity,
    masq: reached.length > 0 && masqCount === reached.length,
    masqMixed: masqCount > 0 && masqCount < reached.length,
    verdict: endpoints.length > 0 ? "DNAT" : blocked ?? "none",
    paths: [...delivered, ...finished.map((f) => f.st)].map((s) => s.trail),
    picks: ev.picks,
  };
}

/** One trace's interpreter over one table: chains, rules, matches (statements: `nft_statements.ts`). */
class Evaluator implements Evaluation {
  /** Some path looked a client up in `affinity-check` and found its service there. */
  affinity = false;
  /** Every DNAT choice made, once each. */
  readonly picks: DnatPick[] = [];
  readonly #t: NftTable;
  readonly #table: string;
  readonly #fam: "ip" | "ip6";
  readonly #pkt: NftPacket;
  readonly #isLocal: (ip: string) => boolean;
  readonly record: boolean;
  readonly exploreHashes: boolean;

  constructor(
    t: NftTable,
    tableName: string,
    family: IPFamily,
    pkt: NftPacket,
    isLocal: (ip: string) => boolean,
    record: boolean,
    exploreHashes: boolean,
  ) {
    this.#t = t;
    this.#fam = family === "IPv4" ? "ip" : "ip6";
    this.#table = `${this.#fam} ${tableName}`;
    this.#pkt = pkt;
    this.#isLocal = isLocal;
    this.record = record;
    this.exploreHashes = exploreHashes;
  }

  /** Base chains on `hook`, in priority order (conntrack gives nat chains no INVALID packet). */
  baseChains(hook: string): string[] {
    const hooked: Array<[string, number]> = [];
    for (const [name, c] of this.#t.chains) {
      const h = c.base === undefined ? undefined : parseBaseHook(c.base);
      if (this.#pkt.ctState === "invalid" && /\btype nat\b/.test(c.base ?? "")) continue;
      if (h?.hook === hook) hooked.push([name, h.priority]);
    }
    return hooked.sort((a, b) => a[1] - b[1]).map(([n]) => n);
  }

  /** Runs `name`; returns every outcome (`end` undefined: fell off the end). */
  chain(name: string, st: State, depth: number): Outcome[] {
    if (depth > 16) throw new Error(`nft tracer: jump depth exceeded at ${name}`);
    const c = this.#t.chains.get(name);
    if (c === undefined) throw new Error(`nft tracer: missing chain ${name}`);
    let live: State[] = [{ ...st, trail: [...st.trail, name] }];
    const done: Outcome[] = [];
    for (const rule of c.rules) {
      const next: State[] = [];
      for (const s of live) {
        for (const o of this.#rule(rule, s, depth, name)) {
          if (o.end === undefined) next.push(o.st);
          else done.push(o);
        }
      }
      live = next;
      if (live.length === 0) break;
    }
    return [...done, ...live.map((s) => ({ st: s, end: undefined as End }))];
  }

  /** Applies a verdict; `jump` returns to the caller on fall-through or return. */
  verdict(v: string, st: State, depth: number): Outcome[] {
    const [kind, target] = v.split(" ");
    if (kind === "drop" || kind === "reject" || kind === "accept" || kind === "return") {
      return [{ st, end: kind }];
    }
    const sub = this.chain(target, st, depth + 1);
    if (kind === "jump") return sub.map((o) => ({ st: o.st, end: o.end === "return" ? undefined : o.end }));
    if (kind === "goto") return sub.map((o) => ({ st: o.st, end: o.end === undefined ? "return" : o.end }));
    throw new Error(`nft tracer: unsupported verdict ${v}`);
  }

  /** Evaluates one rule of chain `name` for `st`. */
  #rule(rule: string, st0: State, depth: number, name: string): Outcome[] {
    const tokens = tokenize(rule);
    let i = 0;
    let st = st0;
    // A match that fails ends the rule; the chain goes on with the next one.
    const miss = (): Outcome[] => [{ st, end: undefined }];
    // The rule acts (its matches held): the path records it once, before what it leads to.
    let acted = false;
    const act = () => {
      if (acted) return;
      acted = true;
      st = {
        ...st,
        steps: [...st.steps, { table: this.#table, chain: name, rule: `${name}: ${rule}`, depth }],
      };
    };
    while (i < tokens.length) {
      const tk = tokens[i];
      // A comment (`comment "..."`, anywhere in a rule or alone in a chain) does nothing.
      if (tk === "comment") {
        i += 2;
        continue;
      }
      // Statements.
      if (tk === "jump" || tk === "goto") {
        act();
        return this.verdict(`${tk} ${tokens[i + 1]}`, st, depth);
      }
      if (tk === "drop" || tk === "reject" || tk === "accept" || tk === "return") {
        act();
        return this.verdict(tk, st, depth);
      }
      if (tk === "masquerade") {
        act();
        return [{ st: { ...st, masq: true }, end: "accept" }];
      }
      if (tk === "meta" && tokens[i + 1] === "mark" && tokens[i + 2] === "set") {
        act();
        const { mark, took } = markStatement(tokens.slice(i), st, rule);
        st = { ...st, mark };
        i += took;
        continue;
      }
      if (tk === "dnat") {
        const out = dnatStatement(this, tokens.slice(i), st, rule, name);
        if (out.some((o) => o.end !== undefined)) {
          act();
          return out.map((o) => ({ ...o, st: { ...o.st, steps: st.steps } }));
        }
        return out;
      }
      if (tk === "update") {
        updateStatement(this, tokens.slice(i), st, rule);
        return miss();
      }
      // `numgen random mod N vmap { 0 : goto a, ... }` (upstream's endpoint choice): every branch.
      if ((tk === "numgen" || tk === "jhash") && tokens.includes("vmap", i)) {
        act();
        return pickVerdict(this, tokens.slice(i), st, depth, rule);
      }
      // Matches: an expression, then how it is tested.
      const { values, next } = this.expr(tokens, i, st, rule);
      i = next;
      // A header of another protocol is absent: nothing about it matches, negated or not.
      if (values.includes(ABSENT)) return miss();
      const op = tokens[i];
      if (op === "vmap") {
        const map = tokens[i + 1].startsWith("{") ? inlineMap(tokens[i + 1]) : this.set(tokens[i + 1], rule);
        const hit = lookupElement(map, values);
        if (hit === undefined) return miss();
        if (tokens[i + 1] === "@affinity-check") this.affinity = true;
        act();
        return this.verdict(hit, st, depth);
      }
      if (op?.startsWith("@")) {
        const entry = lookupEntry(this.set(op, rule), values);
        // Upstream's ClientIP affinity: `ip saddr @affinity-... goto endpoint-...`; a hit is this
        // client's entry.
        if (op.startsWith("@affinity-")) {
          this.affinity = true;
          if (entry !== undefined) st = { ...st, pinned: entry.expires ?? null };
        }
        if (entry === undefined) return miss();
        i++;
        continue;
      }
      if (op === "&") {
        // meta mark & M == V
        const ok = (st.mark & Number(tokens[i + 1])) === Number(tokens[i + 3]) === (tokens[i + 2] === "==");
        if (!ok) return miss();
        i += 4;
        continue;
      }
      let neg = false;
      let j = i;
      if (tokens[j] === "!=") {
        neg = true;
        j++;
      } else if (tokens[j] === "==") j++;
      const lit = tokens[j];
      if (lit === undefined) throw new Error(`nft tracer: dangling expression in: ${rule}`);
      const options = lit.startsWith("{") ? splitTop(lit.slice(1, -1), ",") : [lit];
      const v = values.join(" . ");
      const match = options.some((o) =>
        o === v || (o.includes("/") && inCIDR(v, o)) ||
        (o.startsWith('"') && interfaceMatches(v, o.slice(1, -1)))
      );
      if (match === neg) return miss();
      i = j + 1;
    }
    return miss();
  }

  /** Evaluates a (possibly concatenated) expression starting at `i`. */
  expr(tokens: string[], i: number, st: State, rule: string): { values: string[]; next: number } {
    const values: string[] = [];
    for (;;) {
      const [v, n] = this.#value(tokens, i, st, rule);
      values.push(v);
      i = n;
      if (tokens[i] !== ".") return { values, next: i };
      i++;
    }
  }

  /** One value expression: returns its text and the next token index. */
  #value(tokens: string[], i: number, st: State, rule: string): [string, number] {
    const p = this.#pkt;
    const t = tokens[i];
    const fam = this.#fam;
    const orig = { saddr: p.src, daddr: p.dst, port: p.port };
    if ((t === fam) && (tokens[i + 1] === "saddr" || tokens[i + 1] === "daddr")) {
      return [tokens[i + 1] === "saddr" ? p.src : st.dst, i + 2];
    }
    if (t === "meta" && tokens[i + 1] === "l4proto") return [p.protocol, i + 2];
    if (t === "iifname") {
      const iif = p.fromHost ? "" : p.inInterface;
      if (iif === undefined) {
        throw new Error(`nft tracer: the packet's input interface is needed (--in-interface) for: ${rule}`);
      }
      return [iif, i + 1];
    }
    if (t === "meta" && tokens[i + 1] === "mark") return [String(st.mark), i + 2];
    if ((t === "th" || t === p.protocol) && tokens[i + 1] === "dport") return [String(st.port), i + 2];
    if ((t === "tcp" || t === "udp" || t === "sctp") && tokens[i + 1] === "dport") {
      return [ABSENT, i + 2];
    }
    if (t === "ct" && tokens[i + 1] === "state") return [p.ctState ?? "new", i + 2];
    if (t === "ct" && tokens[i + 1] === "status") return [st.dnat !== undefined ? "dnat" : "none", i + 2];
    if (t === "ct" && tokens[i + 1] === "original") {
      if (tokens[i + 2] === fam && tokens[i + 3] === "daddr") return [orig.daddr, i + 4];
      if (tokens[i + 2] === fam && tokens[i + 3] === "saddr") return [orig.saddr, i + 4];
      if (tokens[i + 2] === "proto-dst") return [String(orig.port), i + 3];
    }
    if (t === "fib" && tokens[i + 1] === "saddr" && tokens[i + 2] === "type") {
      return [p.fromHost || this.#isLocal(p.src) ? "local" : "unicast", i + 3];
    }
    if (t === "fib" && tokens[i + 1] === "daddr" && tokens[i + 2] === "type") {
      return [this.#isLocal(st.dst) ? "local" : "unicast", i + 3];
    }
    throw new Error(
      `nft tracer: unsupported expression at "${tokens.slice(i, i + 3).join(" ")}" in: ${rule}`,
    );
  }

  /** The named set or map `ref`. @throws {Error} naming `rule` when the table has none. */
  set(ref: string, rule: string): NftSet {
    const s = this.#t.sets.get(ref.replace(/^@/, ""));
    if (s === undefined) throw new Error(`nft tracer: missing set ${ref} in: ${rule}`);
    return s;
  }

  /** The packet's fields a hash reads, as this path has rewritten them. */
  hashInput(st: State): HashInput {
    const p = this.#pkt;
    return {
      fam: this.#fam,
      protocol: p.protocol,
      saddr: p.src,
      daddr: st.dst,
      sport: p.sport ?? DEFAULT_SOURCE_PORT,
      dport: st.port,
    };
  }
}
