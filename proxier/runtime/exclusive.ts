/**
 * One at a time: tasks run in the order they ask, each after the previous one settled. A task may
 * run yielding: the moment another task asks, its signal aborts, so that task waits no longer than
 * the yielding one takes to stop (a read-only check gives way to a sync).
 * @module
 */

/** Runs tasks one at a time, first come first served; a failing task does not stop the next. */
export class Exclusive {
  #tail: Promise<unknown> = Promise.resolve();
  /** The yielding task running or waiting to run, if any. */
  #yielding: AbortController | undefined;

  /** Runs `task` once every task asked before it settled; returns (or rejects with) its result. */
  run<T>(task: () => Promise<T>): Promise<T> {
    this.#yielding?.abort();
    const result = this.#tail.then(task);
    this.#tail = result.catch(() => {});
    return result;
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
