/**
 * One at a time: tasks run in the order they ask, each after the previous one settled. A task may
 * run yielding: the moment another task asks, its signal aborts, so that task waits no longer than
 * the yielding one takes to stop (a read-only check gives way to a sync). A task that can wait (a
 * periodic sync with nothing asked for) does not cut it short: queued behind it, it lets it end.
 * @module
 */

/** Runs tasks one at a time, first come first served; a failing task does not stop the next. */
export class Exclusive {
  #tail: Promise<unknown> = Promise.resolve();
  /** The yielding task running or waiting to run, if any. */
  #yielding: AbortController | undefined;

  /**
   * Runs `task` once every task asked before it settled; returns (or rejects with) its result. A
   * yielding task is cut short unless `o.preempt` is false.
   */
  run<T>(task: () => Promise<T>, o: { preempt?: boolean } = {}): Promise<T> {
    if (o.preempt !== false) this.preempt();
    const result = this.#tail.then(task);
    this.#tail = result.catch(() => {});
    return result;
  }

  /** Cuts the yielding task running or waiting to run short, if any (a task will ask soon). */
  preempt(): void {
    this.#yielding?.abort();
  }

  /**
   * Runs `task` as {@linkcode run} does, with a signal that aborts as soon as another task asks
   * (before it starts too); `task` stops when it sees it, and its caller learns it was cut short.
   */
  runYielding<T>(task: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const ac = new AbortController();
    this.#yielding = ac;
    const result = this.#tail.then(() => task(ac.signal)).finally(() => {
      if (this.#yielding === ac) this.#yielding = undefined;
    });
    this.#tail = result.catch(() => {});
    return result;
  }
}
