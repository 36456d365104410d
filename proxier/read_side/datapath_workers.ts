/**
 * The running proxy's datapath checks, off its event loop: each report's traces run in a worker
 * (`datapath_worker.ts`), one report at a time, each within a deadline counted from its request's
 * arrival. A report whose answer is late, or that the program's stop interrupts, ends its worker and
 * fails with {@linkcode DebugUnavailable} (served as 503 with the reason): a debug request never
 * holds up a sync, `/healthz`, `/livez` or SIGTERM, however large the table.
 * @module
 */
import type { DatapathAnswer } from "../family_view.ts";
import { DebugUnavailable } from "../healthcheck/metrics_server.ts";
import type { ProxyMode } from "../options/config.ts";
import { onAbort } from "../runtime/abort.ts";
import { type Clock, realClock } from "../runtime/clock.ts";
import type { ModeTracer, TraceQuery, TracerConfig, TraceResult } from "../trace/packet.ts";
import {
  checkQuery,
  type DatapathCheck,
  type DatapathSources,
  traceAnswer,
  tracedBy,
} from "./datapath_check.ts";

/** What a worker is asked: one report's connections, traced through the live rules of `mode`. */
export interface DatapathJob {
  readonly mode: ProxyMode;
  readonly config: TracerConfig;
  /** Each kernel tool's deadline (`--kernel-tool-timeout`). */
  readonly toolTimeoutMs: number;
  readonly queries: ReadonlyArray<{ readonly query: TraceQuery; readonly nodeIPs: readonly string[] }>;
}

/** What the worker answers: each query's trace, in order, or why it could not. */
export type DatapathJobAnswer = { readonly results: TraceResult[] } | { readonly error: string };

/** How long a report may take from its request's arrival, queue included. */
export const DATAPATH_DEADLINE_MS = 60_000;

/** Options of {@linkcode DatapathWorkers}. */
export interface DatapathWorkersOptions {
  /** The program's stop: ends the running worker and fails the waiting reports. */
  readonly signal: AbortSignal;
  readonly toolTimeoutMs: number;
  /** Default {@linkcode DATAPATH_DEADLINE_MS}. */
  readonly deadlineMs?: number;
  /** Default the real clock. */
  readonly clock?: Clock;
  /** Starts a worker; default the datapath worker module. */
  readonly spawn?: () => Worker;
}

/** Runs the reports' datapath checks in workers; see the module doc. */
export class DatapathWorkers {
  readonly #o: DatapathWorkersOptions;
  readonly #clock: Clock;
  readonly #deadlineMs: number;
  /** Settles when the last report queued is done (one report at a time). */
  #tail: Promise<unknown> = Promise.resolve();

  /** Starts nothing until a report asks. */
  constructor(o: DatapathWorkersOptions) {
    this.#o = o;
    this.#clock = o.clock ?? realClock;
    this.#deadlineMs = o.deadlineMs ?? DATAPATH_DEADLINE_MS;
  }

  /**
   * Returns the check of a report over this node's live rules (`s.rendered` is not read): the
   * sockets' own answers here, the traces in a worker.
   */
  check(s: Pick<DatapathSources, "tracer" | "config" | "answer">): DatapathCheck {
    return async (asked) => {
      const out: Array<DatapathAnswer | undefined> = asked.map(({ client, view }) =>
        s.answer?.(client.connection, view.family)
      );
      const traced = s.tracer.trace === undefined
        ? []
        : asked.flatMap((_, i) => out[i] === undefined ? [i] : []);
      if (traced.length === 0) return out;
      const results = await this.#run(s.tracer, {
        mode: s.tracer.name as ProxyMode,
        config: { iptablesBackend: s.config.iptablesBackend },
        toolTimeoutMs: this.#o.toolTimeoutMs,
        queries: traced.map((i) => ({
          query: checkQuery(asked[i].client, asked[i].view),
          nodeIPs: asked[i].view.nodeIPs,
        })),
      });
      traced.forEach((i, n) => out[i] = traceAnswer(results[n], tracedBy(s.tracer.name, false)));
      return out;
    };
  }

  /** Runs `job` in a worker after the reports before it, within the deadline. */
  #run(tracer: ModeTracer, job: DatapathJob): Promise<TraceResult[]> {
    const { signal } = this.#o;
    let cancelOuter = () => {};
    let given = false;
    const gone = new Promise<never>((_, reject) => {
      const fail = (why: string) => {
        given = true;
        reject(new DebugUnavailable(why));
      };
      const cancelTimer = this.#clock.setTimer(
        () =>
          fail(
            `the datapath check of the ${tracer.name} rules took longer than ${this.#deadlineMs / 1000} s ` +
              "(a large table, or a busy node); the rules were not read to the end",
          ),
        this.#deadlineMs,
      );
      const stopped = () => fail("the proxy is shutting down");
      onAbort(signal, stopped);
      cancelOuter = () => {
        cancelTimer();
        signal.removeEventListener("abort", stopped);
      };
    });
    const run = this.#tail.then(() => given ? [] : this.#inWorker(job, gone));
    // The next report waits for this one, however it ends.
    this.#tail = run.catch(() => {});
    return Promise.race([run, gone]).finally(cancelOuter);
  }

  /** Posts `job` to a new worker and ends the worker when it answers or `gone` fails first. */
  async #inWorker(job: DatapathJob, gone: Promise<never>): Promise<TraceResult[]> {
    const worker = this.#o.spawn?.() ??
      new Worker(new URL("./datapath_worker.ts", import.meta.url), {
        type: "module",
        name: "datapath-check",
      });
    try {
      const answered = new Promise<TraceResult[]>((resolve, reject) => {
        worker.onmessage = (e: MessageEvent<DatapathJobAnswer>) => {
          const a = e.data;
          if ("error" in a) reject(new Error(`datapath check: ${a.error}`));
          else resolve(a.results);
        };
        worker.onerror = (e) => {
          e.preventDefault();
          reject(new Error(`datapath check: ${e.message}`));
        };
      });
      worker.postMessage(job);
      return await Promise.race([answered, gone]);
    } finally {
      worker.terminate();
    }
  }
}
