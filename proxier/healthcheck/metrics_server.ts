/**
 * The metrics port (`--metrics-bind-address`), as upstream's: `/metrics` (Prometheus text),
 * `/healthz` ("ok" while the server runs), `/proxyMode` (the running mode, the documented way to see
 * it), `/configz` (the effective configuration as JSON), and the z-pages `/flagz` (every flag and
 * its value) and `/statusz` (start time, uptime, versions). Ours beside them: `/debug/services`
 * and `/debug/services/NAMESPACE/NAME` (`explain`'s JSON), only here, never on the healthz port.
 * @module
 */
import type { ProxyMetrics } from "../metrics.ts";
import { ipFamily } from "../model/net.ts";

/** What the status pages show; fixed for the life of the process but for `conditions`. */
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
  /** The proxy's conditions now (`ProxyHealth.conditions`), each on a line of `/statusz`. */
  readonly conditions?: () => Readonly<Record<string, string>>;
}

/** What `/debug/services` answers (`explain`): kept abstract so this server knows no model. */
export interface DebugServices {
  /** Every Service, one summary each. */
  list(): Promise<unknown>;
  /**
   * The report on `namespace/name` (one port when given; `client`: a real client's address to ask
   * about), or why there is none (no such Service, or no such port: served as 404 with `missing`
   * saying which).
   */
  service(
    name: string,
    port?: string,
    client?: string,
  ): Promise<{ readonly report: unknown } | { readonly missing: string; readonly what: "service" | "port" }>;
}

/** Thrown by a {@linkcode DebugServices} page that cannot answer now; served as 503 with its message. */
export class DebugUnavailable extends Error {
  override readonly name = "DebugUnavailable";
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
  debug?: DebugServices,
): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({ ...addr, signal, onListen() {} }, async (req) => {
    const url = new URL(req.url);
    if (
      debug !== undefined &&
      (url.pathname === "/debug/services" || url.pathname.startsWith("/debug/services/"))
    ) {
      return await serveDebug(debug, url);
    }
    switch (url.pathname) {
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
            `Emulation version: ${pages.emulates}\n` +
            Object.entries(pages.conditions?.() ?? {}).map(([name, c]) => `Condition ${name}: ${c}\n`).join(
              "",
            ),
          { headers: TEXT },
        );
      }
    }
    return new Response("not found\n", { status: 404 });
  });
}

/** Answers `/debug/services` (the list) and `/debug/services/NAMESPACE/NAME[?port=P]` (one report). */
async function serveDebug(debug: DebugServices, url: URL): Promise<Response> {
  const rest = url.pathname.slice("/debug/services".length).replace(/^\//, "");
  if (rest === "") return Response.json(await debug.list());
  const name = decodeURIComponent(rest);
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?\/[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) {
    return Response.json({ error: `not NAMESPACE/NAME: ${JSON.stringify(name)}` }, { status: 400 });
  }
  const client = url.searchParams.get("client") ?? undefined;
  if (client !== undefined && ipFamily(client) === undefined) {
    return Response.json({ error: `client: not an IP address: ${JSON.stringify(client)}` }, { status: 400 });
  }
  try {
    const r = await debug.service(name, url.searchParams.get("port") ?? undefined, client);
    return "missing" in r
      ? Response.json({ error: r.missing, missing: r.what }, { status: 404 })
      : Response.json(r.report);
  } catch (e) {
    return Response.json({ error: (e as Error).message }, {
      status: e instanceof DebugUnavailable ? 503 : 500,
    });
  }
}
