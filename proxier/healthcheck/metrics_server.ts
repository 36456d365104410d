/**
 * The metrics port (`--metrics-bind-address`), as upstream's: `/metrics` (Prometheus text),
 * `/healthz` ("ok" while the server runs), `/proxyMode` (the running mode, the documented way to see
 * it), `/configz` (the effective configuration as JSON), and the z-pages `/flagz` (every flag and
 * its value) and `/statusz` (start time, uptime, versions).
 * @module
 */
import type { ProxyMetrics } from "../metrics.ts";

/** What the status pages show; fixed for the life of the process. */
export interface StatusPages {
  readonly mode: string;
  /** The effective configuration (upstream's v1alpha1 fields). */
  readonly configuration: unknown;
  /** Every flag with its value (given, else its default), in `--help` order. */
  readonly flags: ReadonlyArray<readonly [name: string, value: string]>;
  readonly version: string;
  /** The upstream release whose behaviour this program follows (`1.37`). */
  readonly emulates: string;
  /** Process start, ms since the epoch. */
  readonly startedMs: number;
}

const TEXT = { "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff" };
const ZPAGE_WARNING = "Warning: This endpoint is not meant to be machine parseable, has no formatting " +
  "compatibility guarantees and is for debugging purposes only.";

/** Serves `metrics` and `pages` on `addr` until `signal` aborts; returns the server. */
export function serveMetrics(
  metrics: ProxyMetrics,
  addr: { hostname: string; port: number },
  signal: AbortSignal,
  pages?: StatusPages,
): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({ ...addr, signal, onListen() {} }, async (req) => {
    switch (new URL(req.url).pathname) {
      case "/metrics":
        return new Response(await metrics.registry.metrics(), {
          headers: { "content-type": metrics.registry.contentType },
        });
      case "/healthz":
        return new Response("ok", { headers: TEXT });
    }
    if (pages === undefined) return new Response("not found\n", { status: 404 });
    switch (new URL(req.url).pathname) {
      case "/proxyMode":
        return new Response(pages.mode, { headers: TEXT });
      case "/configz":
        return Response.json({ "kubeproxy.config.k8s.io": pages.configuration });
      case "/flagz":
        return new Response(
          `kube-proxy flags\n${ZPAGE_WARNING}\n\n${pages.flags.map(([n, v]) => `${n}=${v}`).join("\n")}\n`,
          { headers: TEXT },
        );
      case "/statusz": {
        const up = Math.floor((Date.now() - pages.startedMs) / 1000);
        return new Response(
          `kube-proxy statusz\n${ZPAGE_WARNING}\n\n` +
            `Started: ${new Date(pages.startedMs).toUTCString()}\n` +
            `Up: ${Math.floor(up / 3600)} hr ${Math.floor((up % 3600) / 60)} min ${up % 60} sec\n` +
            `Deno version: ${Deno.version.deno}\n` +
            `Binary version: kube-proxy-deno ${pages.version}\n` +
            `Emulation version: ${pages.emulates}\n`,
          { headers: TEXT },
        );
      }
    }
    return new Response("not found\n", { status: 404 });
  });
}
