import { assert } from "../../tests/support/assert.ts";
import { yieldToIO } from "./yield_to_io.ts";

Deno.test("yieldToIO: a child's input is written while a busy thread pauses with it", async () => {
  const child = new Deno.Command("cat", { stdin: "piped", stdout: "null" }).spawn();
  const w = child.stdin.getWriter();
  let written = false;
  const writing = w.write(new Uint8Array(2 * 2 ** 20)).then(() => written = true);
  let pauses = 0;
  // Busy between pauses, as a build is: only the pauses let the write go on.
  for (; !written && pauses < 10_000; pauses++) {
    const until = performance.now() + 0.05;
    while (performance.now() < until) { /* busy */ }
    await yieldToIO();
  }
  await writing;
  await w.close();
  await child.status;
  assert(pauses < 10_000, `the input was not written within ${pauses} pauses`);
});
