/**
 * A packet tracer over {@linkcode FakeIPTables}: follows a new connection through nat
 * (PREROUTING for traffic from elsewhere, OUTPUT for traffic from this host), exploring both
 * outcomes of every `statistic` and `recent --rcheck` match, then through filter, and reports
 * which endpoints it can reach and whether it is masqueraded.
 * @module
 */
import { addressFamily, inCIDR } from "../ip.ts";
import type { Chain, Table } from "../iptables.ts";
import type { FakeIPTables } from "./fake_iptables.ts";
import { splitArgs } from "./parse.ts";

/** A packet opening a connection. */
export interface Packet {
  readonly src: string;
  readonly dst: string;
  readonly port: number;
  readonly protocol: "tcp" | "udp" | "sctp";
  /** Sent by a process on this node (walks OUTPUT instead of PREROUTING). */
  readonly fromHost?: boolean;
}

/** What happened to the packet. */
export interface TraceResult {
  /** `ip:port` of every endpoint some path DNATs to (and filter lets through), sorted. */
  readonly endpoints: string[];
  /** Every path that reaches an endpoint is marked for masquerade. */
  readonly masq: boolean;
  /** Some paths masquerade and some do not. */
  readonly masqMixed: boolean;
  /** Local ports some path REDIRECTs to (userspace portals), sorted. */
  readonly redirects: number[];
  /** DNAT when an endpoint is reached, REDIRECT when only a local port is; else the filter verdict. */
  readonly verdict: "DNAT" | "REDIRECT" | "REJECT" | "DROP" | "none";
}

interface Outcome {
  dnat?: string;
  redirect?: number;
  masq: boolean;
  verdict?: "REJECT" | "DROP" | "ACCEPT";
}

const LOOPBACK4 = "127.0.0.0/8";

/** Traces `pkt` through `ipt`; `nodeIPs` are this node's addresses (addrtype LOCAL). */
export function tracePacket(ipt: FakeIPTables, pkt: Packet, nodeIPs: readonly string[]): TraceResult {
  const isLocal = (ip: string) =>
    nodeIPs.includes(ip) || (addressFamily(ip) === "IPv4" ? inCIDR(ip, LOOPBACK4) : ip === "::1");
  const natOutcomes = walk(ipt, "nat", pkt.fromHost ? "OUTPUT" : "PREROUTING", pkt, pkt.dst, isLocal, false);
  const reached: Outcome[] = [];
  let verdict: TraceResult["verdict"] = "none";
  for (const o of natOutcomes) {
    const dst = o.dnat === undefined ? pkt.dst : o.dnat.replace(/^\[?(.*?)\]?:\d+$/, "$1");
    const base = pkt.fromHost ? ["OUTPUT"] : isLocal(dst) ? ["INPUT"] : ["FORWARD"];
    const dstPort = o.dnat === undefined ? pkt.port : Number(o.dnat.slice(o.dnat.lastIndexOf(":") + 1));
    let filtered: Outcome["verdict"];
    for (const chain of base) {
      const fo = walk(ipt, "filter", chain, { ...pkt, port: dstPort }, dst, isLocal, o.masq);
      const v = fo.find((x) => x.verdict === "REJECT" || x.verdict === "DROP");
      if (v) filtered = v.verdict;
    }
    if (filtered === "REJECT" || filtered === "DROP") {
      if (verdict === "none") verdict = filtered;
      continue;
    }
    if (o.dnat !== undefined) reached.push(o);
  }
  const endpoints = [...new Set(reached.map((o) => o.dnat!))].sort();
  const redirects = [...new Set(natOutcomes.flatMap((o) => o.redirect ?? []))].sort((a, b) => a - b);
  const masqCount = reached.filter((o) => o.masq).length;
  return {
    endpoints,
    masq: reached.length > 0 && masqCount === reached.length,
    masqMixed: masqCount > 0 && masqCount < reached.length,
    redirects,
    verdict: endpoints.length > 0 ? "DNAT" : redirects.length > 0 ? "REDIRECT" : verdict,
  };
}

/** Walks `chain`, returning every terminal outcome (a fall-through counts as one). */
function walk(
  ipt: FakeIPTables,
  table: Table,
  chain: Chain,
  pkt: Packet,
  dst: string,
  isLocal: (ip: string) => boolean,
  masq: boolean,
  depth = 0,
): Outcome[] {
  if (depth > 32) throw new Error(`tracer: jump depth exceeded at ${chain}`);
  const rules = ipt.rules(table, chain);
  if (rules === undefined) throw new Error(`tracer: missing chain ${table}/${chain}`);
  // Each state is one path through the chain so far.
  let states: Array<{ masq: boolean }> = [{ masq }];
  const done: Outcome[] = [];
  for (const rule of rules) {
    const next: Array<{ masq: boolean }> = [];
    for (const st of states) {
      const m = match(splitArgs(rule), pkt, dst, isLocal);
      if (m === "no") {
        next.push(st);
        continue;
      }
      if (m === "maybe") next.push(st); // the branch where the probabilistic match fails
      const args = splitArgs(rule);
      const ji = args.indexOf("-j");
      const target = ji >= 0 ? args[ji + 1] : undefined;
      if (target === undefined) {
        next.push(st);
      } else if (target === "MARK") {
        next.push({ masq: true });
      } else if (target === "DNAT") {
        done.push({ dnat: args[args.indexOf("--to-destination") + 1], masq: st.masq });
      } else if (target === "REJECT" || target === "DROP" || target === "ACCEPT") {
        done.push({ masq: st.masq, verdict: target });
      } else if (target === "RETURN") {
        done.push({ masq: st.masq });
      } else if (target === "REDIRECT") {
        done.push({ masq: st.masq, redirect: Number(args[args.indexOf("--to-ports") + 1]) });
      } else if (target === "MASQUERADE") {
        done.push({ masq: true });
      } else {
        for (const o of walk(ipt, table, target, pkt, dst, isLocal, st.masq, depth + 1)) {
          // A sub-chain that fell through (or returned) continues here.
          if (o.dnat === undefined && o.verdict === undefined && o.redirect === undefined) {
            next.push({ masq: o.masq });
          } else done.push(o);
        }
      }
    }
    states = next;
    if (states.length === 0) break;
  }
  return [...done, ...states.map((s) => ({ masq: s.masq }))];
}

/** Returns whether a rule's matches hold for the packet: yes, no, or maybe (probabilistic). */
function match(
  args: string[],
  pkt: Packet,
  dst: string,
  isLocal: (ip: string) => boolean,
): "yes" | "no" | "maybe" {
  let result: "yes" | "maybe" = "yes";
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
        if (!check(inNet(pkt.src, v))) return "no";
        i++;
        break;
      case "-d":
        if (!check(inNet(dst, v))) return "no";
        i++;
        break;
      case "-p":
        if (!check(v === pkt.protocol)) return "no";
        i++;
        break;
      case "--dport":
        if (!check(Number(v) === pkt.port)) return "no";
        i++;
        break;
      case "--dst-type":
        if (!check(v === "LOCAL" && isLocal(dst))) return "no";
        i++;
        break;
      case "--src-type":
        if (!check(v === "LOCAL" && (isLocal(pkt.src) || pkt.fromHost === true))) return "no";
        i++;
        break;
      case "--ctstate":
        // A new connection: NEW matches; INVALID, RELATED, ESTABLISHED, DNAT do not.
        if (!check(v.split(",").includes("NEW"))) return "no";
        i++;
        break;
      case "--mark":
        // Only KUBE-FORWARD and KUBE-POSTROUTING test the mark; new packets carry none.
        if (!check(false)) return "no";
        i++;
        break;
      case "--probability":
        result = "maybe";
        i++;
        break;
      case "--rcheck":
        result = "maybe";
        break;
      case "-m":
      case "--mode":
      case "--comment":
      case "--name":
      case "--seconds":
        i++;
        break;
      case "--reap":
      case "--set":
        break;
      case "-j":
      case "-g":
        return result;
      case "--to-destination":
      case "--to-ports":
      case "--or-mark":
      case "--xor-mark":
      case "--random-fully":
        return result;
      default:
        throw new Error(`tracer: unsupported match ${a} in: ${args.join(" ")}`);
    }
  }
  return result;
}
