/**
 * Runs kernel tools with argument arrays (never through a shell), killing one that outlives its
 * deadline. Every tool of the kernel-tool layer (`mod.ts`) runs through an {@linkcode Executor}.
 * @module
 */

/** What a finished command returned. */
export interface ExecResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Options of one command run. */
export interface ExecOptions {
  readonly args: readonly string[];
  /**
   * Written to the command's stdin, which is then closed. Chunks are written in order as one
   * text, without ever joining them (a full restore at scale is tens of MiB).
   */
  readonly stdin?: string | Iterable<string>;
  readonly signal?: AbortSignal;
}

/** Runs a command; tests substitute stateful fakes. */
export interface Executor {
  /** Resolves with the exit code and output; rejects only when the command cannot start. */
  run(cmd: string, opts: ExecOptions): Promise<ExecResult>;
}

/** A command failed or could not start; the message names the command and its stderr. */
export class ExecError extends Error {
  /** @param code the exit code, or -1 when the command did not start. */
  constructor(message: string, readonly code = -1, options?: ErrorOptions) {
    super(message, options);
    this.name = "ExecError";
  }
}

/** The exit code reported for a command killed at its deadline (as coreutils' `timeout`). */
export const TIMED_OUT_CODE = 124;

/**
 * Extra time a command gets per byte written to its stdin: 10 s per MiB. Big inputs take long for
 * a reason (a full iptables-restore at 10,000 services takes minutes on nf_tables), so their
 * deadline grows with them and only a hung tool reaches it.
 */
export const TIMEOUT_MS_PER_INPUT_BYTE = 10_000 / 2 ** 20;

/** A deadline that can be pushed back; aborts its signal when reached. */
class Deadline {
  readonly #ac = new AbortController();
  readonly #start = performance.now();
  #budgetMs: number;
  #timer: ReturnType<typeof setTimeout>;

  constructor(budgetMs: number) {
    this.#budgetMs = budgetMs;
    this.#timer = setTimeout(() => this.#ac.abort(), budgetMs);
  }

  get signal(): AbortSignal {
    return this.#ac.signal;
  }

  get budgetMs(): number {
    return this.#budgetMs;
  }

  extend(ms: number): void {
    if (this.#ac.signal.aborted) return;
    this.#budgetMs += ms;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#ac.abort(), this.#start + this.#budgetMs - performance.now());
  }

  clear(): void {
    clearTimeout(this.#timer);
  }
}

/** The real executor: `Deno.Command`, with `PATH` lookup and no shell. */
export class DenoExecutor implements Executor {
  readonly #timeoutMs: number;

  /**
   * `timeoutMs`: a command still running after this long (plus
   * {@linkcode TIMEOUT_MS_PER_INPUT_BYTE} for each byte of its input) is killed and reported as
   * exit code {@linkcode TIMED_OUT_CODE} with a stderr saying so, so a hung tool fails one sync
   * (retried) instead of stopping every later one. 0: no deadline.
   */
  constructor(o: { timeoutMs?: number } = {}) {
    this.#timeoutMs = o.timeoutMs ?? 0;
  }

  /** @inheritdoc */
  async run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    const deadline = this.#timeoutMs > 0 ? new Deadline(this.#timeoutMs) : undefined;
    const signal = deadline === undefined
      ? opts.signal
      : opts.signal === undefined
      ? deadline.signal
      : AbortSignal.any([opts.signal, deadline.signal]);
    let child: Deno.ChildProcess;
    try {
      child = new Deno.Command(cmd, {
        args: [...opts.args],
        stdin: opts.stdin === undefined ? "null" : "piped",
        stdout: "piped",
        stderr: "piped",
        signal,
      }).spawn();
    } catch (cause) {
      deadline?.clear();
      throw new ExecError(`${cmd}: cannot start: ${(cause as Error).message}`, -1, { cause });
    }
    // Output is read while stdin is written: a tool that answers as it reads must not stall us.
    const output = Promise.all([readText(child.stdout), readText(child.stderr), child.status]);
    if (opts.stdin !== undefined) {
      const w = child.stdin.getWriter();
      const wrote = (bytes: number) => deadline?.extend(bytes * TIMEOUT_MS_PER_INPUT_BYTE);
      // A tool that exits early closes its stdin; its exit code then tells what went wrong.
      await writeText(w, typeof opts.stdin === "string" ? [opts.stdin] : opts.stdin, wrote).catch(() => {});
      await w.close().catch(() => {});
    }
    const [stdout, stderr, status] = await output;
    deadline?.clear();
    if (deadline?.signal.aborted === true && opts.signal?.aborted !== true) {
      return {
        code: TIMED_OUT_CODE,
        stdout,
        stderr:
          `${cmd}: no exit within ${
            Math.round(deadline.budgetMs) / 1000
          } s (--kernel-tool-timeout); killed\n` + stderr,
      };
    }
    return { code: status.code, stdout, stderr };
  }
}

const READ_BUFFER = 16 * 1024;

/**
 * Reads a tool's output to its end as UTF-8 through a buffer of ours, handing on each piece as it
 * comes. The pipe's own reads (what `output()` or iterating the stream does) allocate 64 KiB each
 * in malloc memory that only a major garbage collection frees, so frequent tool runs (or a tool kept
 * running and answering often) pile it up between collections; a small reused buffer does not.
 */
export async function pumpText(
  stream: ReadableStream<Uint8Array>,
  add: (text: string) => void,
): Promise<void> {
  const reader = stream.getReader({ mode: "byob" });
  const decoder = new TextDecoder();
  let buf = new ArrayBuffer(READ_BUFFER);
  for (;;) {
    const { done, value } = await reader.read(new Uint8Array(buf));
    if (done || value === undefined) break;
    add(decoder.decode(value, { stream: true }));
    // The read hands the buffer back (transferred): the next read fills it again.
    buf = value.buffer as ArrayBuffer;
  }
  const rest = decoder.decode();
  if (rest !== "") add(rest);
}

/** Reads a tool's output to its end as UTF-8 ({@linkcode pumpText}). */
async function readText(stream: ReadableStream<Uint8Array>): Promise<string> {
  const parts: string[] = [];
  await pumpText(stream, (t) => parts.push(t));
  return parts.join("");
}

const WRITE_BUFFER = 64 * 1024;

/** Writes `chunks` as UTF-8 through one reused 64 KiB buffer (a whole text is never encoded at once). */
async function writeText(
  w: WritableStreamDefaultWriter<Uint8Array>,
  chunks: Iterable<string>,
  wrote: (bytes: number) => void = () => {},
): Promise<void> {
  const encoder = new TextEncoder();
  const buf = new Uint8Array(WRITE_BUFFER);
  let used = 0;
  for (const chunk of chunks) {
    let rest = chunk;
    while (rest.length > 0) {
      const { read, written } = encoder.encodeInto(rest, buf.subarray(used));
      used += written;
      rest = rest.slice(read);
      // A chunk that did not fit (or a full buffer) is flushed; writes are awaited, so the
      // buffer is free again afterwards.
      if (rest.length > 0 || used === WRITE_BUFFER) {
        await w.write(buf.subarray(0, used));
        wrote(used);
        used = 0;
      }
    }
  }
  if (used > 0) {
    await w.write(buf.subarray(0, used));
    wrote(used);
  }
}

/** Returns the text of `input` (chunks joined): for fakes and dry runs, never on a live path. */
export function inputText(input: string | Iterable<string>): string {
  return typeof input === "string" ? input : [...input].join("");
}
