/**
 * The Prometheus endpoint: `GET /metrics` on `--metrics-bind-address`.
 * @module
 */
import type { ProxyMetrics } from "../metrics.ts";

/** Serves `metrics` on `addr` until `signal` aborts; returns the server. */
export function serveMetrics(
  metrics: ProxyMetrics,
  addr: { hostname: string; port: number },
  signal: AbortSignal,
): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({ ...addr, signal, onListen() {} }, async (req) => {
    if (new URL(req.url).pathname !== "/metrics") return new Response("not found\n", { status: 404 });
    return new Response(await metrics.registry.metrics(), {
      headers: { "content-type": metrics.registry.contentType },
    });
  });
}
