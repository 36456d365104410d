/**
 * A kernel tool kept running and fed one request at a time on its stdin (`nft -i`): a request then
 * costs the tool's own work, not a process start as well (3-4 ms of CPU on a paravirtualized node,
 * more than a one-element change's work). Where a request's answer ends is the caller's to say: the
 * tool's protocol, not the session's.
 * @module
 */
import { DenoExecutor, ExecError, type Executor, pumpText, TIMED_OUT_CODE } from "./executor.ts";

/** What the tool printed for one request. */
export interface SessionAnswer {
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Where an answer ends in what the tool printed on stderr so far: the length of the answer (what
 * follows is the next request's), or -1 while it is not complete.
 */
export type AnswerEnd = (stderr: string) => number;

/** A tool kept running, one request at a time. */
export interface ToolSession {
  /** True once the tool exited or was closed: no request can go to it any more. */
  readonly closed: boolean;
  /** True while a request is in flight. */
  readonly busy: boolean;
  /**
   * Writes `input` and resolves with what the tool printed from then until `end` finds the answer
   * complete. Rejects with an {@linkcode ExecError} when the tool exits first, when `signal` aborts or
   * the deadline passes (the tool is then killed: its state is unknown), or when a request is in flight.
   */
  request(input: string, end: AnswerEnd, signal?: AbortSignal): Promise<SessionAnswer>;
  /** Kills the tool; resolves once it has exited and its output is read. */
  close(): Promise<void>;
}

/** Options of {@linkcode ProcessSession}. */
export interface SessionOptions {
  readonly args: readonly string[];
  /** Added to the environment the tool inherits. */
  readonly env?: Readonly<Record<string, string>>;
  /** A request unanswered after this long kills the tool (0: no deadline). */
  readonly timeoutMs?: number;
}

/** An executor that can also keep a tool running ({@linkcode ToolSession}). */
export interface SessionExecutor extends Executor {
  /** Starts `cmd` kept running. @throws {ExecError} when it cannot start. */
  start(cmd: string, o: SessionOptions): ToolSession;
}

/** Returns `exec` as a {@linkcode SessionExecutor} when it can keep a tool running (dry runs and fakes cannot). */
export function sessionsOf(exec: Executor): SessionExecutor | undefined {
  return typeof (exec as Partial<SessionExecutor>).start === "function" ? exec as SessionExecutor : undefined;
}

/** The real executor ({@linkcode DenoExecutor}) with sessions under the same deadline. */
export class DenoSessionExecutor extends DenoExecutor implements SessionExecutor {
  readonly #timeoutMs: number;

  /** `timeoutMs`: as {@linkcode DenoExecutor}'s, applied to each request of a session too. */
  constructor(o: { timeoutMs?: number } = {}) {
    super(o);
    this.#timeoutMs = o.timeoutMs ?? 0;
  }

  /** @inheritdoc */
  start(cmd: string, o: SessionOptions): ToolSession {
    return new ProcessSession(cmd, { timeoutMs: this.#timeoutMs, ...o });
  }
}

/** {@linkcode ToolSession} over a child process (`Deno.Command`, no shell). */
export class ProcessSession implements ToolSession {
  readonly #cmd: string;
  readonly #timeoutMs: number;
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #encoder = new TextEncoder();
  readonly #done: Promise<unknown>;
  #stdout = "";
  #stderr = "";
  #exited = false;
  #busy = false;
  /** Wakes the request waiting for more output (or for the tool's exit). */
  #wake: () => void = () => {};

  /**
   * Starts `cmd` with piped stdin, stdout and stderr.
   * @throws {ExecError} when it cannot start.
   */
  constructor(cmd: string, o: SessionOptions) {
    this.#cmd = cmd;
    this.#timeoutMs = o.timeoutMs ?? 0;
    try {
      this.#child = new Deno.Command(cmd, {
        args: [...o.args],
        env: o.env === undefined ? undefined : { ...o.env },
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
    } catch (cause) {
      throw new ExecError(`${cmd}: cannot start: ${(cause as Error).message}`, -1, { cause });
    }
    this.#writer = this.#child.stdin.getWriter();
    const pumped = Promise.all([
      this.#pump(this.#child.stdout, (t) => this.#stdout += t),
      this.#pump(this.#child.stderr, (t) => this.#stderr += t),
    ]).catch(() => {});
    this.#done = Promise.all([pumped, this.#child.status]).finally(() => {
      this.#exited = true;
      this.#wake();
    });
  }

  /** @inheritdoc */
  get closed(): boolean {
    return this.#exited;
  }

  /** @inheritdoc */
  get busy(): boolean {
    return this.#busy;
  }

  /** @inheritdoc */
  async request(input: string, end: AnswerEnd, signal?: AbortSignal): Promise<SessionAnswer> {
    if (this.#busy) throw new ExecError(`${this.#cmd}: a request is in flight`);
    if (this.#exited) throw new ExecError(`${this.#cmd}: exited`);
    this.#busy = true;
    let timedOut = false;
    const timer = this.#timeoutMs > 0
      ? setTimeout(() => {
        timedOut = true;
        this.#wake();
      }, this.#timeoutMs)
      : undefined;
    const onAbort = () => this.#wake();
    signal?.addEventListener("abort", onAbort);
    try {
      await this.#writer.write(this.#encoder.encode(input)).catch(() => {});
      for (;;) {
        const at = end(this.#stderr);
        if (at >= 0) {
          const answer = { stdout: this.#stdout, stderr: this.#stderr.slice(0, at) };
          this.#stdout = "";
          this.#stderr = this.#stderr.slice(at);
          return answer;
        }
        if (timedOut || signal?.aborted === true || this.#exited) {
          const said = this.#stderr.trim();
          await this.close();
          const why = timedOut
            ? `no answer within ${this.#timeoutMs / 1000} s (--kernel-tool-timeout); killed`
            : signal?.aborted === true
            ? "stopped; killed"
            : "exited before it answered";
          throw new ExecError(
            `${this.#cmd}: ${why}${said === "" ? "" : `: ${said}`}`,
            timedOut ? TIMED_OUT_CODE : -1,
          );
        }
        await new Promise<void>((r) => this.#wake = r);
      }
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      this.#busy = false;
    }
  }

  /** @inheritdoc */
  async close(): Promise<void> {
    if (!this.#exited) {
      try {
        this.#child.kill("SIGKILL");
      } catch { /* exited meanwhile */ }
    }
    await this.#writer.close().catch(() => {});
    await this.#done;
  }

  async #pump(stream: ReadableStream<Uint8Array>, add: (text: string) => void): Promise<void> {
    await pumpText(stream, (text) => {
      add(text);
      this.#wake();
    });
  }
}
