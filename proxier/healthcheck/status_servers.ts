/**
 * The proxy's own HTTP servers: `/healthz` and `/livez` on `--healthz-bind-address`, `/metrics` and
 * the z-pages on `--metrics-bind-address`, each kept listening (`listener.ts`).
 * @module
 */
import type { ProxyMetrics } from "../metrics.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import { keepListening } from "./listener.ts";
import { type DebugServices, serveMetrics, type StatusPages } from "./metrics_server.ts";
import { type ProxyHealth, serveHealthz } from "./proxier_health.ts";

/** What {@linkcode serveStatus} is given. */
export interface StatusServers {
  /** Where `/healthz` listens; undefined: disabled. */
  readonly healthz?: { hostname: string; port: number };
  /** Where `/metrics` listens; undefined: disabled. */
  readonly metricsAddress?: { hostname: string; port: number };
  readonly health: ProxyHealth;
  readonly metrics: ProxyMetrics;
  readonly pages: StatusPages;
  /** `/debug/services` on the metrics port; undefined: not served. */
  readonly debug?: DebugServices;
  readonly signal: AbortSignal;
  readonly log: Logger;
  readonly clock: Clock;
  /** `--bind-address-hard-fail`: a server that cannot bind throws instead of retrying. */
  readonly hardFail: boolean;
  /** Called (once per distinct error) with the Event reason and note when a server cannot bind. */
  readonly onFailure: (reason: string, note: string) => void;
}

/**
 * Starts both servers, adding to `tasks` one promise per server started, settling when it has
 * finished (so after a throw the caller still holds the one already started).
 * @throws {ListenError} when one cannot bind and `hardFail` is set.
 */
export function serveStatus(o: StatusServers, tasks: Promise<unknown>[]): void {
  const listen = { signal: o.signal, log: o.log, clock: o.clock, hardFail: o.hardFail };
  const hz = o.healthz;
  if (hz !== undefined) {
    tasks.push(keepListening({
      ...listen,
      server: "Healthz",
      address: hz,
      onFailure: (note) => o.onFailure("FailedToStartProxierHealthcheck", note),
      start: () =>
        serveHealthz(o.health, hz, o.signal, {
          healthz: o.metrics.healthzTotal,
          livez: o.metrics.livezTotal,
        }),
    }));
  }
  const m = o.metricsAddress;
  if (m !== undefined) {
    tasks.push(keepListening({
      ...listen,
      server: "Metrics",
      address: m,
      onFailure: (note) => o.onFailure("FailedToStartMetricServer", note),
      start: () => serveMetrics(o.metrics, m, o.signal, o.pages, o.debug),
    }));
  }
}
