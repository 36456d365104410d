/**
 * An executor for one read-only request: each command line (without input) runs once, and asking
 * again gets the first answer, the very same text. A report that traces several connections
 * through the live rules reads them once, and every trace walks the same listing.
 * @module
 */
import type { ExecOptions, ExecResult, Executor } from "./executor.ts";

/** Runs each command line once; see the module doc. Commands with input are not remembered. */
export class MemoExecutor implements Executor {
  readonly #inner: Executor;
  readonly #answers = new Map<string, Promise<ExecResult>>();

  /** Remembers nothing yet; runs through `inner`. */
  constructor(inner: Executor) {
    this.#inner = inner;
  }

  /** @inheritdoc */
  run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    if (opts.stdin !== undefined) return this.#inner.run(cmd, opts);
    const key = [cmd, ...opts.args].join("\0");
    let answer = this.#answers.get(key);
    if (answer === undefined) this.#answers.set(key, answer = this.#inner.run(cmd, opts));
    return answer;
  }
}
