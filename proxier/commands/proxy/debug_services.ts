/**
 * `/debug/services` on the running proxy's metrics port: the list of every Service the proxy holds,
 * and `explain`'s report on one, answered from the proxy's own view (here) and this node's live
 * rules (read and traced in a worker, one report at a time, within a deadline: `datapath_workers.ts`).
 * The read side is loaded at the first request: a proxy nobody asks never holds it.
 * @module
 */
import type { Executor } from "../../../iptables/executor.ts";
import type { DebugServices } from "../../healthcheck/metrics_server.ts";
import type { ModeProvider, ProxyModeDefinition } from "../../mode_definition.ts";
import type { ProxyConfig } from "../../options/config.ts";

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
    readonly exec: Executor;
    readonly signal: AbortSignal;
    /** The proxy's last completed sync (ms since the epoch), undefined before the first. */
    readonly lastSyncMs: () => number | undefined;
  },
): DebugServices {
  const { explain } = o.proxier;
  let readSide: ReturnType<typeof load> | undefined;
  async function load() {
    const [{ DatapathWorkers }, report, summary, { nodeSources }] = await Promise.all([
      import("../../read_side/datapath_workers.ts"),
      import("../../read_side/report.ts"),
      import("../../read_side/summary.ts"),
      import("../../read_side/route.ts"),
    ]);
    const workers = new DatapathWorkers({ signal: o.signal, toolTimeoutMs: o.config.kernelToolTimeoutMs });
    const check = workers.check({ tracer: o.mode, config: o.config, answer: explain.answer });
    return { report, summary, check, nodeSources };
  }
  return {
    async list() {
      const { summary } = await (readSide ??= load());
      return { schema: summary.SERVICES_SCHEMA, services: summary.summarizeServices(explain.views()) };
    },
    async service(name, port, client) {
      const { report, check, nodeSources } = await (readSide ??= load());
      const views = explain.views();
      const r = await report.explainService(
        {
          mode: o.mode,
          node: o.nodeName,
          rules: "live",
          views,
          check,
          clientIP: client,
          nodeSources: (dsts) => nodeSources(o.exec, dsts),
          lastSyncMs: o.lastSyncMs,
        },
        name,
        port,
      );
      return r === undefined ? report.whyNoReport(views, name, port) : { report: r };
    },
  };
}
