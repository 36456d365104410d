/**
 * An executor that runs nothing: it records each command it is asked to run and answers success
 * with empty output, as a kernel with none of our state would. `render` runs the real proxiers on
 * it and prints what they would apply.
 * @module
 */
import { type ExecOptions, type ExecResult, type Executor, inputText } from "./executor.ts";

/** One command a dry run recorded. */
export interface RecordedCommand {
  readonly cmd: string;
  readonly args: readonly string[];
  readonly stdin?: string;
}

/** Records commands instead of running them; see the module doc. */
export class DryRunExecutor implements Executor {
  /** Every command asked for, in order. */
  readonly commands: RecordedCommand[] = [];

  /** @inheritdoc */
  run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    const stdin = opts.stdin === undefined ? undefined : inputText(opts.stdin);
    this.commands.push({ cmd, args: [...opts.args], stdin });
    return Promise.resolve({ code: 0, stdout: "", stderr: "" });
  }

  /** Returns the stdin of the last run of `cmd` that had one, or undefined when none did. */
  lastInput(cmd: string): string | undefined {
    return this.commands.findLast((c) => c.cmd === cmd && c.stdin !== undefined)?.stdin;
  }
}
