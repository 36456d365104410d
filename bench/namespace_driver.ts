/**
 * A bench's driver in network namespaces of its own: real-kernel benches touch only namespaces they
 * create, and remove them even when the run fails.
 * @module
 */
import { sh } from "./chain_watch.ts";

/** Runs `fn` with new namespaces named `names`, loopback up; removes them once it settles. */
export async function withNamespaces<T>(
  names: readonly string[],
  fn: (names: readonly string[]) => Promise<T>,
): Promise<T> {
  try {
    for (const ns of names) {
      const made = await sh("ip", ["netns", "add", ns]);
      if (made.code !== 0) throw new Error(`ip netns add ${ns} failed: ${made.err}`);
      await sh("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
    }
    return await fn(names);
  } finally {
    for (const ns of names) await sh("ip", ["netns", "del", ns]).catch(() => {});
  }
}

/**
 * Runs bench file `file` inside namespace `ns` (with this checkout's deno.json and every
 * permission: it drives the program, which runs with its own set) and returns what it printed as
 * its result: its first line of JSON (an object or an array). `what` names it in an error.
 */
export async function driverResult<T>(
  ns: string,
  file: string | URL,
  args: readonly string[],
  what: string,
): Promise<T> {
  const child = new Deno.Command("ip", {
    args: [
      "netns",
      "exec",
      ns,
      Deno.execPath(),
      "run",
      "-A",
      "--config",
      new URL("../deno.json", import.meta.url).pathname,
      new URL(file).pathname,
      ...args,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const out = new TextDecoder().decode((await child.output()).stdout);
  const line = out.split("\n").find((l) => l.startsWith("{") || l.startsWith("["));
  if (line === undefined) throw new Error(`${what} driver printed no result: ${out}`);
  return JSON.parse(line);
}
