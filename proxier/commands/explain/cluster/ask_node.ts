/**
 * One proxy pod asked through the API: `kube-proxy-deno explain NAMESPACE/NAME --output=json` run in
 * its container (the in-pod `explain` asks the proxy on its node at its metrics address: read only,
 * within the proxy's own report deadline), and what came of it: the node's report, or why the node
 * could not be asked. A container without `kube-proxy-deno` is asked `kube-proxy --version` (which
 * only prints), to name upstream kube-proxy when that is what it runs.
 * @module
 */
import { EXPLAIN_SCHEMA, type ExplainReport } from "../../../read_side/report.ts";
import { type ExecAccess, type ExecLimits, type ExecOutcome, podExec } from "./pod_exec.ts";
import type { ProxyPod } from "./proxy_pods.ts";

/** Why a node was not asked, or its answer not read. */
export type NotAskedReason =
  | "no-pod"
  | "not-ready"
  | "forbidden"
  | "gone"
  | "timed-out"
  | "too-large"
  | "upstream"
  | "not-this-program"
  | "no-proxy-answer"
  | "failed";

/** A node's answer: its proxy's report, or why there is none. */
export type NodeAnswer =
  | {
    readonly node: string;
    readonly pod: ProxyPod;
    readonly report: ExplainReport;
  }
  | {
    readonly node: string;
    readonly pod: ProxyPod;
    /** The proxy answered that it holds no such Service or port (the API has them: it is behind). */
    readonly holdsNone: string;
  }
  | {
    readonly node: string;
    readonly pod?: ProxyPod;
    readonly notAsked: NotAskedReason;
    readonly detail: string;
  };

/** What the in-pod `explain` is asked. */
export interface NodeQuestion {
  readonly service: string;
  readonly port?: string;
  readonly clientIP?: string;
}

/** The binary the in-pod `explain` runs as (the image's; `kube-proxy` may be upstream's). */
export const PROGRAM = "kube-proxy-deno";

/** Returns the in-pod command line for `pod`. */
export function inPodCommand(q: NodeQuestion, pod: ProxyPod): string[] {
  return [
    PROGRAM,
    "explain",
    q.service,
    "--output=json",
    ...q.port === undefined ? [] : [`--port=${q.port}`],
    ...q.clientIP === undefined ? [] : [`--client-ip=${q.clientIP}`],
    ...pod.proxyFlags,
  ];
}

/** Asks `pod` through the API; never throws for what the pod, the node or the API does. */
export async function askNode(
  api: ExecAccess,
  namespace: string,
  pod: ProxyPod,
  q: NodeQuestion,
  limits: ExecLimits,
): Promise<NodeAnswer> {
  const target = { namespace, pod: pod.pod, container: pod.container };
  const out = await podExec(api, { ...target, command: inPodCommand(q, pod) }, limits);
  const base = { node: pod.node, pod };
  if (out.kind === "exited") return answerOf(base, q, out);
  if (
    out.kind === "not-started" && /executable file not found|no such file or directory/i.test(out.message)
  ) {
    const version = await podExec(api, { ...target, command: ["kube-proxy", "--version"] }, limits);
    const upstream = version.kind === "exited" && version.exitCode === 0 &&
      /^Kubernetes v\d/.test(version.stdout.trim());
    return upstream
      ? {
        ...base,
        notAsked: "upstream",
        detail: `runs upstream kube-proxy (${version.stdout.trim()}), not ${PROGRAM}`,
      }
      : {
        ...base,
        notAsked: "not-this-program",
        detail: `its container (image ${pod.image || "unknown"}) has no ${PROGRAM}: ${out.message}`,
      };
  }
  return { ...base, ...refusal(out, limits) };
}

function answerOf(
  base: { node: string; pod: ProxyPod },
  q: NodeQuestion,
  out: Extract<ExecOutcome, { kind: "exited" }>,
): NodeAnswer {
  const said = lastLine(out.stderr);
  try {
    const report = JSON.parse(out.stdout) as ExplainReport;
    if (report?.schema === EXPLAIN_SCHEMA) return { ...base, report };
    if (typeof report?.schema === "string") {
      return {
        ...base,
        notAsked: "failed",
        detail: `its explain answered schema ${report.schema}, not ${EXPLAIN_SCHEMA}`,
      };
    }
  } catch { /* no report: stderr says why */ }
  // The in-pod explain's own words for a Service or port its proxy does not hold (whyNoReport).
  if (said.includes(`no Service ${q.service} with a proxied port here`) || said.includes(`has no port`)) {
    return { ...base, holdsNone: said };
  }
  if (said.includes("no running proxy answers")) {
    return { ...base, notAsked: "no-proxy-answer", detail: said };
  }
  return {
    ...base,
    notAsked: "failed",
    detail: `its explain exited ${out.exitCode}: ${said || "(nothing said)"}`,
  };
}

function refusal(
  out: Exclude<ExecOutcome, { kind: "exited" }>,
  limits: ExecLimits,
): { notAsked: NotAskedReason; detail: string } {
  switch (out.kind) {
    case "refused":
      if (out.status === 403) {
        return { notAsked: "forbidden", detail: `the API refuses the exec (403): ${out.message}` };
      }
      if (out.status === 404) {
        return { notAsked: "gone", detail: `the API has no such pod now: ${out.message}` };
      }
      return {
        notAsked: "failed",
        detail: `the API answered ${out.status} ${out.reason}: ${out.message}`.trim(),
      };
    case "timed-out":
      return { notAsked: "timed-out", detail: `no answer within ${limits.deadlineMs / 1000} s` };
    case "too-large":
      return { notAsked: "too-large", detail: `its answer passed ${out.limit} bytes; it was cut off` };
    case "not-started":
      return { notAsked: "failed", detail: `the exec did not start: ${out.message}` };
    case "unreachable":
      return { notAsked: "failed", detail: out.message };
  }
}

/** The last line the in-pod explain wrote, without the program's prefix: the failure's message. */
function lastLine(stderr: string): string {
  const line = stderr.trim().split("\n").at(-1) ?? "";
  return line.replace(/^kube-proxy-deno: explain: /, "").trim();
}
