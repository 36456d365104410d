/**
 * Starts one of `load.ts`'s servers in its own process, for the userspace benchmarks.
 * @module
 */

/** The load tool's path, for running its client modes too. */
export const LOAD_SCRIPT = new URL("./load.ts", import.meta.url).pathname;

/** A `load.ts` server mode (see that file). */
export type LoadServerMode = "sink" | "hello" | "http" | "udpecho";

/** Starts a `load.ts` server; resolves with the port it printed and a stopper. */
export async function loadServer(mode: LoadServerMode): Promise<{ port: number; close(): Promise<void> }> {
  const child = new Deno.Command(Deno.execPath(), { args: ["run", "-A", LOAD_SCRIPT, mode], stdout: "piped" })
    .spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) text += (await reader.read()).value ?? "";
  reader.releaseLock();
  return {
    port: Number(text.trim()),
    close: async () => {
      child.kill();
      await child.status;
      await child.stdout.cancel().catch(() => {});
    },
  };
}
