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

Deno.test("exclusive: a task that can wait lets a yielding one end; preempt cuts it short whenever asked", async () => {
  const ex = new Exclusive();
  let release = () => {};
  let started = () => {};
  const running = new Promise<void>((r) => started = r);
  const check = ex.runYielding(async (signal) => {
    await new Promise<void>((r) => (release = r, signal.addEventListener("abort", () => r()), started()));
    return signal.aborted ? "cut short" : "ended";
  });
  await running;
  const periodic = ex.run(() => Promise.resolve("synced"), { preempt: false });
  release();
  assertEquals(await check, "ended");
  assertEquals(await periodic, "synced");
  // Cut short before it starts, too.
  const second = ex.runYielding(async (signal) => {
    if (!signal.aborted) await new Promise<void>((r) => signal.addEventListener("abort", () => r()));
    return "cut short";
  });
  const waiting = ex.run(() => Promise.resolve("synced"), { preempt: false });
  ex.preempt();
  assertEquals([await second, await waiting], ["cut short", "synced"]);
});
