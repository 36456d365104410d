/**
 * How `explain` asks the datapath: a `trace` of the client's connection through the kernel's rules
 * (this node's, read only, or the text `render` writes); where the mode's own sockets decide (the
 * userspace mode, nftables' loopback NodePorts), their answer.
 * @module
 */
import type { Executor } from "../../../iptables/executor.ts";
import type { Connection, DatapathAnswer, FamilyView } from "../../family_view.ts";
import type { ProxyConfig } from "../../options/config.ts";
import type { ModeTracer, TraceQuery } from "../../trace/packet.ts";
import type { IPFamily } from "../../types.ts";
import type { Client } from "./clients.ts";

/** What {@linkcode datapathCheck} reads. */
export interface DatapathSources {
  readonly tracer: ModeTracer;
  readonly exec: Executor;
  readonly config: ProxyConfig;
  /** The rules of `family` as `render` wrote them; undefined: this node's live rules. */
  readonly rendered?: (family: IPFamily) => string | undefined;
  /** Where the mode's own sockets send a connection, where they decide (`ExplainSource.answer`). */
  readonly answer?: (c: Connection, family: IPFamily) => DatapathAnswer | undefined;
}

/** Returns `explain`'s datapath check over `s`; see the module doc. */
export function datapathCheck(
  s: DatapathSources,
): (client: Client, view: FamilyView) => Promise<DatapathAnswer | undefined> {
  return async (client, view) => {
    const c = client.connection;
    const own = s.answer?.(c, view.family);
    if (own !== undefined) return own;
    if (s.tracer.trace === undefined) return undefined;
    const q: TraceQuery = {
      src: c.src,
      dst: c.dst,
      port: c.port,
      protocol: c.protocol,
      from: client.kind,
      inInterface: c.inInterface,
      rulesText: s.rendered?.(view.family),
      output: "json",
      nodeIPs: view.nodeIPs,
      modeChosen: true,
      // Every endpoint a hash may give (any client's), as the model lists them; this client's pick
      // is told beside.
      exploreHashes: true,
    };
    const r = await s.tracer.trace(q, { exec: s.exec, config: s.config, nodeIPs: view.nodeIPs });
    return {
      verdict: r.verdict === "REDIRECT" ? "UNKNOWN" : r.verdict,
      endpoints: r.endpoints,
      masquerade: r.verdict === "DNAT" && !r.masqMixed ? r.masq : undefined,
      rules: r.path.map((p) => p.rule),
      ...(r.picks?.some((p) => p.slot !== undefined)
        ? {
          picks: r.picks.filter((p) => p.slot !== undefined).map((p) =>
            `${p.chain.startsWith("mh-") ? "Maglev slot" : "index"} ${p.slot} of ${p.of} (${p.expr}) -> ${
              p.endpoint ?? "none"
            }`
          ),
        }
        : {}),
      by: `the ${s.rendered === undefined ? "" : "rendered "}${s.tracer.name} rules`,
      ...(r.unsupported.length > 0 ? { note: `the tracer stopped at: ${r.unsupported.join("; ")}` } : {}),
    };
  };
}
