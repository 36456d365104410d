/**
 * A bounded-frequency runner, as upstream's BoundedFrequencyRunner: runs a function when asked,
 * at most `burst` times back to back and then once per `minInterval`, at least once per
 * `maxInterval`, and again after a failure with exponential backoff.
 * @module
 */
import type { Clock } from "../runtime/clock.ts";
import { onAbort } from "../runtime/abort.ts";

/** Options of {@linkcode SyncRunner}. */
export interface SyncRunnerOptions {
  /**
   * The work; a rejection schedules a retry. `periodic`: nothing asked for this run, which comes
   * only because `maxInterval` passed since the last one.
   */
  readonly fn: (periodic: boolean) => Promise<void>;
  readonly minIntervalMs: number;
  readonly maxIntervalMs: number;
  /** Runs allowed back to back before minInterval applies (upstream: 2). */
  readonly burst?: number;
  readonly clock: Clock;
  /**
   * Called on each request ({@linkcode SyncRunner.run}) at once, even while a run is in flight: what
   * a request cuts short (a drift check) learns of it without waiting for that run to end.
   */
  readonly onAsk?: () => void;
  /** Called with each failure, before the retry is scheduled. */
  readonly onError?: (err: unknown, retryInMs: number) => void;
}

/** Schedules a sync function: see the module doc for the guarantees. */
export class SyncRunner {
  readonly #o:
    & Required<Omit<SyncRunnerOptions, "onError" | "onAsk">>
    & Pick<SyncRunnerOptions, "onError" | "onAsk">;
  #tokens: number;
  #tokensAt: number;
  #pending = false;
  /** The pending run is only the periodic one: nothing asked for it, no retry or delayed work is due. */
  #periodic = false;
  #running = false;
  #active = false;
  #lastRun: number;
  #retryAt = Infinity;
  #dueAt = Infinity;
  #backoffMs = 0;
  #cancelTimer?: () => void;
  #idle: Array<() => void> = [];
  #runs = 0;

  /** Builds the runner; nothing runs until {@linkcode loop} is called. */
  constructor(opts: SyncRunnerOptions) {
    this.#o = { burst: 2, onError: undefined, ...opts };
    this.#tokens = this.#o.burst;
    this.#tokensAt = opts.clock.now();
    this.#lastRun = opts.clock.now();
  }

  /** Number of times the function has been started. */
  get runs(): number {
    return this.#runs;
  }

  /** Asks for a run; runs coalesce, so many requests before a run cause one run. */
  run(): void {
    this.#o.onAsk?.();
    this.#pending = true;
    this.#periodic = false;
    this.#schedule();
  }

  /**
   * Asks for a run within `ms` (not sooner than the limits allow): work that becomes due later, such
   * as objects that may be deleted once a delay has passed, is done then rather than at the
   * periodic run. The earliest such request wins; any run satisfies it.
   */
  runAfter(ms: number): void {
    this.#dueAt = Math.min(this.#dueAt, this.#o.clock.now() + ms);
    this.#schedule();
  }

  /** Starts the runner (with a first run) and resolves once `signal` aborts and no run is active. */
  async loop(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    this.#active = true;
    this.#lastRun = this.#o.clock.now();
    this.run();
    await new Promise<void>((resolve) => onAbort(signal, resolve));
    this.#active = false;
    this.#cancelTimer?.();
    await this.whenIdle();
  }

  /** Resolves when no run is in progress. */
  whenIdle(): Promise<void> {
    return this.#running ? new Promise((r) => this.#idle.push(r)) : Promise.resolve();
  }

  #refill(now: number): void {
    const { minIntervalMs, burst } = this.#o;
    if (minIntervalMs <= 0) {
      this.#tokens = burst;
    } else {
      this.#tokens = Math.min(burst, this.#tokens + (now - this.#tokensAt) / minIntervalMs);
    }
    this.#tokensAt = now;
  }

  // Invariant: at most one timer exists; it is re-armed here after every state change.
  #schedule(): void {
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    if (!this.#active || this.#running) return;
    const now = this.#o.clock.now();
    if (!this.#pending) {
      const asked = now >= this.#retryAt || now >= this.#dueAt;
      this.#pending = asked || now - this.#lastRun >= this.#o.maxIntervalMs;
      this.#periodic = this.#pending && !asked;
    }
    if (this.#pending) {
      this.#refill(now);
      // Refills are fractional; an epsilon keeps float error from delaying a run by 1ms.
      if (this.#tokens >= 1 - 1e-9) {
        this.#tokens = Math.max(0, this.#tokens - 1);
        this.#start();
        return;
      }
      this.#arm(Math.ceil((1 - this.#tokens) * this.#o.minIntervalMs));
      return;
    }
    const wake = Math.min(this.#retryAt, this.#dueAt, this.#lastRun + this.#o.maxIntervalMs);
    this.#arm(wake - now);
  }

  #arm(ms: number): void {
    this.#cancelTimer = this.#o.clock.setTimer(() => {
      this.#cancelTimer = undefined;
      this.#schedule();
    }, Math.max(0, ms));
  }

  #start(): void {
    this.#running = true;
    this.#pending = false;
    const periodic = this.#periodic;
    this.#periodic = false;
    this.#dueAt = Infinity;
    this.#runs++;
    this.#lastRun = this.#o.clock.now();
    this.#o.fn(periodic).then(
      () => {
        this.#retryAt = Infinity;
        this.#backoffMs = 0;
      },
      (err) => {
        const { minIntervalMs, maxIntervalMs } = this.#o;
        this.#backoffMs = Math.min(
          maxIntervalMs,
          this.#backoffMs === 0 ? Math.max(minIntervalMs, 1000) : this.#backoffMs * 2,
        );
        this.#retryAt = this.#o.clock.now() + this.#backoffMs;
        this.#o.onError?.(err, this.#backoffMs);
      },
    ).finally(() => {
      this.#running = false;
      for (const r of this.#idle.splice(0)) r();
      this.#schedule();
    });
  }
}
