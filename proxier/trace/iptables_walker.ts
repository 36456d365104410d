/**
 * Which endpoint a packet reaches: a walk of kube-proxy's iptables rules (live `iptables-save`
 * output, a rendered restore input, or the test fake) for one new connection. It follows nat
 * (PREROUTING for traffic from elsewhere, OUTPUT for traffic from this host), takes both outcomes
 * of every `statistic` and `recent --rcheck` match (weighting the statistic ones), then filter, and
 * reports the rules hit, the endpoints with their probabilities, masquerading and the verdict. A
 * match it does not understand stops that path and is reported, never guessed.
 * @module
 */
import { addressFamily, inCIDR } from "../../iptables/ip.ts";
import type { Chain, Table } from "../../iptables/iptables.ts";
import { splitArgs } from "../../iptables/rule_args.ts";
import { interfaceMatches, type Packet, type TraceResult, type TraceStep } from "./packet.ts";

/** Rules by table and chain, as iptables holds them. */
export interface RuleSource {
  /** The chain's rules (text after `-A CHAIN `), or undefined when the chain does not exist. */
  rules(table: Table, chain: Chain): readonly string[] | undefined;
}

/** ipset contents, for `-m set --match-set` (the ipvs mode's rules). */
export interface SetLookup {
  /** The set's type (`hash:ip,port`...) and entries, or undefined when it does not exist. */
  get(name: string): { readonly type: string; readonly entries: ReadonlySet<string> } | undefined;
}

interface Outcome {
  dnat?: string;
  redirect?: number;
  masq: boolean;
  p: number;
  verdict?: "REJECT" | "DROP" | "ACCEPT" | "UNKNOWN";
}

interface Walk {
  readonly rules: RuleSource;
  readonly sets?: SetLookup;
  readonly pkt: Packet;
  readonly isLocal: (ip: string) => boolean;
  readonly path: TraceStep[];
  readonly seen: Set<string>;
  readonly unsupported: Set<string>;
  affinity: boolean;
}

const LOOPBACK4 = "127.0.0.0/8";

/**
 * Traces `pkt` through `rules`; `nodeIPs` are this node's addresses (addrtype LOCAL); `sets` answers
 * `-m set` matches (without it they are reported as not understood).
 */
export function tracePacket(
  rules: RuleSource,
  pkt: Packet,
  nodeIPs: readonly string[],
  sets?: SetLookup,
): TraceResult {
  const isLocal = (ip: string) =>
    nodeIPs.includes(ip) || (addressFamily(ip) === "IPv4" ? inCIDR(ip, LOOPBACK4) : ip === "::1");
  const w: Walk = {
    rules,
    sets,
    pkt,
    isLocal,
    path: [],
    seen: new Set(),
    unsupported: new Set(),
    affinity: false,
  };
  // Conntrack gives nat only the first packet of a connection it tracks: an INVALID one skips it.
  const natOutcomes = pkt.ctState === "invalid"
    ? [{ masq: false, p: 1 }]
    : walk(w, "nat", pkt.fromHost ? "OUTPUT" : "PREROUTING", pkt, pkt.dst, false, 1);
  const reached: Outcome[] = [];
  const passed: Outcome[] = [];
  let verdict: TraceResult["verdict"] = "none";
  for (const o of natOutcomes) {
    if (o.verdict === "UNKNOWN") {
      verdict = "UNKNOWN";
      continue;
    }
    const dst = o.dnat === undefined ? pkt.dst : o.dnat.replace(/^\[?(.*?)\]?:\d+$/, "$1");
    // The node's own packets to a local address pass OUTPUT and then, over loopback, INPUT.
    const chains = pkt.fromHost ? (isLocal(dst) ? ["OUTPUT", "INPUT"] : ["OUTPUT"]) : [
      isLocal(dst) ? "INPUT" : "FORWARD",
    ];
    const dstPort = o.dnat === undefined ? pkt.port : Number(o.dnat.slice(o.dnat.lastIndexOf(":") + 1));
    const fo = chains.flatMap((chain) =>
      walk(w, "filter", chain, { ...pkt, port: dstPort, dnatted: o.dnat !== undefined }, dst, o.masq, o.p)
    );
    const v = fo.find((x) => x.verdict === "REJECT" || x.verdict === "DROP" || x.verdict === "UNKNOWN");
    if (v !== undefined) {
      if (verdict === "none" || v.verdict === "UNKNOWN") verdict = v.verdict as "REJECT" | "DROP" | "UNKNOWN";
      continue;
    }
    passed.push(o);
    // Marked packets are masqueraded in nat POSTROUTING; a packet from elsewhere DNATed to one of
    // this node's addresses is delivered to it (INPUT) and never gets there.
    if (o.dnat !== undefined) reached.push({ ...o, masq: o.masq && (pkt.fromHost || !isLocal(dst)) });
  }
  const shares = new Map<string, number>();
  for (const o of reached) shares.set(o.dnat!, (shares.get(o.dnat!) ?? 0) + o.p);
  const endpoints = [...shares.keys()].sort();
  const redirects = [...new Set(natOutcomes.flatMap((o) => o.redirect ?? []))].sort((a, b) => a - b);
  const masqCount = reached.filter((o) => o.masq).length;
  return {
    endpoints,
    reach: endpoints.map((endpoint) => ({
      endpoint,
      probability: Math.round(shares.get(endpoint)! * 1e6) / 1e6,
    })),
    masq: reached.length > 0 && masqCount === reached.length,
    masqMixed: masqCount > 0 && masqCount < reached.length,
    redirects,
    affinity: w.affinity,
    verdict: endpoints.length > 0 ? "DNAT" : redirects.length > 0 ? "REDIRECT" : verdict,
    path: w.path,
    unsupported: [...w.unsupported],
    marked: passed.length > 0 && passed.every((o) => o.masq),
  };
}

/** Walks `chain`, returning every terminal outcome (a fall-through counts as one). */
function walk(
  w: Walk,
  table: Table,
  chain: Chain,
  pkt: Packet,
  dst: string,
  masq: boolean,
  p: number,
  depth = 0,
): Outcome[] {
  if (depth > 32) throw new Error(`trace: jump depth exceeded at ${table}/${chain}`);
  const rules = w.rules.rules(table, chain);
  if (rules === undefined) {
    // A built-in chain iptables-save did not print holds no rules; a jump to a missing chain
    // cannot be loaded, so our own chains are always there.
    if (depth === 0) return [{ masq, p }];
    throw new Error(`trace: missing chain ${table}/${chain}`);
  }
  // Each state is one path through the chain so far.
  let states: Array<{ masq: boolean; p: number }> = [{ masq, p }];
  const done: Outcome[] = [];
  rules.forEach((rule, index) => {
    if (states.length === 0) return;
    const args = splitArgs(rule);
    let m = match(args, pkt, dst, w.isLocal, w.sets);
    if (m.kind === "no") return;
    const step = `${table}/${chain}/${index}`;
    if (!w.seen.has(step)) {
      w.seen.add(step);
      w.path.push({ table, chain, rule: `-A ${chain} ${rule}`, depth });
    }
    if (m.kind === "unknown") {
      w.unsupported.add(`-A ${chain} ${rule} (${m.what})`);
      for (const st of states) done.push({ ...st, verdict: "UNKNOWN" });
      states = [];
      return;
    }
    if (m.kind === "recent") {
      w.affinity = true;
      if (pkt.returningTo !== undefined) {
        // The endpoint chain the list is named after records the clients it DNATs.
        const name = args[args.indexOf("--name") + 1];
        const to = `--to-destination ${pkt.returningTo}`;
        if (!(w.rules.rules(table, name) ?? []).some((r) => r.includes(to))) return;
        m = { kind: "yes" };
      }
    }
    const next: Array<{ masq: boolean; p: number }> = [];
    for (const st0 of states) {
      // A probabilistic match: this share takes the rule, the rest goes on down the chain.
      const share = m.kind === "maybe" ? m.probability : m.kind === "recent" ? 0 : 1;
      if (m.kind !== "yes") next.push({ masq: st0.masq, p: st0.p * (1 - share) });
      const st = { masq: st0.masq, p: st0.p * share };
      const ji = args.indexOf("-j");
      const gi = args.indexOf("-g");
      const target = ji >= 0 ? args[ji + 1] : gi >= 0 ? args[gi + 1] : undefined;
      if (target === undefined) {
        next.push(st);
      } else if (target === "MARK") {
        // KUBE-MARK-MASQ's --or-mark; KUBE-POSTROUTING's --xor-mark only follows a mark test.
        next.push({ masq: true, p: st.p });
      } else if (target === "DNAT") {
        done.push({ ...st, dnat: args[args.indexOf("--to-destination") + 1] });
      } else if (target === "REJECT" || target === "DROP" || target === "ACCEPT") {
        done.push({ ...st, verdict: target });
      } else if (target === "RETURN") {
        done.push(st);
      } else if (target === "REDIRECT") {
        done.push({ ...st, redirect: Number(args[args.indexOf("--to-ports") + 1]) });
      } else if (target === "MASQUERADE" || target === "SNAT") {
        done.push({ ...st, masq: true });
      } else {
        for (const o of walk(w, table, target, pkt, dst, st.masq, st.p, depth + 1)) {
          // A sub-chain that fell through (or returned) continues here; -g does not come back.
          if (o.dnat === undefined && o.verdict === undefined && o.redirect === undefined && gi < 0) {
            next.push({ masq: o.masq, p: o.p });
          } else done.push(o);
        }
      }
    }
    states = next;
  });
  return [...done, ...states];
}

type Match =
  | { kind: "yes" | "no" | "recent" }
  | { kind: "maybe"; probability: number }
  | { kind: "unknown"; what: string };

/** Returns whether a rule's matches hold for the packet (probabilistic ones with their share). */
function match(
  args: string[],
  pkt: Packet,
  dst: string,
  isLocal: (ip: string) => boolean,
  sets?: SetLookup,
): Match {
  let result: Match = { kind: "yes" };
  const inNet = (ip: string, net: string) => (net.includes("/") ? inCIDR(ip, net) : ip === net);
  for (let i = 0; i < args.length; i++) {
    let neg = false;
    if (args[i] === "!") {
      neg = true;
      i++;
    }
    const a = args[i];
    const v = args[i + 1];
    const check = (ok: boolean) => (neg ? !ok : ok);
    switch (a) {
      case "-s":
        if (!check(inNet(pkt.src, v))) return { kind: "no" };
        i++;
        break;
      case "-d":
        if (!check(inNet(dst, v))) return { kind: "no" };
        i++;
        break;
      case "-p":
        if (!check(v === pkt.protocol)) return { kind: "no" };
        i++;
        break;
      case "--dport":
        if (!check(Number(v) === pkt.port)) return { kind: "no" };
        i++;
        break;
      case "--dst-type":
        if (!check(v === "LOCAL" && isLocal(dst))) return { kind: "no" };
        i++;
        break;
      case "--src-type":
        if (!check(v === "LOCAL" && (isLocal(pkt.src) || pkt.fromHost === true))) return { kind: "no" };
        i++;
        break;
      case "--ctstate":
      case "--state":
        // A new connection is NEW (and DNAT once nat rewrote it); an INVALID packet only INVALID;
        // neither is RELATED or ESTABLISHED.
        if (
          !check(
            v.split(",").some((st) =>
              pkt.ctState === "invalid"
                ? st === "INVALID"
                : st === "NEW" || (st === "DNAT" && pkt.dnatted === true)
            ),
          )
        ) return { kind: "no" };
        i++;
        break;
      case "--mark":
        // Only KUBE-FORWARD and KUBE-POSTROUTING test the mark; new packets carry none yet.
        if (!check(false)) return { kind: "no" };
        i++;
        break;
      case "--probability":
        result = { kind: "maybe", probability: Number(v) };
        i++;
        break;
      case "--rcheck":
        result = { kind: "recent" };
        break;
      case "--match-set": {
        const set = sets?.get(v);
        if (set === undefined) return { kind: "unknown", what: `set ${v} (no ipset contents)` };
        if (!check(inSet(set, args[i + 2], pkt, dst))) return { kind: "no" };
        i += 2;
        break;
      }
      case "-i": {
        const iif = pkt.fromHost ? "" : pkt.inInterface;
        if (iif === undefined) {
          return {
            kind: "unknown",
            what: `input interface match ${neg ? "! " : ""}-i ${v} (say which with --in-interface)`,
          };
        }
        if (!check(interfaceMatches(iif, v))) return { kind: "no" };
        i++;
        break;
      }
      case "--physdev-is-in":
        if (!check(pkt.fromPod === true)) return { kind: "no" };
        break;
      case "--vaddr":
        if (!check(dst === v)) return { kind: "no" };
        i++;
        break;
      case "--vproto":
        if (!check(v.toLowerCase() === pkt.protocol)) return { kind: "no" };
        i++;
        break;
      case "--vport":
        if (!check(Number(v) === pkt.port)) return { kind: "no" };
        i++;
        break;
      case "-m":
      case "--mode":
      case "--comment":
      case "--name":
      case "--seconds":
      case "--mask":
      case "--nfacct-name": // counts the packet, matches every one
        i++;
        break;
      case "--reap":
      case "--set":
      case "--rsource":
        break;
      case "-j":
      case "-g":
        return result;
      default:
        return { kind: "unknown", what: `unsupported match ${neg ? "! " : ""}${a}` };
    }
  }
  return result;
}

/**
 * Returns the rules of `text`: `iptables-save` output, or restore input as `render` prints it
 * (`-I` inserts at the top, `-X` deletes, `#` lines are comments).
 */
export function parseRules(text: string): RuleSource {
  const tables = new Map<string, Map<string, string[]>>();
  let table: Map<string, string[]> | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line === "COMMIT") continue;
    if (line.startsWith("*")) {
      const name = line.slice(1);
      table = tables.get(name) ?? new Map();
      tables.set(name, table);
      continue;
    }
    if (table === undefined) throw new Error(`trace: rule outside a table: ${line}`);
    if (line.startsWith(":")) {
      const chain = line.slice(1).split(" ")[0];
      if (!table.has(chain)) table.set(chain, []);
      continue;
    }
    const m = /^(-[AIX]) (\S+)(?: (.*))?$/.exec(line);
    if (m === null) throw new Error(`trace: cannot read rule: ${line}`);
    const [, op, chain, rest = ""] = m;
    if (op === "-X") {
      table.delete(chain);
      continue;
    }
    const rules = table.get(chain) ?? [];
    table.set(chain, rules);
    if (op === "-A") rules.push(rest);
    else rules.unshift(rest);
  }
  return { rules: (t, c) => tables.get(t)?.get(c) };
}

/** Returns whether the packet's fields named by `flags` (`dst,dst,src`...) form an entry of `set`. */
function inSet(
  set: { type: string; entries: ReadonlySet<string> },
  flags: string,
  pkt: Packet,
  dst: string,
): boolean {
  const f = flags.split(",");
  const addr = (which: string) => which === "src" ? pkt.src : dst;
  const portOf = (which: string) => which === "src" ? undefined : `${pkt.protocol}:${pkt.port}`;
  switch (set.type) {
    case "hash:ip":
      return set.entries.has(addr(f[0]));
    case "bitmap:port":
      return pkt.protocol !== undefined && set.entries.has(String(pkt.port));
    case "hash:ip,port":
      return set.entries.has(`${addr(f[0])},${portOf(f[1])}`);
    case "hash:ip,port,ip":
      return set.entries.has(`${addr(f[0])},${portOf(f[1])},${addr(f[2])}`);
    case "hash:ip,port,net": {
      const prefix = `${addr(f[0])},${portOf(f[1])},`;
      const ip = addr(f[2]);
      // ipset prints a single address (/32, /128) without its prefix length.
      const net = (e: string) => {
        const n = e.slice(prefix.length);
        return n.includes("/") ? n : `${n}/${n.includes(":") ? 128 : 32}`;
      };
      return [...set.entries].some((e) => e.startsWith(prefix) && inCIDR(ip, net(e)));
    }
  }
  return false;
}
