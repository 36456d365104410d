/**
 * What every tracer shares: the question (`TraceQuery`), the packet an interpreter walks
 * (`Packet`), the rules it went through (`TraceStep`) and the answer (`TraceResult`), and the
 * contract a mode's tracer fulfils (`ModeTracer`). The interpreters live beside it
 * (`iptables_walker.ts`, `nft_walker.ts`); each mode's tracer, which reads its rules and calls one
 * of them, is its `proxier/<mode>/trace.ts`; the `trace` command is `commands/trace/`.
 * @module
 */
import type { Executor } from "../../iptables/executor.ts";
import { ipFamily } from "../model/net.ts";
import type { ProxyConfig } from "../options/config.ts";
import type { IPFamily } from "../model/types.ts";

/** What `trace` is asked: one new connection, and where the rules come from. */
export interface TraceQuery {
  readonly src?: string;
  readonly dst: string;
  readonly port: number;
  readonly protocol: "tcp" | "udp" | "sctp";
  /** The source port (`--sport`): rules that hash it (the sh and mh schedulers) depend on it. */
  readonly sport?: number;
  /**
   * Take every index a hash can give, as for `numgen` (`explain`: the endpoints any client can
   * reach), besides the one this packet gets (in the result's picks). Default: that one only.
   */
  readonly exploreHashes?: boolean;
  /**
   * What conntrack makes of the packet: a new connection's first packet (the default), or a packet
   * of no connection it knows (INVALID: an out-of-window TCP segment), which no nat rule sees.
   */
  readonly ctState?: "new" | "invalid";
  /** pod: from a pod on this node; external: from another host; node: from this node itself. */
  readonly from: "pod" | "node" | "external";
  /** A saved (`iptables-save`) or rendered rules file; unset: the live rules of this namespace. */
  readonly rulesFile?: string;
  /** The rules themselves, as such a file holds them (`explain` over what `render` writes); wins over `rulesFile`. */
  readonly rulesText?: string;
  /** What `rulesText` is, for the report (`rendered for node a from objects.yaml`). */
  readonly rulesName?: string;
  readonly output: "text" | "json";
  /** This node's addresses, besides those of its interfaces (for a file from another node). */
  readonly nodeIPs: readonly string[];
  /** Set when the node's addresses were not given but assumed: which, and why (printed). */
  readonly nodeIPsAssumed?: string;
  /** `--proxy-mode` (or the config file's mode) was given; else the mode is told from the rules. */
  readonly modeChosen: boolean;
  /** Set when `src` was not given but assumed: why that address (printed with the packet). */
  readonly srcAssumed?: string;
  /** The interface a packet from a pod or another host comes in on (`--in-interface`). */
  readonly inInterface?: string;
  /** Set when `inInterface` was not given but assumed: why that interface. */
  readonly inInterfaceAssumed?: string;
}

/** A packet opening a connection. */
export interface Packet {
  /** Conntrack's state for it (default `new`); see {@linkcode TraceQuery.ctState}. */
  readonly ctState?: "new" | "invalid";
  readonly src: string;
  readonly dst: string;
  readonly port: number;
  readonly protocol: "tcp" | "udp" | "sctp";
  /** The source port, for rules that hash it; unset: `DEFAULT_SOURCE_PORT` (`options/config.ts`). */
  readonly sport?: number;
  /** Sent by a process on this node (walks OUTPUT instead of PREROUTING). */
  readonly fromHost?: boolean;
  /**
   * The interface a packet from elsewhere came in on (`-i`); a packet this node sends has none. Unset
   * for a packet from elsewhere: an `-i` match stops the path as UNKNOWN rather than guess.
   */
  readonly inInterface?: string;
  /** Set by the tracer between nat and filter: the connection was DNATed (conntrack state DNAT). */
  readonly dnatted?: boolean;
  /** Arrives from a pod on this node (through a bridge port, as `-m physdev --physdev-is-in` sees it). */
  readonly fromPod?: boolean;
  /**
   * The client's earlier connection reached this endpoint (`ip:port`) and was recorded: a
   * `recent --rcheck --name X` matches when chain X DNATs there. Unset: both outcomes are taken.
   */
  readonly returningTo?: string;
}

/** One rule a path went through. */
export interface TraceStep {
  /** The iptables table, `ipvs` for the virtual server a packet reached, or the nft table (`ip kube-proxy`). */
  readonly table: string;
  readonly chain: string;
  /** The rule as `iptables-save` prints it (`-A CHAIN ...`). */
  readonly rule: string;
  /** How many jumps deep (0: the built-in chain). */
  readonly depth: number;
}

/** How one DNAT chose among endpoints on some path: the chain, the way, and the index a hash gave. */
export interface DnatPick {
  readonly chain: string;
  /** The key's last part: `numgen random mod 3`, `jhash ip saddr . th sport mod 16381 seed 0x...`. */
  readonly expr: string;
  /** For a hash: the index (the Maglev slot) it gives for this packet, of `of`. */
  readonly slot?: number;
  readonly of: number;
  /** For a hash: the endpoint at that index; undefined when the map holds none there. */
  readonly endpoint?: string;
}

/** What happened to the packet. */
export interface TraceResult {
  /** `ip:port` of every endpoint some path DNATs to (and filter lets through), sorted. */
  readonly endpoints: string[];
  /** The endpoints with the share of new connections each gets (summing to at most 1). */
  readonly reach: ReadonlyArray<{ readonly endpoint: string; readonly probability: number }>;
  /** Every path that reaches an endpoint is marked for masquerade. */
  readonly masq: boolean;
  /** Some paths masquerade and some do not. */
  readonly masqMixed: boolean;
  /** Local ports some path REDIRECTs to (userspace portals), sorted. */
  readonly redirects: number[];
  /** A `recent --rcheck` (ClientIP affinity) sends a returning client to its previous endpoint. */
  readonly affinity: boolean;
  /**
   * This client has a ClientIP affinity entry the rules hold (a live node's set or map): every path
   * goes to `endpoint`, for `expiresSeconds` more (when the kernel says).
   */
  readonly pinned?: { readonly endpoint: string; readonly expiresSeconds?: number };
  /** Where the rules' affinity entries could not be read (iptables' `recent` lists live in /proc). */
  readonly affinityUnread?: string;
  /**
   * DNAT when an endpoint is reached, REDIRECT when only a local port is; else the filter
   * verdict; UNKNOWN when a path stopped at a match the tracer does not understand.
   */
  readonly verdict: "DNAT" | "REDIRECT" | "REJECT" | "DROP" | "UNKNOWN" | "none";
  /** Every rule some path went through, in the order first reached. */
  readonly path: readonly TraceStep[];
  /** Rules with a match the tracer does not understand (each path reaching one stops there). */
  readonly unsupported: readonly string[];
  /** Every path the filter let through was marked for masquerading in nat (no DNAT needed). */
  readonly marked: boolean;
  /**
   * How each DNAT chose its endpoint, where the rules say (nftables): the scheduler's expression
   * and, for a hash (sh, dh, Maglev), the index or slot this packet gets and its endpoint.
   */
  readonly picks?: readonly DnatPick[];
}

/** What a tracer reads of the configuration: which iptables backend holds the live rules. */
export type TracerConfig = Pick<ProxyConfig, "iptablesBackend">;

/** Where a tracer reads rules from: a rules file's text, or this network namespace (read only). */
export type RulesSource = { readonly text: string } | { readonly exec: Executor; readonly family: IPFamily };

/** What a mode's tracer is given: the tools' executor, the settings it reads, the node's addresses. */
export interface TraceDeps {
  readonly exec: Executor;
  readonly config: TracerConfig;
  readonly nodeIPs: readonly string[];
}

/** What `trace` and `explain` need of a mode (its registry entry provides it). */
export interface ModeTracer {
  readonly name: string;
  /**
   * Traces one new connection through this mode's rules: the live ones (read only) or those of
   * `q.rulesFile` / `q.rulesText`. Absent when the mode has no tracer.
   * @throws {Error} when the rules cannot be read; the message says which.
   */
  trace?(q: TraceQuery, d: TraceDeps): Promise<TraceResult>;
  /**
   * Returns true when `source` holds this mode's rules: a rules file's text, or this network
   * namespace (read only, for `family`). `trace` without `--proxy-mode` traces through the first mode
   * (in registry order) that does.
   */
  recognizes?(source: RulesSource): Promise<boolean>;
}

/** Whether interface `name` matches iptables' `-i` pattern (`veth+` is a prefix; nft writes `veth*`). */
export function interfaceMatches(name: string, pattern: string): boolean {
  const wild = pattern.endsWith("+") || pattern.endsWith("*");
  return wild ? name.startsWith(pattern.slice(0, -1)) : name === pattern;
}

/**
 * Returns the rules `q` names, as text: `rulesText`, else the `rulesFile` read; undefined for the
 * live rules of this namespace.
 */
export async function queryRules(q: TraceQuery): Promise<string | undefined> {
  return q.rulesText ?? (q.rulesFile === undefined ? undefined : await Deno.readTextFile(q.rulesFile));
}

/**
 * Returns the source address of the traced packet when the query has none: the loopback address
 * for a loopback destination, else the first node address of the family. (Live traces from the
 * node resolve it first with the kernel's route lookup, in the `trace` command.)
 */
export function traceSource(q: TraceQuery, family: IPFamily, nodeIPs: readonly string[]): string {
  if (q.src !== undefined) return q.src;
  const loopback = family === "IPv4" ? "127.0.0.1" : "::1";
  if (q.dst === loopback) return loopback;
  return nodeIPs.find((ip) => ipFamily(ip) === family && ip !== loopback) ?? loopback;
}

/**
 * Returns the packet `q` asks about, as the interpreters take it: the source assumed when none is
 * given ({@linkcode traceSource}), the interface it comes in on, whether it comes from a pod.
 */
export function queryPacket(q: TraceQuery, family: IPFamily, nodeIPs: readonly string[]): Packet {
  return {
    src: traceSource(q, family, nodeIPs),
    dst: q.dst,
    port: q.port,
    protocol: q.protocol,
    ...(q.sport === undefined ? {} : { sport: q.sport }),
    fromHost: q.from === "node",
    fromPod: q.from === "pod",
    inInterface: q.inInterface,
    ...(q.ctState === undefined ? {} : { ctState: q.ctState }),
  };
}
