/**
 * What running kernel tools costs a long-running process, under the start task's V8 flags (a small
 * young generation promotes a run's buffers to where only a major collection frees them).
 */
import { assert, assertEquals } from "../support/assert.ts";
import { startArgs } from "../support/program.ts";

Deno.test("a kernel tool run leaves almost no malloc memory behind until the next major collection", async () => {
  const v8 = startArgs().filter((a) => a.startsWith("--v8-flags="));
  const child = new URL("./tool_memory.child.ts", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", ...v8, child],
    stderr: "inherit",
  })
    .output();
  assertEquals(out.code, 0);
  const { perRunKiB, wrong } = JSON.parse(new TextDecoder().decode(out.stdout));
  assertEquals(wrong, 0, "every run's output came back whole");
  // Reading through the pipes' own 64 KiB chunks left about 120 KiB per run.
  assert(perRunKiB < 30, `malloc's main arena grew ${perRunKiB.toFixed(1)} KiB per run`);
});
