/**
 * The cluster report as text: what the API holds, then the nodes behind or drifted, then those not
 * checked or not asked, then those that agree, and a count line that the exit code follows.
 * @module
 */
import type { ApiPort } from "./api_view.ts";
import type { ClusterReport, NodeEntry, NodeVerdict } from "./cluster_report.ts";

const HEADS: Record<NodeVerdict, string> = {
  "behind-and-drifted": "BEHIND+DRIFTED",
  behind: "BEHIND",
  drifted: "DRIFTED",
  claimed: "CLAIMED",
  "not-checked": "NOT CHECKED",
  agrees: "AGREES",
};

/** Returns the report as text, one block per node. */
export function formatCluster(r: ClusterReport): string {
  const out: string[] = [];
  out.push(
    `Service ${r.service}${
      r.port === null ? "" : ` port ${r.port}`
    }: ${r.counts.nodes} nodes, asked at ${r.askedAt} ` +
      `(proxy pods: ${r.proxies.selector} in ${r.proxies.namespace})`,
  );
  out.push(
    `the API${r.api.newestChange === null ? "" : ` (newest change ${r.api.newestChange})`}:`,
    ...r.api.ports.map((p) => `  ${apiPort(p)}`),
  );
  if (r.api.changedWhileAsked) out.push("  the Service changed while the nodes were asked");
  for (const w of r.api.warnings) out.push(`  warning: ${w}`);
  out.push("");
  const lines = (n: NodeEntry) => nodeBlock(n);
  for (const n of r.nodes.filter((n) => n.verdict !== "agrees" && n.verdict !== "not-checked")) {
    out.push(...lines(n));
  }
  for (const n of r.notAsked) {
    out.push(`NOT ASKED ${n.node}${n.pod === null ? "" : ` (pod ${n.pod})`}: ${n.reason}: ${n.detail}`);
  }
  for (const n of r.nodes.filter((n) => n.verdict === "not-checked")) out.push(...nodeBlock(n));
  // Nodes that agree and reach the same endpoints share one reach block: the text grows by a line a node.
  const groups = new Map<string, NodeEntry[]>();
  for (const n of r.nodes.filter((n) => n.verdict === "agrees")) {
    const key = JSON.stringify(n.reach);
    groups.set(key, [...groups.get(key) ?? [], n]);
  }
  for (const group of groups.values()) {
    out.push(...group.map((n) => head(n)));
    if (group.length > 1) out.push(`  (the ${group.length} nodes above reach the same)`);
    out.push(...reachLines(group[0]));
  }
  const c = r.counts;
  out.push(
    "",
    `${c.nodes} nodes: ${c.agree} agree, ${c.behind} behind the API, ${c.drifted} with a kernel that disagrees, ` +
      `${c.claimed} claimed, ${c.notChecked} not checked, ${c.notAsked} not asked`,
  );
  return out.join("\n") + "\n";
}

function apiPort(p: ApiPort): string {
  const eps = p.endpoints.length === 0
    ? "no endpoints"
    : p.endpoints.map((e) =>
      `${e.endpoint}${e.ready ? "" : e.terminating ? " (terminating)" : " (not ready)"}`
    )
      .join(", ");
  return `${p.name === "" ? "" : `${p.name} `}${p.port}/${p.protocol} ${p.family} ${p.clusterIP}` +
    `${p.nodePort === null ? "" : ` NodePort ${p.nodePort}`}: ${eps}`;
}

function head(n: NodeEntry): string {
  const age = n.lastSyncAgeSeconds === null
    ? "no sync yet"
    : `last sync ${seconds(n.lastSyncAgeSeconds)} ago`;
  return `${HEADS[n.verdict]} ${n.node} (pod ${n.pod}${n.ready ? "" : ", not ready"}${
    n.mode === null ? "" : `, ${n.mode}`
  }, ${age})`;
}

function nodeBlock(n: NodeEntry): string[] {
  const out = [head(n)];
  if (n.api.agrees === false) {
    out.push(
      `  behind the API${
        n.api.behindSeconds === null ? "" : ` for at least ${seconds(n.api.behindSeconds)}`
      }` +
        `${n.api.note === null ? "" : `: ${n.api.note}`}`,
      ...n.api.differences.map((d) => `    ${d}`),
    );
  } else if (n.api.agrees === null && n.api.note !== null) {
    out.push(`  not compared with the API: ${n.api.note}`);
  }
  if (n.kernel.disagreements > 0) {
    out.push(`  its kernel disagrees with its proxy on ${n.kernel.disagreements} clients:`);
  }
  if (n.kernel.details.length > 0) out.push(...n.kernel.details.map((d) => `    ${d}`));
  if (n.kernel.notChecked > 0) out.push(`  ${n.kernel.notChecked} clients not checked on this node`);
  return [...out, ...reachLines(n)];
}

function reachLines(n: NodeEntry): string[] {
  const out: string[] = [];
  let port = "";
  for (const r of n.reach) {
    if (r.port !== port) out.push(`  ${port = r.port}:`);
    out.push(
      `    ${r.client} -> ${r.reaches}${
        r.by === "model" ? " (the proxy's model: the kernel gave no answer)" : ""
      }`,
    );
  }
  return out;
}

function seconds(s: number): string {
  if (s < 120) return `${Math.round(s)}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m${Math.round(s % 60)}s`;
  return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
}
