/**
 * How tests and benchmarks start the program: exactly the command `deno task start` runs
 * (deno.json's `start` task, its permission set and runtime flags), with absolute paths.
 * @module
 */

const ROOT = new URL("..", import.meta.url).pathname;

/** Returns the arguments for `Deno.execPath()` that run main.ts as `deno task start` does, then `args`. */
export function startArgs(args: readonly string[] = []): string[] {
  const config = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`));
  const words = String(config.tasks.start).split(/\s+/);
  if (words[0] !== "deno" || words[1] !== "run" || words.at(-1) !== "main.ts") {
    throw new Error(`unexpected start task: ${config.tasks.start}`);
  }
  return ["run", "--config", `${ROOT}deno.json`, ...words.slice(2, -1), `${ROOT}main.ts`, ...args];
}
