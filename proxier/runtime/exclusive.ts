/**
 * One at a time: tasks run in the order they ask, each after the previous one settled.
 * @module
 */

/** Runs tasks one at a time, first come first served; a failing task does not stop the next. */
export class Exclusive {
  #tail: Promise<unknown> = Promise.resolve();

  /** Runs `task` once every task asked before it settled; returns (or rejects with) its result. */
  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(task);
    this.#tail = result.catch(() => {});
    return result;
  }
}
