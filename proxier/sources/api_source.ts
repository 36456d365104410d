/**
 * Starting the Kubernetes API source: the one API client of the process and the first lists,
 * requested at once while the informer module (the only part of the client library the program
 * loads, and only for this source) loads.
 * @module
 */
import type { ProxyMetrics } from "../metrics.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import type { ApiAccess } from "./api_access.ts";
import { ApiClient } from "./api_client.ts";
import { type PrefetchedLists, prefetchLists } from "./first_lists.ts";
import type { KubernetesSource } from "./kubernetes.ts";
import { RateLimiter } from "./rate_limiter.ts";

/** `clientConnection:` as the program runs with it. */
export interface ClientConnection {
  readonly qps: number;
  readonly burst: number;
  readonly contentType: string;
}

/**
 * Returns the one API client of the process: every request (lists, watches, Events) passes one
 * `--kube-api-qps` / `--kube-api-burst` limiter and is counted in client-go's rest_client metrics.
 */
export function newApiClient(
  access: ApiAccess,
  c: ClientConnection,
  o: { clock: Clock; metrics: Pick<ProxyMetrics, "restClientRequestsTotal" | "restClientRequestDuration"> },
): ApiClient {
  return new ApiClient(access, {
    limiter: new RateLimiter({ qps: c.qps, burst: c.burst, clock: o.clock }),
    observe: (r) => {
      o.metrics.restClientRequestsTotal.inc({ code: r.code, host: r.host, method: r.method });
      o.metrics.restClientRequestDuration.observe({ host: r.host, verb: r.method }, r.seconds);
    },
  });
}

/**
 * Says which API server is used and how, requests the first lists at once and loads the informer
 * module meanwhile; resolves with both once the module is in.
 */
export async function startApiSource(
  access: ApiAccess,
  api: ApiClient,
  c: ClientConnection,
  o: { nodeName: string; log: Logger },
): Promise<{ prefetched: PrefetchedLists; KubernetesSource: typeof KubernetesSource }> {
  const informer = import("./kubernetes.ts");
  informer.catch(() => {}); // awaited below
  o.log.info("Using the API server", {
    server: access.server,
    from: access.origin,
    contentType: "application/json",
    ...(c.contentType === "application/json"
      ? {}
      : { requested: c.contentType, note: "this program reads JSON only" }),
    qps: c.qps,
    burst: c.burst,
  });
  const prefetched = prefetchLists(api, o.nodeName);
  return { prefetched, KubernetesSource: (await informer).KubernetesSource };
}
