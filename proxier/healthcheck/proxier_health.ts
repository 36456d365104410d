/**
 * Proxier health as upstream's ProxyHealthServer (KEP-3836): each IP family's proxier is healthy
 * unless an update has been queued for longer than the health timeout (2 x syncPeriod) without
 * its sync completing; the proxy is healthy when every family is. A family is healthy while it
 * starts (until its first sync completes, it is in no status): a first sync at scale may take
 * longer than the timeout, and a liveness probe failing then would restart it from the beginning.
 * `/healthz` also answers 503 while the Node is going away (a deletionTimestamp, or the cluster
 * autoscaler's `ToBeDeletedByClusterAutoscaler` taint), so load balancers drain it; `/livez`
 * ignores that.
 * `/readyz` (ours, for a DaemonSet's readiness probe) answers 200 once every family's first sync
 * is in the kernel and while none's last sync failed: a rollout whose proxy cannot program the node
 * stops at that node. Conditions beyond the syncs (a source whose changes are refused, Service
 * ports the mode cannot serve) are named in its body and on `/statusz`; those that block readiness
 * turn it 503.
 * @module
 */
import type { V1Node } from "@kubernetes/client-node";
import type { Counter } from "../runtime/prometheus.ts";
import type { Clock } from "../runtime/clock.ts";
import type { IPFamily } from "../model/types.ts";

/** The cluster autoscaler's taint on a node it is about to delete. */
export const TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler";

/** The JSON upstream serves on `/healthz` and `/livez`. */
export interface HealthBody {
  lastUpdated: string;
  currentTime: string;
  /** `/healthz` only. */
  nodeEligible?: boolean;
  healthy: boolean;
  status: Partial<Record<IPFamily, { lastUpdated: string; healthy: boolean }>>;
}

/** Tracks when each family's updates were queued and applied, and the own Node. */
export class ProxyHealth {
  readonly #clock: Clock;
  readonly #timeoutMs: number;
  /** Each family's last completed sync: a family is in the status only once it has one. */
  readonly #lastUpdated = new Map<IPFamily, number>();
  readonly #oldestPending = new Map<IPFamily, number>();
  readonly #syncs = new Map<IPFamily, "waiting" | "synced" | "failing">();
  #waiting: Array<{ readonly test: () => boolean; readonly resolve: () => void }> = [];
  #node?: V1Node;
  readonly #conditions = new Map<string, { readonly message: string; readonly blocksReadiness: boolean }>();

  /** `timeoutMs` is how long a queued update may wait before health fails. */
  constructor(opts: { clock: Clock; timeoutMs: number }) {
    this.#clock = opts.clock;
    this.#timeoutMs = opts.timeoutMs;
  }

  /**
   * Records that `family` has an update waiting for a sync (keeps the oldest such time). It counts
   * against the family's health only once the family has completed a sync.
   */
  queued(family: IPFamily): void {
    if (!this.#oldestPending.has(family)) this.#oldestPending.set(family, this.#clock.now());
  }

  /** Records a completed sync of `family`. */
  updated(family: IPFamily): void {
    this.#lastUpdated.set(family, this.#clock.now());
    this.#oldestPending.delete(family);
    this.#syncs.set(family, "synced");
    this.#wake();
  }

  /**
   * Returns when every family last completed a sync (the oldest family's last, ms by the clock);
   * undefined before each has completed one.
   */
  lastSyncMs(): number | undefined {
    if (this.#syncs.size === 0) return undefined;
    let oldest = Infinity;
    for (const family of this.#syncs.keys()) {
      oldest = Math.min(oldest, this.#lastUpdated.get(family) ?? -Infinity);
    }
    return Number.isFinite(oldest) ? oldest : undefined;
  }

  /**
   * Resolves once every family's first sync is in the kernel, with when the last of them ended (ms
   * by the clock; what follows a sync, such as its garbage collection, is not counted).
   */
  whenSynced(): Promise<number> {
    return this.#when(() => this.#synced()).then(() => Math.max(...this.#lastUpdated.values()));
  }

  /** Resolves once the proxy is first ready: every family's first sync in, no condition blocking readiness. */
  whenReady(): Promise<void> {
    return this.#when(() => this.readiness().ready);
  }

  #when(test: () => boolean): Promise<void> {
    return test() ? Promise.resolve() : new Promise((resolve) => this.#waiting.push({ test, resolve }));
  }

  #wake(): void {
    this.#waiting = this.#waiting.filter((w) => w.test() ? (w.resolve(), false) : true);
  }

  #synced(): boolean {
    return this.#syncs.size > 0 && [...this.#syncs.values()].every((s) => s === "synced");
  }

  /** Records that `family`'s sync loop runs: the proxy is not ready until its first sync is in. */
  expect(family: IPFamily): void {
    if (!this.#syncs.has(family)) this.#syncs.set(family, "waiting");
  }

  /** Records a failed sync of `family`: not ready until one succeeds. */
  failed(family: IPFamily): void {
    this.#syncs.set(family, "failing");
  }

  /**
   * Sets (or, with undefined, clears) condition `name`: said on `/readyz`'s body and `/statusz`;
   * with `blocksReadiness`, `/readyz` answers 503 while it holds.
   */
  setCondition(
    name: string,
    c: { readonly message: string; readonly blocksReadiness: boolean } | undefined,
  ): void {
    if (c === undefined) this.#conditions.delete(name);
    else this.#conditions.set(name, c);
    this.#wake();
  }

  /** The conditions now, by name. */
  conditions(): Record<string, string> {
    return Object.fromEntries([...this.#conditions].map(([n, c]) => [n, c.message]));
  }

  /** Returns `/readyz`'s verdict, each family's state and the conditions (when any). */
  readiness(): {
    ready: boolean;
    status: Partial<Record<IPFamily, string>>;
    conditions?: Record<string, string>;
  } {
    const words = {
      waiting: "waiting for the first sync",
      synced: "synced",
      failing: "the last sync failed",
    };
    const status: Partial<Record<IPFamily, string>> = {};
    for (const [family, state] of this.#syncs) status[family] = words[state];
    const ready = this.#synced() && ![...this.#conditions.values()].some((c) => c.blocksReadiness);
    return this.#conditions.size === 0 ? { ready, status } : { ready, status, conditions: this.conditions() };
  }

  /** The own Node as last seen (undefined: deleted or not known yet). */
  setNode(node: V1Node | undefined): void {
    this.#node = node;
  }

  /**
   * False while the Node is going away: deleted (a deletionTimestamp) or tainted by the cluster
   * autoscaler. A Node not known (yet) is eligible: nothing says it is going away.
   */
  nodeEligible(): boolean {
    const n = this.#node;
    if (n === undefined) return true;
    if (n.metadata?.deletionTimestamp !== undefined && n.metadata?.deletionTimestamp !== null) return false;
    return !(n.spec?.taints ?? []).some((t) => t.key === TO_BE_DELETED_TAINT);
  }

  /** Returns the verdict and the body of `/livez` (and, with `nodeEligible`, of `/healthz`). */
  status(): { healthy: boolean; body: HealthBody } {
    const now = this.#clock.now();
    const iso = (ms: number) => new Date(ms).toISOString();
    const status: HealthBody["status"] = {};
    let healthy = true;
    let last = 0;
    for (const [family, updated] of this.#lastUpdated) {
      const pending = this.#oldestPending.get(family);
      const ok = pending === undefined || now - pending < this.#timeoutMs;
      healthy &&= ok;
      last = Math.max(last, updated);
      status[family] = { lastUpdated: iso(updated), healthy: ok };
    }
    // As upstream: a healthy proxy reports "now" (older clients read lastUpdated as liveness).
    return {
      healthy,
      body: { lastUpdated: iso(healthy ? now : last), currentTime: iso(now), healthy, status },
    };
  }
}

/**
 * Serves `/healthz`, `/livez` and `/readyz` on `hostname:port`; 200 when healthy (ready), 503
 * otherwise, with the JSON body. Returns the server (its `finished` resolves after `signal` aborts).
 */
export function serveHealthz(
  health: ProxyHealth,
  addr: { hostname: string; port: number },
  signal: AbortSignal,
  counters?: { healthz: Counter<"code">; livez: Counter<"code"> },
): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({ ...addr, signal, onListen() {} }, (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/readyz") {
      const r = health.readiness();
      return Response.json(r, {
        status: r.ready ? 200 : 503,
        headers: { "X-Content-Type-Options": "nosniff" },
      });
    }
    if (path !== "/healthz" && path !== "/livez") return new Response("not found\n", { status: 404 });
    const status = health.status();
    let { healthy, body } = status;
    if (path === "/healthz") {
      // Upstream's field order; only /healthz says whether the node may take traffic.
      const { lastUpdated, currentTime, status: families } = body;
      body = {
        lastUpdated,
        currentTime,
        nodeEligible: health.nodeEligible(),
        healthy: body.healthy,
        status: families,
      };
      healthy &&= body.nodeEligible!;
    }
    const code = healthy ? 200 : 503;
    (path === "/healthz" ? counters?.healthz : counters?.livez)?.inc({ code: String(code) });
    return Response.json(body, { status: code, headers: { "X-Content-Type-Options": "nosniff" } });
  });
}
