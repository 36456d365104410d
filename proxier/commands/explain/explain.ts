/**
 * `kube-proxy-deno explain NAMESPACE/NAME`: the report of `report.ts`, offline over a file source
 * and the rules `render` writes (no root, nothing touched), or from the proxy running on this node
 * (its `/debug/services` on the metrics port, answered from its own view and the live rules).
 * @module
 */
import type { Executor } from "../../../iptables/executor.ts";
import type { ProxyModeDefinition } from "../../mode_definition.ts";
import type { ProxyConfig } from "../../options/config.ts";
import { renderFileSource } from "../render/render.ts";
import type { Logger } from "../../runtime/logger.ts";
import { datapathCheck } from "./check.ts";
import { formatExplain } from "./format.ts";
import { EXPLAIN_SCHEMA, type ExplainReport, explainService } from "./report.ts";

/** What `explain` is asked (its command line: `cli/explain_flags.ts`). */
export interface ExplainQuery {
  /** `namespace/name`. */
  readonly service: string;
  /** One port, by name or number; undefined: every port. */
  readonly port?: string;
  readonly output: "text" | "json";
  /** `--node-ip`: the rendered node's addresses (offline). */
  readonly nodeIPs?: readonly string[];
}

/** What {@linkcode runExplain} is given. */
export interface ExplainRun {
  readonly mode: ProxyModeDefinition;
  readonly config: ProxyConfig;
  readonly query: ExplainQuery;
  readonly exec: Executor;
  readonly log: Logger;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/**
 * Prints the report (text or JSON) on stdout. Returns the exit code: 0 when the datapath agrees
 * with the model for every client, 1 for a disagreement, a Service the proxy does not hold, or a
 * proxy that cannot be reached; 2 for a mode `explain` cannot render.
 */
export async function runExplain(r: ExplainRun): Promise<number> {
  let report: ExplainReport | undefined;
  if (r.config.source.kind === "file") {
    const rendered = await offline(r);
    if (typeof rendered === "number") return rendered;
    report = rendered;
  } else {
    const asked = await fromRunningProxy(r);
    if (typeof asked === "number") return asked;
    report = asked;
  }
  if (report === undefined) {
    r.stderr(
      `kube-proxy-deno: explain: no Service ${r.query.service} with a proxied port${
        r.query.port === undefined ? "" : ` ${r.query.port}`
      } (absent, headless, or ExternalName)\n`,
    );
    return 1;
  }
  r.stdout(r.query.output === "json" ? JSON.stringify(report, null, 2) + "\n" : formatExplain(report));
  return report.disagreements === 0 ? 0 : 1;
}

/** The report over what `render` writes for the file source's objects. */
async function offline(r: ExplainRun): Promise<ExplainReport | undefined | number> {
  const rendered = await renderFileSource({ ...r, nodeIPs: r.query.nodeIPs });
  if ("error" in rendered) {
    r.stderr(`kube-proxy-deno: explain: ${rendered.error}\n`);
    return rendered.code;
  }
  const { explain } = rendered.renderer;
  return await explainService(
    {
      mode: r.mode,
      node: rendered.nodeName,
      rules: "rendered",
      views: explain.views(),
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
}

/** The report the proxy running on this node answers on its metrics port. */
async function fromRunningProxy(r: ExplainRun): Promise<ExplainReport | undefined | number> {
  const addr = r.config.metricsBindAddress;
  if (addr === undefined) {
    r.stderr(
      "kube-proxy-deno: explain: --metrics-bind-address is empty: no running proxy to ask " +
        "(or give --source=file:PATH to explain rendered rules)\n",
    );
    return 1;
  }
  const host = addr.hostname === "0.0.0.0" ? "127.0.0.1" : addr.hostname === "::" ? "::1" : addr.hostname;
  const url =
    `http://${host.includes(":") ? `[${host}]` : host}:${addr.port}/debug/services/${r.query.service}` +
    (r.query.port === undefined ? "" : `?port=${encodeURIComponent(r.query.port)}`);
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  } catch (e) {
    r.stderr(`kube-proxy-deno: explain: cannot reach the running proxy at ${url}: ${(e as Error).message}\n`);
    return 1;
  }
  if (res.status === 404) {
    await res.body?.cancel();
    return undefined;
  }
  const body = await res.text();
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
