/**
 * `/debug/services` on the running proxy's metrics port: the list of every Service the proxy holds,
 * and `explain`'s report on one, answered from the proxy's own view (here) and this node's live
 * rules (read and traced in a worker, one report at a time, within a deadline: `datapath_workers.ts`).
 * @module
 */
import type { DebugServices } from "../../healthcheck/metrics_server.ts";
import type { ModeProvider, ProxyModeDefinition } from "../../mode_definition.ts";
import type { ProxyConfig } from "../../options/config.ts";
import { DatapathWorkers } from "../../read_side/datapath_workers.ts";
import { explainService, SERVICES_SCHEMA, summarizeServices, whyNoReport } from "../../read_side/report.ts";

/**
 * Returns the pages of `/debug/services` for `proxier`, a proxy of `mode` running on `nodeName`,
 * until `signal` (the program's stop) aborts.
 */
export function debugServices(
  o: {
    readonly config: ProxyConfig;
    readonly nodeName: string;
    readonly mode: ProxyModeDefinition;
    readonly proxier: ModeProvider;
    readonly signal: AbortSignal;
  },
): DebugServices {
  const { explain } = o.proxier;
  const workers = new DatapathWorkers({ signal: o.signal, toolTimeoutMs: o.config.kernelToolTimeoutMs });
  const check = workers.check({ tracer: o.mode, config: o.config, answer: explain.answer });
  return {
    list: () => ({ schema: SERVICES_SCHEMA, services: summarizeServices(explain.views()) }),
    async service(name, port, client) {
      const views = explain.views();
      const report = await explainService(
        { mode: o.mode, node: o.nodeName, rules: "live", views, check, clientIP: client },
        name,
        port,
      );
      return report === undefined ? { missing: whyNoReport(views, name, port) } : { report };
    },
  };
}
