/**
 * The cluster's report on one Service (schema `kube-proxy-deno.explain-cluster/v1`): per node, its
 * proxy's mode and last sync, what each kind of client on it reaches, whether its kernel agrees with
 * its proxy (the node's own `explain`) and whether its proxy agrees with the API's current objects
 * (`api_view.ts`); the nodes behind or drifted first; every node not asked listed with why.
 * @module
 */
import { comparisonExit, type ExitCode } from "../../../command_definition.ts";
import type { ExplainReport } from "../../../read_side/report.ts";
import type { ApiPort, ApiView } from "./api_view.ts";
import { compareWithApi } from "./api_view.ts";
import type { NodeAnswer, NotAskedReason } from "./ask_node.ts";

/** The schema name the cluster report carries. */
export const CLUSTER_SCHEMA = "kube-proxy-deno.explain-cluster/v1";

/** What a node's proxy is found to be, worst first. */
export type NodeVerdict = "behind-and-drifted" | "behind" | "drifted" | "claimed" | "not-checked" | "agrees";
const VERDICT_ORDER: readonly NodeVerdict[] = [
  "behind-and-drifted",
  "behind",
  "drifted",
  "claimed",
  "not-checked",
  "agrees",
];

/** What one kind of client on the node reaches through one port. */
export interface ReachLine {
  readonly port: string;
  readonly client: string;
  readonly via: string;
  /** The endpoints reached, or REJECT, DROP... */
  readonly reaches: string;
  /** Whose answer: the node's kernel (a trace of its rules, or its socket proxy), or the proxy's model where the kernel gave none. */
  readonly by: "kernel" | "model";
}

/** One asked node. */
export interface NodeEntry {
  readonly node: string;
  readonly pod: string;
  /** The proxy container's readiness (its `/healthz`). */
  readonly ready: boolean;
  readonly mode: string | null;
  readonly lastSync: string | null;
  /** Seconds from the last sync to the report, by the node's own clock. */
  readonly lastSyncAgeSeconds: number | null;
  readonly verdict: NodeVerdict;
  /** The proxy's view against the API's: null when it could not be judged (`note` says why). */
  readonly api: {
    readonly agrees: boolean | null;
    readonly differences: readonly string[];
    /** How long the API's newest change has gone unapplied here (trigger time to the ask), when known. */
    readonly behindSeconds: number | null;
    readonly note: string | null;
  };
  /** The node's kernel against its own proxy (the node's `explain`). */
  readonly kernel: {
    readonly agrees: boolean | null;
    readonly disagreements: number;
    readonly claimed: number;
    readonly notChecked: number;
    readonly details: readonly string[];
  };
  readonly reach: readonly ReachLine[];
}

/** A node (or pod) not asked. */
export interface NotAskedEntry {
  readonly node: string;
  readonly pod: string | null;
  readonly reason: NotAskedReason;
  readonly detail: string;
}

/** The whole report. */
export interface ClusterReport {
  readonly schema: typeof CLUSTER_SCHEMA;
  readonly service: string;
  readonly port: string | null;
  readonly askedAt: string;
  /** Where the proxy pods were looked for. */
  readonly proxies: { readonly namespace: string; readonly selector: string };
  readonly api: {
    readonly ports: readonly ApiPort[];
    readonly newestChange: string | null;
    /** The Service or its slices changed while the nodes were asked. */
    readonly changedWhileAsked: boolean;
    readonly warnings: readonly string[];
  };
  readonly nodes: readonly NodeEntry[];
  readonly notAsked: readonly NotAskedEntry[];
  readonly counts: {
    readonly nodes: number;
    readonly asked: number;
    readonly agree: number;
    readonly behind: number;
    readonly drifted: number;
    readonly claimed: number;
    readonly notChecked: number;
    readonly notAsked: number;
  };
}

/** What the report is made of. */
export interface ClusterInputs {
  readonly service: string;
  readonly port?: string;
  readonly askedAtMs: number;
  readonly proxies: { readonly namespace: string; readonly selector: string };
  /** The API's view before the nodes were asked, and after. */
  readonly before: ApiView;
  readonly after: ApiView;
  readonly answers: readonly NodeAnswer[];
}

const iso = (ms: number | undefined) => ms === undefined ? null : new Date(ms).toISOString();

/** Returns the cluster report. */
export function clusterReport(i: ClusterInputs): ClusterReport {
  const nodes: NodeEntry[] = [];
  const notAsked: NotAskedEntry[] = [];
  for (const a of i.answers) {
    if ("notAsked" in a) {
      notAsked.push({ node: a.node, pod: a.pod?.pod ?? null, reason: a.notAsked, detail: a.detail });
    } else nodes.push(nodeEntry(i, a));
  }
  nodes.sort((a, b) =>
    VERDICT_ORDER.indexOf(a.verdict) - VERDICT_ORDER.indexOf(b.verdict) || a.node.localeCompare(b.node)
  );
  notAsked.sort((a, b) => a.node.localeCompare(b.node));
  const count = (...v: NodeVerdict[]) => nodes.filter((n) => v.includes(n.verdict)).length;
  return {
    schema: CLUSTER_SCHEMA,
    service: i.service,
    port: i.port ?? null,
    askedAt: new Date(i.askedAtMs).toISOString(),
    proxies: i.proxies,
    api: {
      ports: i.after.ports,
      newestChange: iso(i.after.newestTriggerMs),
      changedWhileAsked: i.before.fingerprint !== i.after.fingerprint,
      warnings: i.after.warnings,
    },
    nodes,
    notAsked,
    counts: {
      nodes: new Set(i.answers.map((a) => a.node)).size,
      asked: nodes.length,
      agree: count("agrees"),
      behind: count("behind", "behind-and-drifted"),
      drifted: count("drifted", "behind-and-drifted"),
      claimed: count("claimed"),
      notChecked: count("not-checked"),
      notAsked: notAsked.length,
    },
  };
}

/** The read side's exit code: failed for any node behind, drifted or claimed; notChecked when some node was not asked or checked; else ok. */
export function clusterExit(r: ClusterReport): ExitCode {
  const c = r.counts;
  return comparisonExit(c.behind + c.drifted + c.claimed, c.notAsked + c.notChecked);
}

function nodeEntry(i: ClusterInputs, a: Exclude<NodeAnswer, { notAsked: NotAskedReason }>): NodeEntry {
  const report = "report" in a ? a.report : undefined;
  const api = "holdsNone" in a
    ? { agrees: false, differences: [a.holdsNone] as readonly string[], behindSeconds: null, note: null }
    : apiAgreement(i, report!);
  const kernel = report === undefined
    ? { agrees: null, disagreements: 0, claimed: 0, notChecked: 0, details: [] }
    : kernelAgreement(report);
  const behind = api.agrees === false;
  const drifted = kernel.disagreements > 0;
  const verdict: NodeVerdict = behind && drifted
    ? "behind-and-drifted"
    : behind
    ? "behind"
    : drifted
    ? "drifted"
    : kernel.claimed > 0
    ? "claimed"
    : api.agrees === null || kernel.agrees === null
    ? "not-checked"
    : "agrees";
  const synced = report?.lastSync === null || report === undefined ? undefined : Date.parse(report.lastSync);
  return {
    node: a.node,
    pod: a.pod.pod,
    ready: a.pod.ready,
    mode: report?.mode ?? null,
    lastSync: report?.lastSync ?? null,
    lastSyncAgeSeconds: synced === undefined
      ? null
      : Math.max(0, (Date.parse(report!.reportedAt) - synced) / 1000),
    verdict,
    api,
    kernel,
    reach: report === undefined ? [] : reachOf(report),
  };
}

/**
 * The proxy's view against the API's latest. When the API changed while the nodes were asked, a node
 * that differs is behind only if it lacks a change the API held before the asking began (its newest
 * trigger time older than the API's then); otherwise it may hold a state between the two: not judged.
 */
function apiAgreement(i: ClusterInputs, report: ExplainReport): NodeEntry["api"] {
  const now = compareWithApi(report, i.after);
  if (now.agrees) return { agrees: true, differences: [], behindSeconds: null, note: null };
  const held = report.triggered === null ? undefined : Date.parse(report.triggered);
  const apiNewest = i.before.newestTriggerMs;
  const lacksOlder = apiNewest !== undefined && (held === undefined || held < apiNewest);
  if (i.before.fingerprint !== i.after.fingerprint && !lacksOlder) {
    return {
      agrees: null,
      differences: now.differences,
      behindSeconds: null,
      note:
        "the Service changed while the nodes were asked: this node may hold a state between the two; ask again",
    };
  }
  const newest = i.after.newestTriggerMs;
  const behindSeconds = newest !== undefined && (held === undefined || held < newest)
    ? Math.max(0, (i.askedAtMs - newest) / 1000)
    : null;
  return {
    agrees: false,
    differences: now.differences,
    behindSeconds,
    note: newest === undefined
      ? "the API's slices carry no change trigger time to say how far behind"
      : `the API's newest change is of ${iso(newest)}; this proxy's newest ${
        report.triggered === null ? "is none since it started" : `is of ${report.triggered}`
      }`,
  };
}

function kernelAgreement(report: ExplainReport): NodeEntry["kernel"] {
  const details = report.ports.flatMap((p) =>
    p.clients.flatMap((c) => [
      ...c.disagreement === undefined ? [] : [`${c.label}: ${c.disagreement}`],
      ...c.claimedBy === undefined ? [] : [`${c.label}: ${c.claimedBy}`],
    ])
  );
  const wrong = report.disagreements > 0;
  return {
    agrees: wrong ? false : report.notChecked > 0 ? null : true,
    disagreements: report.disagreements,
    claimed: report.claimed,
    notChecked: report.notChecked,
    details,
  };
}

function reachOf(report: ExplainReport): ReachLine[] {
  return report.ports.flatMap((p) =>
    p.clients.map((c) => {
      const d = c.datapath !== null && c.datapath.verdict !== "UNKNOWN" ? c.datapath : undefined;
      const verdict = d?.verdict ?? c.expected.verdict;
      const endpoints = d?.endpoints ?? c.expected.endpoints;
      return {
        port: `${p.name === "" ? "" : `${p.name} `}${p.port}/${p.protocol} ${p.family}`,
        client: c.label,
        via: c.via,
        reaches: verdict === "DNAT" ? endpoints.join(", ") : verdict,
        by: d === undefined ? "model" : "kernel",
      };
    })
  );
}
