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

/** The wall clock and real timers. */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimer(fn, ms) {
    const id = setTimeout(fn, Math.max(0, ms));
    return () => clearTimeout(id);
  },
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
