/**
 * `kube-proxy-deno explain NAMESPACE/NAME`: the report of `report.ts`, offline over a file source
 * and the rules `render` writes (no root, nothing touched), or from the proxy running on this node
 * (its `/debug/services` on the metrics port, answered from its own view and the live rules).
 * @module
 */
import type { CommandContext } from "../../command_definition.ts";
import { renderFileSource } from "../../read_side/render.ts";
import { datapathCheck } from "../../read_side/datapath_check.ts";
import { DATAPATH_DEADLINE_MS } from "../../read_side/datapath_workers.ts";
import { EXPLAIN_SCHEMA, type ExplainReport, explainService, whyNoReport } from "../../read_side/report.ts";
import type { ExplainQuery } from "./flags.ts";
import { formatExplain } from "./format.ts";
import { comparisonExit } from "../../read_side/exit_codes.ts";

/** What one explain run reads: its query and the program's context. */
interface ExplainRun extends CommandContext {
  readonly query: ExplainQuery;
}

/**
 * Prints the report (text or JSON) on stdout. Returns the exit code: 0 when every client was
 * checked and the datapath agrees with the model for each, 1 for a disagreement, a Service or port
 * the proxy does not hold, a source that does not parse, or a proxy that cannot be reached; 2 for a
 * mode `explain` cannot render or an offline run without one node to act for; 3 when nothing
 * disagrees but some client could not be checked (`read_side/exit_codes.ts`).
 */
export async function runExplain(query: ExplainQuery, context: CommandContext): Promise<number> {
  const r: ExplainRun = { ...context, query };
  const got = r.config.source.kind === "file" ? await offline(r) : await fromRunningProxy(r);
  if (typeof got === "number") return got;
  if ("missing" in got) {
    r.stderr(`kube-proxy-deno: explain: ${got.missing}\n`);
    return 1;
  }
  const report = got;
  r.stdout(r.query.output === "json" ? JSON.stringify(report, null, 2) + "\n" : formatExplain(report));
  return comparisonExit(report.disagreements, report.notChecked);
}

/** The report over what `render` writes for the file source's objects. */
async function offline(r: ExplainRun): Promise<ExplainReport | { missing: string } | number> {
  const rendered = await renderFileSource({
    ...r,
    nodeIPs: r.query.nodeIPs,
    warnAbout: concerns(r.query.service),
  });
  if ("error" in rendered) {
    r.stderr(`kube-proxy-deno: explain: ${rendered.error}\n`);
    return rendered.code;
  }
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
  return report ?? { missing: whyNoReport(views, r.query.service, r.query.port) };
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
async function fromRunningProxy(r: ExplainRun): Promise<ExplainReport | { missing: string } | number> {
  const addr = r.config.metricsBindAddress;
  const offline = "or explain rendered rules offline: --source=file:PATH (no root)";
  if (addr === undefined) {
    r.stderr(
      `kube-proxy-deno: explain: --metrics-bind-address is empty: no running proxy to ask (${offline})\n`,
    );
    return 1;
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
    r.stderr(
      `kube-proxy-deno: explain: no running proxy answers at ${url} (${
        (e as Error).message
      }). explain asks ` +
        `the proxy on this node at its metrics address, --metrics-bind-address (here ${host}:${addr.port}); give ` +
        `the flags or --config the proxy runs with, ${offline}\n`,
    );
    return 1;
  }
  const body = await res.text();
  if (res.status === 404) {
    const error = (() => {
      try {
        return (JSON.parse(body) as { error?: string }).error;
      } catch {
        return undefined;
      }
    })();
    return { missing: error ?? `no Service ${r.query.service} here` };
  }
  if (!res.ok) {
    r.stderr(`kube-proxy-deno: explain: ${url} answered ${res.status}: ${body.trim()}\n`);
    return 1;
  }
  const report = JSON.parse(body) as ExplainReport;
  if (report.schema !== EXPLAIN_SCHEMA) {
    r.stderr(
      `kube-proxy-deno: explain: ${url} answered schema ${
        JSON.stringify(report.schema)
      }, not ${EXPLAIN_SCHEMA}\n`,
    );
    return 1;
  }
  return report;
}
