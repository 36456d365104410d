/**
 * Runs kernel tools with argument arrays (never through a shell).
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
  /** Written to the command's stdin, which is then closed. */
  readonly stdin?: string;
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

/** The real executor: `Deno.Command`, with `PATH` lookup and no shell. */
export class DenoExecutor implements Executor {
  /** @inheritdoc */
  async run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    let child: Deno.ChildProcess;
    try {
      child = new Deno.Command(cmd, {
        args: [...opts.args],
        stdin: opts.stdin === undefined ? "null" : "piped",
        stdout: "piped",
        stderr: "piped",
        signal: opts.signal,
      }).spawn();
    } catch (cause) {
      throw new ExecError(`${cmd}: cannot start: ${(cause as Error).message}`, -1, { cause });
    }
    if (opts.stdin !== undefined) {
      const w = child.stdin.getWriter();
      // A tool that exits early closes its stdin; its exit code then tells what went wrong.
      await w.write(new TextEncoder().encode(opts.stdin)).catch(() => {});
      await w.close().catch(() => {});
    }
    const out = await child.output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  }
}
