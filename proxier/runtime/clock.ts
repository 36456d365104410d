/**
 * Time as an injected dependency, so the runner and caches are tested without sleeping.
 * @module
 */

/** A source of time and timers. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `fn` after `ms`; returns a function that cancels it. */
  setTimer(fn: () => void, ms: number): () => void;
}

/** The longest delay `setTimeout` honours (a signed 32-bit millisecond count); longer ones fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Calls `fn` after `ms` through `set`/`clear` (the platform's timers by default), chaining timers
 * of at most {@linkcode MAX_TIMER_MS} so that any delay is honoured; returns a function that cancels it.
 */
export function longTimer(
  fn: () => void,
  ms: number,
  set: (fn: () => void, ms: number) => unknown = (f, t) => setTimeout(f, t),
  clear: (id: unknown) => void = (id) => clearTimeout(id as number),
): () => void {
  let left = Math.max(0, ms);
  let id: unknown;
  const arm = () => {
    const step = Math.min(left, MAX_TIMER_MS);
    left -= step;
    id = set(left > 0 ? arm : fn, step);
  };
  arm();
  return () => clear(id);
}

/** The wall clock and real timers (any delay, split into what the platform allows). */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimer: (fn, ms) => longTimer(fn, ms),
};

/** A clock that moves only when told; timers fire in time order inside {@linkcode advance}. */
export class FakeClock implements Clock {
  #now: number;
  #timers: Array<{ at: number; fn: () => void; seq: number }> = [];
  #seq = 0;

  /** Starts at `start` ms since the epoch. */
  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  /** Returns the fake time. */
  now(): number {
    return this.#now;
  }

  /** Registers a timer at now + ms. */
  setTimer(fn: () => void, ms: number): () => void {
    const t = { at: this.#now + Math.max(0, ms), fn, seq: this.#seq++ };
    this.#timers.push(t);
    return () => {
      this.#timers = this.#timers.filter((x) => x !== t);
    };
  }

  /** Number of timers not yet fired. */
  get pendingTimers(): number {
    return this.#timers.length;
  }

  /**
   * Moves time forward by `ms`, firing due timers in order; awaits pending promise callbacks
   * after each timer so that async work started by a timer settles before the next one fires.
   */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    await settle();
    for (;;) {
      this.#timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const t = this.#timers[0];
      if (t === undefined || t.at > end) break;
      this.#timers.shift();
      this.#now = t.at;
      t.fn();
      await settle();
    }
    this.#now = end;
  }
}

/** Lets queued promise callbacks run (a macrotask turn). */
export function settle(): Promise<void> {
  return new Promise((r) => setTimeout(r, 0));
}
