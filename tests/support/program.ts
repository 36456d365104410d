/**
 * How tests and benchmarks start the program: exactly the command `deno task start` runs
 * (deno.json's `start` task, its permission set and runtime flags), with absolute paths.
 * @module
 */

const ROOT = new URL("../..", import.meta.url).pathname;

/**
 * Returns the arguments for `Deno.execPath()` that run main.ts as `deno task start` does, then `args`;
 * `root`: the checkout (a path ending in `/`) whose start task and main.ts run, this one by default.
 */
export function startArgs(args: readonly string[] = [], root: string = ROOT): string[] {
  const config = JSON.parse(Deno.readTextFileSync(`${root}deno.json`));
  const words = String(config.tasks.start).split(/\s+/);
  if (words[0] !== "deno" || words[1] !== "run" || words.at(-1) !== "main.ts") {
    throw new Error(`unexpected start task: ${config.tasks.start}`);
  }
  return ["run", "--config", `${root}deno.json`, ...words.slice(2, -1), `${root}main.ts`, ...args];
}

/**
 * Flags for a run on the test machine itself (outside a network namespace the test made): the
 * conntrack sysctls are the host's there and must never be tuned by a test, so every setting that
 * would write one is turned off (as k3s runs kube-proxy).
 */
export const HOST_SAFE_FLAGS: readonly string[] = [
  "--conntrack-max-per-core=0",
  "--conntrack-tcp-timeout-established=0",
  "--conntrack-tcp-timeout-close-wait=0",
];

/** {@linkcode startArgs} for a run on the host: `args` plus {@linkcode HOST_SAFE_FLAGS}. */
export function hostStartArgs(args: readonly string[] = []): string[] {
  return startArgs([...args, ...HOST_SAFE_FLAGS]);
}

/** Runs the program as `deno task start ARGS` runs it, to completion; returns its exit code and output. */
export async function runOnce(
  args: readonly string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: startArgs(args),
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** A running program: its log so far, and a stop that can be called any number of times. */
export class ProxyProcess {
  readonly #child: Deno.ChildProcess;
  readonly #chunks: string[] = [];
  readonly #drained: Promise<void>;

  /** Starts collecting `child`'s stderr. */
  constructor(child: Deno.ChildProcess) {
    this.#child = child;
    this.#drained = (async () => {
      for await (const text of child.stderr.pipeThrough(new TextDecoderStream())) this.#chunks.push(text);
    })().catch(() => {});
  }

  /** The process id (`ip netns exec` execs the program in place: it is the program's). */
  get pid(): number {
    return this.#child.pid;
  }

  /** Settles when the process exits, for whatever reason. */
  get exited(): Promise<Deno.CommandStatus> {
    return this.#child.status;
  }

  /** Everything written to stderr so far. */
  log(): string {
    return this.#chunks.join("");
  }

  /** Sends `signal` (unless already exited) and waits for the exit and the rest of the log. */
  async stop(signal: Deno.Signal = "SIGTERM"): Promise<Deno.CommandStatus> {
    try {
      this.#child.kill(signal);
    } catch { /* already exited */ }
    const status = await this.#child.status;
    await this.#drained;
    return status;
  }
}
