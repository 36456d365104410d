/**
 * `/debug/services` on the running proxy's metrics port: the list of every Service the proxy holds,
 * and `explain`'s report on one, answered from the proxy's own view and this node's live rules.
 * @module
 */
import type { Executor } from "../../../iptables/executor.ts";
import type { DebugServices } from "../../healthcheck/metrics_server.ts";
import type { ModeProvider, ProxyModeDefinition } from "../../mode_definition.ts";
import type { ProxyConfig } from "../../options/config.ts";
import { datapathCheck } from "./check.ts";
import { explainService, SERVICES_SCHEMA, summarizeServices } from "./report.ts";

/** Returns the pages of `/debug/services` for `proxier`, a proxy of `mode` running on `nodeName`. */
export function debugServices(
  o: {
    readonly config: ProxyConfig;
    readonly nodeName: string;
    readonly mode: ProxyModeDefinition;
    readonly proxier: ModeProvider;
    readonly exec: Executor;
  },
): DebugServices {
  const { explain } = o.proxier;
  const check = datapathCheck({ tracer: o.mode, exec: o.exec, config: o.config, answer: explain.answer });
  return {
    list: () => ({ schema: SERVICES_SCHEMA, services: summarizeServices(explain.views()) }),
    service: (name, port) =>
      explainService(
        { mode: o.mode, node: o.nodeName, rules: "live", views: explain.views(), check },
        name,
        port,
      ),
  };
}
