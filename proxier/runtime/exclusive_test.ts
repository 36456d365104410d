import { assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { Exclusive } from "./exclusive.ts";

Deno.test("exclusive: a task asked while another runs starts only after it ended, failure or not", async () => {
  const ex = new Exclusive();
  const order: string[] = [];
  let release = () => {};
  const first = ex.run(async () => {
    order.push("first starts");
    await new Promise<void>((r) => release = r);
    order.push("first ends");
    throw new Error("first failed");
  });
  const second = ex.run(() => {
    order.push("second runs");
    return Promise.resolve(2);
  });
  await Promise.resolve();
  assertEquals(order, ["first starts"]);
  release();
  assertEquals((await assertRejects(() => first, Error)).message, "first failed");
  assertEquals(await second, 2);
  assertEquals(order, ["first starts", "first ends", "second runs"]);
});

Deno.test("exclusive: a yielding task's signal aborts the moment another task asks, which then runs at once", async () => {
  const ex = new Exclusive();
  const order: string[] = [];
  const check = ex.runYielding(async (signal) => {
    order.push("check starts");
    await new Promise<void>((r) => signal.addEventListener("abort", () => r()));
    order.push("check stops");
    return "cut short";
  });
  await Promise.resolve();
  const sync = ex.run(() => (order.push("sync runs"), Promise.resolve("synced")));
  assertEquals(await check, "cut short");
  assertEquals(await sync, "synced");
  assertEquals(order, ["check starts", "check stops", "sync runs"]);
  // Not cut short by anything asked before it.
  const quiet = ex.runYielding((signal) => Promise.resolve(signal.aborted));
  assertEquals(await quiet, false);
});
