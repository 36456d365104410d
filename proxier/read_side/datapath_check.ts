/**
 * How `explain` asks the datapath: a `trace` of each client's connection through the kernel's rules
 * (this node's, read only, or the text `render` writes); where the mode's own sockets decide (the
 * userspace mode, nftables' loopback NodePorts), their answer. One report's clients are asked
 * together, so the rules are read and parsed once for all of them.
 * @module
 */
import type { Executor } from "../../iptables/executor.ts";
import { MemoExecutor } from "../../iptables/memo_executor.ts";
import type { Connection, DatapathAnswer, FamilyView } from "../family_view.ts";
import type { ModeTracer, TraceQuery, TracerConfig, TraceResult } from "../trace/packet.ts";
import type { IPFamily } from "../model/types.ts";
import { ipFamily } from "../model/net.ts";
import type { Client } from "./clients.ts";

/** One client whose connection the datapath is asked about, in its family's view. */
export interface CheckAsked {
  readonly client: Client;
  readonly view: FamilyView;
}

/** Returns the datapath's answer to each of `asked`, in order; undefined where it cannot be asked. */
export type DatapathCheck = (asked: readonly CheckAsked[]) => Promise<Array<DatapathAnswer | undefined>>;

/** What {@linkcode datapathCheck} reads. */
export interface DatapathSources {
  readonly tracer: ModeTracer;
  readonly exec: Executor;
  readonly config: TracerConfig;
  /** The rules of `family` as `render` wrote them; undefined: this node's live rules. */
  readonly rendered?: (family: IPFamily) => string | undefined;
  /** Where the mode's own sockets send a connection, where they decide (`ExplainSource.answer`). */
  readonly answer?: (c: Connection, family: IPFamily) => DatapathAnswer | undefined;
  /**
   * The node's addresses beyond its view's (a live node's other interfaces): local to the rules
   * (`addrtype LOCAL`) as the kernel's are.
   */
  readonly localAddresses?: readonly string[];
}

/** The node's addresses of `view`'s family: the view's, and `more` of the family. */
export function localAddressesOf(view: FamilyView, more: readonly string[] = []): readonly string[] {
  const extra = more.filter((ip) => !view.nodeIPs.includes(ip) && ipFamily(ip) === view.family);
  return extra.length === 0 ? view.nodeIPs : [...view.nodeIPs, ...extra];
}

/** Returns the `trace` query for `client`'s connection (`rulesText`: rendered rules; else the live ones). */
export function checkQuery(
  client: Client,
  view: FamilyView,
  rulesText?: string,
  nodeIPs: readonly string[] = view.nodeIPs,
): TraceQuery {
  const c = client.connection;
  return {
    src: c.src,
    dst: c.dst,
    port: c.port,
    protocol: c.protocol,
    from: client.kind,
    inInterface: c.inInterface,
    rulesText,
    output: "json",
    nodeIPs,
    modeChosen: true,
    // Every endpoint a hash may give (any client's), as the model lists them; this client's pick
    // is told beside.
    exploreHashes: true,
  };
}

/** Returns the datapath answer a trace `r` gives; `by` names what was traced (`the iptables rules`). */
export function traceAnswer(r: TraceResult, by: string): DatapathAnswer {
  const hashed = r.picks?.filter((p) => p.slot !== undefined) ?? [];
  return {
    verdict: r.verdict === "REDIRECT" ? "UNKNOWN" : r.verdict,
    endpoints: r.endpoints,
    masquerade: r.verdict === "DNAT" && !r.masqMixed ? r.masq : undefined,
    rules: r.path.map((p) => p.rule),
    ...(hashed.length > 0
      ? {
        picks: hashed.map((p) =>
          `${p.chain.startsWith("mh-") ? "Maglev slot" : "index"} ${p.slot} of ${p.of} (${p.expr}) -> ${
            p.endpoint ?? "none"
          }`
        ),
      }
      : {}),
    by,
    ...(r.pinned === undefined ? {} : { pinned: r.pinned }),
    ...(r.unsupported.length > 0
      ? { note: `the tracer stopped at: ${r.unsupported.join("; ")}` }
      : r.affinityUnread !== undefined
      ? { note: r.affinityUnread }
      : {}),
  };
}

/** What checked a trace's answer: `the iptables rules`, `the rendered nftables rules`. */
export function tracedBy(tracer: string, rendered: boolean): string {
  return `the ${rendered ? "rendered " : ""}${tracer} rules`;
}

/**
 * Returns `explain`'s datapath check over `s`, in this thread: the sockets' own answers, else a
 * trace of each connection (the live rules read once for the whole batch).
 */
export function datapathCheck(s: DatapathSources): DatapathCheck {
  return async (asked) => {
    const exec = new MemoExecutor(s.exec);
    const out: Array<DatapathAnswer | undefined> = [];
    for (const { client, view } of asked) {
      const own = s.answer?.(client.connection, view.family);
      if (own !== undefined || s.tracer.trace === undefined) {
        out.push(own);
        continue;
      }
      const text = s.rendered?.(view.family);
      const by = tracedBy(s.tracer.name, s.rendered !== undefined);
      const nodeIPs = localAddressesOf(view, s.localAddresses);
      try {
        const r = await s.tracer.trace(checkQuery(client, view, text, nodeIPs), {
          exec,
          config: s.config,
          nodeIPs,
        });
        out.push(traceAnswer(r, by));
      } catch (e) {
        // Rules that cannot be read (no listing of this family) answer nothing: not checked.
        out.push({ verdict: "UNKNOWN", endpoints: [], rules: [], by, note: (e as Error).message });
      }
    }
    return out;
  };
}

/**
 * Returns whether the datapath drops a forwarded packet conntrack finds INVALID (an out-of-window
 * TCP segment toward a pod on another node), traced through its rules; undefined when the view
 * names no such pod or the rules cannot say.
 */
export async function dropsInvalid(s: DatapathSources, view: FamilyView): Promise<boolean | undefined> {
  if (s.tracer.trace === undefined) return undefined;
  const remote = [...view.endpoints.values()].flat().find((e) => !e.isLocal && !view.nodeIPs.includes(e.ip));
  if (remote === undefined) return undefined;
  const q: TraceQuery = {
    src: view.family === "IPv4" ? "203.0.113.9" : "2001:db8::9",
    dst: remote.ip,
    port: remote.port,
    protocol: "tcp",
    from: "external",
    inInterface: "uplink0",
    rulesText: s.rendered?.(view.family),
    output: "json",
    nodeIPs: view.nodeIPs,
    modeChosen: true,
    ctState: "invalid",
  };
  try {
    const r = await s.tracer.trace(q, { exec: s.exec, config: s.config, nodeIPs: view.nodeIPs });
    return r.verdict === "UNKNOWN" ? undefined : r.verdict === "DROP";
  } catch {
    return undefined;
  }
}
