/**
 * What every mode's `kube-proxy-deno trace` shares: the packet's source when none is given, and the
 * report (the rules hit, the endpoints with their shares, masquerading and the verdict, as text for
 * people or JSON for scripts). Each mode's tracer is its `proxier/<mode>/trace.ts`.
 * @module
 */
import type { Executor } from "../iptables/executor.ts";
import type { TraceResult } from "../iptables/rule_walker.ts";
import { ipFamily } from "./net.ts";
import type { TraceQuery } from "./options/flags.ts";
import type { IPFamily } from "./types.ts";

/**
 * Returns the source address of the traced packet when the query has none: the loopback address
 * for a loopback destination, else the first node address of the family. (Live traces from the
 * node resolve it first with the kernel's route lookup: {@linkcode routeSource}.)
 */
export function traceSource(q: TraceQuery, family: IPFamily, nodeIPs: readonly string[]): string {
  if (q.src !== undefined) return q.src;
  const loopback = family === "IPv4" ? "127.0.0.1" : "::1";
  if (q.dst === loopback) return loopback;
  return nodeIPs.find((ip) => ipFamily(ip) === family && ip !== loopback) ?? loopback;
}

/** Returns the report of `r` for query `q` in `q.output`'s format, ending in a newline. */
export function formatTrace(q: TraceQuery, r: TraceResult, mode: string): string {
  const masquerade = r.masqMixed ? "some paths" : r.masq;
  if (q.output === "json") {
    return JSON.stringify({
      packet: {
        src: q.src ?? null,
        ...(q.srcAssumed === undefined ? {} : { srcAssumed: q.srcAssumed }),
        dst: q.dst,
        dport: q.port,
        proto: q.protocol,
        from: q.from,
      },
      mode,
      verdict: r.verdict,
      endpoints: r.reach,
      masquerade,
      affinity: r.affinity,
      redirects: r.redirects,
      path: r.path,
      unsupported: r.unsupported,
    }) + "\n";
  }
  const lines = [
    `packet: ${q.protocol} ${q.src ?? "(this node)"} -> ${q.dst}:${q.port} from ${q.from}${
      q.srcAssumed === undefined ? "" : ` (source: ${q.srcAssumed})`
    }`,
    `rules: ${mode} mode, ${q.rulesFile === undefined ? "live" : q.rulesFile}${
      q.modeChosen ? "" : " (mode told from the rules)"
    }`,
    "path:",
    ...r.path.map((s) => `  ${"  ".repeat(s.depth)}${s.table} ${s.rule}`),
  ];
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

/**
 * Returns the source address the kernel picks for a connection from this node to `dst` (`ip route
 * get`, read only), or undefined when there is no route or no `src` in the answer.
 */
export async function routeSource(exec: Executor, dst: string): Promise<string | undefined> {
  const r = await exec.run("ip", { args: ["-o", "route", "get", dst] }).catch(() => undefined);
  if (r === undefined || r.code !== 0) return undefined;
  const src = / src (\S+)/.exec(r.stdout)?.[1];
  return src !== undefined && ipFamily(src) !== undefined ? src : undefined;
}
