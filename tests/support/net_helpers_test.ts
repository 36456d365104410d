import { assertEquals, assertRejects } from "./assert.ts";
import { eventually, Unrecoverable } from "./net_helpers.ts";

Deno.test("eventually retries an ordinary failure until it holds", async () => {
  let calls = 0;
  const got = await eventually(() => {
    calls++;
    if (calls < 3) throw new Error("not yet");
    return "held";
  }, 10_000);
  assertEquals([got, calls], ["held", 3]);
});

Deno.test("eventually rethrows an Unrecoverable at once instead of polling it to its bound", async () => {
  let calls = 0;
  const started = Date.now();
  const e = await assertRejects(
    () =>
      eventually(() => {
        calls++;
        throw new Unrecoverable("the agent exited");
      }, 60_000),
    Unrecoverable,
  );
  assertEquals([e.message, calls], ["the agent exited", 1]);
  // One call, no 25 ms retry pause: far below the bound whatever the machine's load.
  assertEquals(Date.now() - started < 30_000, true);
});
