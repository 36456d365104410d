/**
 * The log line of a failed dial to an endpoint, at normal verbosity but at most once per endpoint
 * per {@linkcode DIAL_WARN_EVERY_MS}: a dead endpoint under load fails many dials a second, and one
 * line says it.
 * @module
 */
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";

/** A failed dial to one endpoint is logged at most this often. */
export const DIAL_WARN_EVERY_MS = 10_000;
/** Endpoints remembered at most; beyond, the memory starts over (a line may then repeat early). */
const MAX_REMEMBERED = 4096;

/** Logs failed dials, rate-limited per endpoint; see the module doc. */
export class DialWarnings {
  readonly #log: Logger;
  readonly #clock: Clock;
  /** Per endpoint: when a failed dial to it was last logged. */
  readonly #warned = new Map<string, number>();

  /** Logs through `log`; `clock` times the limit. */
  constructor(o: { log: Logger; clock: Clock }) {
    this.#log = o.log;
    this.#clock = o.clock;
  }

  /** Logs that a dial of service port `key` to `endpoint` failed, unless said for it lately. */
  failed(key: string, endpoint: string, error: string): void {
    const now = this.#clock.now();
    if ((this.#warned.get(endpoint) ?? -Infinity) + DIAL_WARN_EVERY_MS > now) return;
    this.#warned.set(endpoint, now);
    if (this.#warned.size > MAX_REMEMBERED) this.#warned.clear();
    this.#log.warn("Dial to endpoint failed; trying another, and passing it over for a while", {
      service: key,
      endpoint,
      error,
    });
  }
}
