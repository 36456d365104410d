/**
 * `--kube-api-qps` / `--kube-api-burst`: client-go's token bucket, which every API request of the
 * program (lists and watch starts) passes, as upstream's client does.
 * @module
 */
import type { Clock } from "../runtime/clock.ts";
import { onAbort } from "../runtime/abort.ts";

/** A token bucket: `burst` requests at once, then `qps` a second. */
export class RateLimiter {
  readonly #qps: number;
  readonly #burst: number;
  readonly #clock: Clock;
  #tokens: number;
  #last: number;

  /** A non-positive `qps` means no limit (client-go's negative QPS). Starts full. */
  constructor(o: { qps: number; burst: number; clock: Clock }) {
    this.#qps = o.qps;
    this.#burst = Math.max(1, o.burst);
    this.#clock = o.clock;
    this.#tokens = this.#burst;
    this.#last = o.clock.now();
  }

  /**
   * Returns how long (ms) the caller must wait before its request, reserving its token now; 0 when
   * it may go at once.
   */
  reserve(): number {
    if (this.#qps <= 0) return 0;
    const now = this.#clock.now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#last) * this.#qps) / 1000);
    this.#last = now;
    this.#tokens -= 1;
    if (this.#tokens >= 0) return 0;
    // The debt is shared: each waiting request owns one token of it, so they go out in order.
    return Math.ceil((-this.#tokens * 1000) / this.#qps);
  }

  /** Waits for a token (rejects when `signal` aborts first). */
  wait(signal?: AbortSignal): Promise<void> {
    const ms = this.reserve();
    if (ms === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      let unregister = () => {};
      const cancel = this.#clock.setTimer(() => {
        unregister();
        resolve();
      }, ms);
      if (signal !== undefined) {
        unregister = onAbort(signal, () => {
          cancel();
          reject(signal.reason);
        });
      }
    });
  }
}
