/**
 * Proxier health as upstream's ProxierHealthServer: healthy unless an update has been queued for
 * longer than the health timeout (2 x syncPeriod) without a sync completing.
 * @module
 */
import type { Counter } from "prom-client";
import type { Clock } from "../clock.ts";

/** Tracks when updates were queued and applied. */
export class ProxyHealth {
  readonly #clock: Clock;
  readonly #timeoutMs: number;
  #lastUpdated = 0;
  #oldestPending = 0;

  /** `timeoutMs` is how long a queued update may wait before health fails. */
  constructor(opts: { clock: Clock; timeoutMs: number }) {
    this.#clock = opts.clock;
    this.#timeoutMs = opts.timeoutMs;
  }

  /** Records that an update is waiting for a sync (keeps the oldest such time). */
  queued(): void {
    if (this.#oldestPending === 0) this.#oldestPending = this.#clock.now();
  }

  /** Records a completed sync. */
  updated(): void {
    this.#lastUpdated = this.#clock.now();
    this.#oldestPending = 0;
  }

  /** Returns the health verdict and the JSON body upstream serves. */
  status(): { healthy: boolean; body: { lastUpdated: string; currentTime: string } } {
    const now = this.#clock.now();
    const healthy = this.#oldestPending === 0 || now - this.#oldestPending < this.#timeoutMs;
    return {
      healthy,
      body: {
        lastUpdated: new Date(this.#lastUpdated).toISOString(),
        currentTime: new Date(now).toISOString(),
      },
    };
  }
}

/**
 * Serves `/healthz` and `/livez` on `hostname:port`; 200 when healthy, 503 otherwise, with the
 * JSON body. Returns the server (its `finished` resolves after `signal` aborts).
 */
export function serveHealthz(
  health: ProxyHealth,
  addr: { hostname: string; port: number },
  signal: AbortSignal,
  counters?: { healthz: Counter<"code">; livez: Counter<"code"> },
): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({ ...addr, signal, onListen() {} }, (req) => {
    const path = new URL(req.url).pathname;
    if (path !== "/healthz" && path !== "/livez") return new Response("not found\n", { status: 404 });
    const { healthy, body } = health.status();
    const code = healthy ? 200 : 503;
    (path === "/healthz" ? counters?.healthz : counters?.livez)?.inc({ code: String(code) });
    return Response.json(body, { status: code });
  });
}
