/**
 * Serving one TCP listener of the userspace proxy: the accept loop that outlives transient errors,
 * the staggered dial over the balancer, the splice, and the garbage collection after a connection
 * burst. Used on the main thread and in each TCP worker (`tcp_worker.ts`) alike.
 * @module
 */
import type { RoundRobinBalancer } from "../../loadbalancer/round_robin.ts";
import { collectGarbage } from "../runtime/gc.ts";
import { dialStaggered } from "./dial.ts";
import { splice, type SpliceLimits, SpliceWatch } from "./tcp_copy.ts";

/**
 * Stagger of the dial attempts of one connection (see dialStaggered): the next endpoint is tried
 * beside a pending one after 1 s, 1 s, 2 s, and the dial gives up after the sum, 10 s: long enough
 * for the kernel's SYN retransmissions at 1, 3 and 7 s, which a backend whose accept queue
 * overflowed in a connection burst needs. Upstream's userspace proxy cancels each try after 250 ms, 500 ms, 1 s, 2 s; on a busy
 * event loop a cancelled try is a false timeout, so tries here race instead.
 */
const DIAL_STAGGER_MS = [1000, 1000, 2000, 6000];
/** How long an endpoint that refused (or never connected) is passed over by new connections. */
const ENDPOINT_DOWN_MS = 5000;
/** Backoff after a failed accept (EMFILE...): from this, doubling... */
const MIN_ACCEPT_BACKOFF_MS = 5;
/** ...to this. */
const MAX_ACCEPT_BACKOFF_MS = 250;
/**
 * A connection burst this large (open TCP connections at once) is followed, once it fell to a
 * quarter, by garbage collections, so the burst's buffers are given back instead of kept.
 */
const BURST_CONNECTIONS = 256;
/**
 * Delays of those collections, so they run once the burst is over rather than at each close. Two:
 * the first frees the connections' heap objects, and the ArrayBuffers they held go back only at
 * the next one.
 */
const BURST_GC_DELAYS_MS = [1000, 3000];
/**
 * Connections ended since the last collection after which the next quiet second (fewer than
 * {@linkcode QUIET_ENDS} ended in it) brings the same collections: a new-connection-per-request
 * load never has a burst of open connections, yet leaves its garbage, kept while idle.
 */
const CHURN_CONNECTIONS = 10_000;
/** Connections ending within one second that still count as quiet. */
const QUIET_ENDS = 100;

/** What serving reports; the main thread logs and counts it. */
export interface ServingEvents {
  /** A dial to `endpoint` failed (refused, or never connected); it is passed over for a while. */
  dialFailed(key: string, endpoint: string, error: string): void;
  /** Accepting (or receiving) failed; `first` for the first failure of a burst. */
  acceptFailed(key: string, error: string, first: boolean): void;
  /** Accepting works again after `failures` failures. */
  acceptRecovered(key: string, failures: number): void;
  /** A client the port does not admit (outside its source ranges) was closed at once. */
  refused?(key: string, client: string): void;
}

/** Which clients a port serves (its `loadBalancerSourceRanges`); absent: every client. */
export type Admit = (clientIP: string) => boolean;

/**
 * The retry state of one accept (or receive) loop: waits after a failure with a doubling backoff,
 * reporting the first failure of a burst and the recovery.
 */
export class AcceptRetry {
  #failures = 0;
  #waitMs = MIN_ACCEPT_BACKOFF_MS;

  /** @param key the service port; @param events where failures and recoveries go */
  constructor(readonly key: string, readonly events: ServingEvents) {}

  /** Reports `e` and waits the backoff; the caller then checks that its listener is still wanted. */
  async failed(e: unknown): Promise<void> {
    this.#failures++;
    this.events.acceptFailed(this.key, (e as Error).message, this.#failures === 1);
    await new Promise((r) => setTimeout(r, this.#waitMs));
    this.#waitMs = Math.min(this.#waitMs * 2, MAX_ACCEPT_BACKOFF_MS);
  }

  /** Called after each success: reports the end of a burst of failures. */
  succeeded(): void {
    if (this.#failures === 0) return;
    this.events.acceptRecovered(this.key, this.#failures);
    this.#failures = 0;
    this.#waitMs = MIN_ACCEPT_BACKOFF_MS;
  }
}

/** Serves TCP listeners: accept, dial an endpoint the balancer picks, splice. */
export class TcpServing {
  readonly #balancer: RoundRobinBalancer;
  readonly #watch?: SpliceWatch;
  readonly #events: ServingEvents;
  #connections = 0;
  #connectionsPeak = 0;
  #gcTimers: ReturnType<typeof setTimeout>[] = [];
  /** Connections ended since the last collection was scheduled, and in the current second. */
  #ended = 0;
  #endedThisSecond = 0;
  #quietCheck: ReturnType<typeof setInterval> | undefined;

  /** Starts nothing; {@linkcode serve} runs a listener's loop. */
  constructor(o: { balancer: RoundRobinBalancer; limits?: SpliceLimits; events: ServingEvents }) {
    this.#balancer = o.balancer;
    if (o.limits !== undefined) this.#watch = new SpliceWatch(o.limits);
    this.#events = o.events;
  }

  /**
   * Accepts on `listener` for service port `key` until `wanted()` turns false after an accept
   * failed (we closed it): other failures (fd limit...) are waited out. A client `admit` refuses is
   * closed at once, as the kernel modes drop it, and reported. Resolves when it stops.
   */
  async serve(listener: Deno.TcpListener, key: string, wanted: () => boolean, admit?: Admit): Promise<void> {
    const retry = new AcceptRetry(key, this.#events);
    for (;;) {
      let conn: Deno.TcpConn;
      try {
        conn = await listener.accept();
      } catch (e) {
        if (!wanted()) return;
        await retry.failed(e);
        if (!wanted()) return;
        continue;
      }
      retry.succeeded();
      if (admit !== undefined) {
        const client = (conn.remoteAddr as Deno.NetAddr).hostname;
        if (!admit(client)) {
          conn.close();
          this.#events.refused?.(key, client);
          continue;
        }
      }
      this.#handle(conn, key);
    }
  }

  /** Cancels pending collections (the owner is closing). */
  close(): void {
    for (const t of this.#gcTimers) clearTimeout(t);
    clearInterval(this.#quietCheck);
  }

  async #handle(client: Deno.TcpConn, key: string): Promise<void> {
    const clientIP = (client.remoteAddr as Deno.NetAddr).hostname;
    const dialled = await dialStaggered({
      pick: (tried) => this.#balancer.next(key, clientIP, { resetAffinity: tried.size > 0, exclude: tried }),
      staggerMs: DIAL_STAGGER_MS,
      onFailure: (ep, e) => {
        // Passive health: new connections pass this endpoint over for a while.
        this.#balancer.markDown(ep, ENDPOINT_DOWN_MS);
        this.#events.dialFailed(key, ep, e.message);
      },
    });
    if (dialled === undefined) {
      try {
        client.close();
      } catch { /* gone */ }
      return;
    }
    const backend = dialled.conn;
    backend.setNoDelay(true);
    client.setNoDelay(true);
    if (++this.#connections > this.#connectionsPeak) this.#connectionsPeak = this.#connections;
    try {
      await splice(client, backend, this.#watch);
    } finally {
      this.#connectionEnded();
    }
  }

  #connectionEnded(): void {
    this.#connections--;
    this.#endedThisSecond++;
    if (++this.#ended >= CHURN_CONNECTIONS && this.#quietCheck === undefined) {
      // One timer while churn goes on, not one per connection.
      this.#quietCheck = setInterval(() => {
        const quiet = this.#endedThisSecond < QUIET_ENDS;
        this.#endedThisSecond = 0;
        if (quiet) this.#scheduleCollections();
      }, 1000);
      Deno.unrefTimer(this.#quietCheck);
    }
    if (this.#connectionsPeak < BURST_CONNECTIONS || this.#connections > this.#connectionsPeak / 4) return;
    this.#scheduleCollections();
  }

  #scheduleCollections(): void {
    this.#connectionsPeak = this.#connections;
    this.#ended = 0;
    clearInterval(this.#quietCheck);
    this.#quietCheck = undefined;
    for (const t of this.#gcTimers) clearTimeout(t);
    this.#gcTimers = BURST_GC_DELAYS_MS.map((ms) => setTimeout(() => collectGarbage({ thorough: true }), ms));
    for (const t of this.#gcTimers) Deno.unrefTimer(t);
  }
}
