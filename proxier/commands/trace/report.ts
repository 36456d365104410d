/**
 * `trace`'s report: the rules hit, the endpoints with their shares, masquerading and the verdict,
 * as text for people or JSON for scripts.
 * @module
 */
import type { TraceQuery, TraceResult } from "../../trace/packet.ts";
import { DEFAULT_SOURCE_PORT } from "../../options/config.ts";

/** Returns the report of `r` for query `q` in `q.output`'s format, ending in a newline. */
export function formatTrace(q: TraceQuery, r: TraceResult, mode: string): string {
  const masquerade = r.masqMixed ? "some paths" : r.masq;
  if (q.output === "json") {
    return JSON.stringify({
      packet: {
        src: q.src ?? null,
        ...(q.srcAssumed === undefined ? {} : { srcAssumed: q.srcAssumed }),
        ...(q.inInterface === undefined ? {} : { inInterface: q.inInterface }),
        ...(q.inInterfaceAssumed === undefined ? {} : { inInterfaceAssumed: q.inInterfaceAssumed }),
        sport: q.sport ?? DEFAULT_SOURCE_PORT,
        dst: q.dst,
        dport: q.port,
        proto: q.protocol,
        from: q.from,
      },
      mode,
      rules: q.rulesName ?? q.rulesFile ?? "live",
      ...(q.nodeIPsAssumed === undefined ? {} : { nodeIPsAssumed: q.nodeIPsAssumed }),
      verdict: r.verdict,
      endpoints: r.reach,
      masquerade,
      affinity: r.affinity,
      redirects: r.redirects,
      picks: r.picks ?? [],
      path: r.path,
      unsupported: r.unsupported,
    }) + "\n";
  }
  const lines = [
    `packet: ${q.protocol} ${q.src ?? "(this node)"}${
      q.sport === undefined ? "" : `:${q.sport}`
    } -> ${q.dst}:${q.port} from ${q.from}${q.srcAssumed === undefined ? "" : ` (source: ${q.srcAssumed})`}${
      q.inInterface === undefined
        ? ""
        : `, in on ${q.inInterface}${q.inInterfaceAssumed === undefined ? "" : ` (${q.inInterfaceAssumed})`}`
    }`,
    `rules: ${mode} mode, ${q.rulesName ?? q.rulesFile ?? "live"}${
      q.modeChosen ? "" : " (mode told from the rules)"
    }`,
    ...(q.nodeIPsAssumed === undefined ? [] : [`node addresses: ${q.nodeIPsAssumed}`]),
    "path:",
    ...r.path.map((s) => `  ${"  ".repeat(s.depth)}${s.table} ${s.rule}`),
  ];
  for (const p of r.picks ?? []) {
    const how = p.slot !== undefined
      ? `${p.chain.startsWith("mh-") ? "Maglev slot" : "index"} ${p.slot} of ${p.of} -> ${
        p.endpoint ?? "(none there)"
      }${
        q.sport === undefined && p.expr.includes(" sport ")
          ? ` (source port ${DEFAULT_SOURCE_PORT}; --sport sets it)`
          : ""
      }`
      : p.expr.startsWith("numgen inc")
      ? `each of ${p.of} in turn (round robin)`
      : `one of ${p.of} at random`;
    lines.push(`pick: ${p.chain}: ${p.expr}`, `  ${how}`);
  }
  if (r.reach.length > 0) {
    lines.push("endpoints:");
    for (const e of r.reach) lines.push(`  ${e.endpoint}  ${(e.probability * 100).toFixed(1)}%`);
    if (r.affinity) {
      lines.push("  (ClientIP affinity: a returning client goes back to its previous endpoint)");
    }
    lines.push(`masquerade: ${masquerade === true ? "yes" : masquerade === false ? "no" : masquerade}`);
  }
  if (r.redirects.length > 0) lines.push(`redirected to local ports: ${r.redirects.join(", ")}`);
  for (const u of r.unsupported) lines.push(`not understood (the trace stops there): ${u}`);
  const verdict = r.verdict === "none" ? "not a service (no rule of ours matches)" : r.verdict;
  lines.push(`verdict: ${verdict}`);
  return lines.join("\n") + "\n";
}
