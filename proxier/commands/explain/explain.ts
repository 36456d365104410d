/**
 * `kube-proxy-deno explain NAMESPACE/NAME`: the report of `report.ts`, offline over a file source
 * and the rules `render` writes (no root, nothing touched), or from the proxy running on this node
 * (its `/debug/services` on the metrics port, answered from its own view and the live rules).
 * @module
 */
import {
  type CommandContext,
  CommandFailure,
  comparisonExit,
  EXIT,
  type ExitCode,
} from "../../command_definition.ts";
import { renderFileSource } from "../../read_side/render.ts";
import { datapathCheck } from "../../read_side/datapath_check.ts";
import { DATAPATH_DEADLINE_MS } from "../../read_side/datapath_workers.ts";
import { EXPLAIN_SCHEMA, type ExplainReport, explainService, whyNoReport } from "../../read_side/report.ts";
import type { ExplainQuery } from "./flags.ts";
import { formatExplain } from "./format.ts";

/** What one explain run reads: its query and the program's context. */
interface ExplainRun extends CommandContext {
  readonly query: ExplainQuery;
}

/**
 * Prints the report (text or JSON) on stdout. Returns the comparison's exit code: ok when every
 * client was checked and the datapath agrees with the model for each, failed for a disagreement,
 * notChecked when nothing disagrees but some client could not be checked.
 * @throws {CommandFailure} failed for a Service the proxy does not hold, a source that does not
 * parse, or a proxy that cannot be reached; usage for a port the Service lacks, a mode `explain`
 * cannot render, or an offline run without one node to act for.
 */
export async function runExplain(query: ExplainQuery, context: CommandContext): Promise<ExitCode> {
  if (query.allNodes !== undefined) {
    return await (await import("./cluster/run.ts")).runClusterExplain(
      { ...query, ...query.allNodes },
      context,
    );
  }
  const r: ExplainRun = { ...context, query };
  const report = r.config.source.kind === "file" ? await offline(r) : await fromRunningProxy(r);
  r.stdout(r.query.output === "json" ? JSON.stringify(report, null, 2) + "\n" : formatExplain(report));
  // A client another Service's claim takes is as wrong for this Service as a disagreement.
  return comparisonExit(report.disagreements + report.claimed, report.notChecked);
}

/** The failure for no report: a port the Service lacks is bad input; a Service not held, not found. */
function noReport(why: { readonly missing: string; readonly what: "service" | "port" }): CommandFailure {
  return new CommandFailure(why.what === "port" ? EXIT.usage : EXIT.failed, why.missing);
}

/** The report over what `render` writes for the file source's objects. */
async function offline(r: ExplainRun): Promise<ExplainReport> {
  const rendered = await renderFileSource({
    ...r,
    nodeIPs: r.query.nodeIPs,
    warnAbout: concerns(r.query.service),
  });
  const { explain } = rendered.renderer;
  const views = explain.views();
  const report = await explainService(
    {
      mode: r.mode,
      node: rendered.nodeName,
      rules: "rendered",
      views,
      clientIP: r.query.clientIP,
      check: datapathCheck({
        tracer: r.mode,
        exec: r.exec,
        config: r.config,
        rendered: explain.rendered,
        answer: explain.answer,
      }),
    },
    r.query.service,
    r.query.port,
  );
  if (report === undefined) throw noReport(whyNoReport(views, r.query.service, r.query.port));
  return report;
}

/** Whether an object warning concerns Service `namespace/name`: the Service or one of its slices. */
export function concerns(service: string): (key: string, o: object) => boolean {
  const [namespace, name] = service.split("/");
  return (key, o) => {
    if (key === `Service/${service}`) return true;
    const labels = (o as { metadata?: { labels?: Record<string, string> } }).metadata?.labels;
    return key.startsWith(`EndpointSlice/${namespace}/`) && labels?.["kubernetes.io/service-name"] === name;
  };
}

/** The report the proxy running on this node answers on its metrics port. */
async function fromRunningProxy(r: ExplainRun): Promise<ExplainReport> {
  const addr = r.config.metricsBindAddress;
  const offline = "or explain rendered rules offline: --source=file:PATH (no root)";
  if (addr === undefined) {
    throw new CommandFailure(
      EXIT.failed,
      `--metrics-bind-address is empty: no running proxy to ask (${offline})`,
    );
  }
  const host = addr.hostname === "0.0.0.0" ? "127.0.0.1" : addr.hostname === "::" ? "::1" : addr.hostname;
  const params = new URLSearchParams();
  if (r.query.port !== undefined) params.set("port", r.query.port);
  if (r.query.clientIP !== undefined) params.set("client", r.query.clientIP);
  const url =
    `http://${host.includes(":") ? `[${host}]` : host}:${addr.port}/debug/services/${r.query.service}` +
    (params.size === 0 ? "" : `?${params}`);
  let res: Response;
  try {
    // Longer than the proxy's own deadline for a report: a late one is its 503, not a hang here.
    res = await fetch(url, { signal: AbortSignal.timeout(DATAPATH_DEADLINE_MS + 10_000) });
  } catch (e) {
    throw new CommandFailure(
      EXIT.failed,
      `no running proxy answers at ${url} (${(e as Error).message}). explain asks the proxy on this node ` +
        `at its metrics address, --metrics-bind-address (here ${host}:${addr.port}); give the flags or ` +
        `--config the proxy runs with, ${offline}`,
      { cause: e },
    );
  }
  const body = await res.text();
  if (res.status === 404) {
    const why = (() => {
      try {
        return JSON.parse(body) as { error?: string; missing?: "service" | "port" };
      } catch {
        return {};
      }
    })();
    throw noReport({
      missing: why.error ?? `no Service ${r.query.service} here`,
      what: why.missing === "port" ? "port" : "service",
    });
  }
  if (!res.ok) throw new CommandFailure(EXIT.failed, `${url} answered ${res.status}: ${body.trim()}`);
  const report = JSON.parse(body) as ExplainReport;
  if (report.schema !== EXPLAIN_SCHEMA) {
    throw new CommandFailure(
      EXIT.failed,
      `${url} answered schema ${JSON.stringify(report.schema)}, not ${EXPLAIN_SCHEMA}`,
    );
  }
  return report;
}
