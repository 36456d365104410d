/**
 * Child of tool_memory_test.ts, run with the start task's V8 flags: runs `echo` 200 times through
 * the executor and prints how much malloc's main arena grew per run, in KiB.
 */
import { DenoExecutor } from "../../iptables/executor.ts";

/** Resident memory of malloc's main arena (the `[heap]` mapping), KiB. */
function mallocArenaKiB(): number {
  const smaps = Deno.readTextFileSync("/proc/self/smaps");
  const at = smaps.indexOf("[heap]");
  return at < 0 ? 0 : Number(/Rss:\s+(\d+)/.exec(smaps.slice(at))?.[1] ?? 0);
}

const exec = new DenoExecutor();
// Warm up: the first runs allocate what later ones reuse.
for (let i = 0; i < 20; i++) await exec.run("echo", { args: ["hi"] });
const before = mallocArenaKiB();
const runs = 200;
let wrong = 0;
for (let i = 0; i < runs; i++) {
  const r = await exec.run("echo", { args: [`run ${i}`] });
  if (r.stdout !== `run ${i}\n`) wrong++;
}
console.log(JSON.stringify({ perRunKiB: (mallocArenaKiB() - before) / runs, wrong }));
