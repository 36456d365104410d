import { assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { MID_SYNC_GROWTH_BYTES, SyncMemory, TRIM_PERIOD_MS } from "./sync_memory.ts";

/** A memory step that records what it ran, at the fake time `now`. */
function recorded() {
  const ran: string[] = [];
  const clock = { ms: 0 };
  const memory = new SyncMemory({
    now: () => clock.ms,
    thorough: () => ran.push(`thorough@${clock.ms}`),
    ifDue: () => ran.push(`ifDue@${clock.ms}`),
    trim: () => ran.push(`trim@${clock.ms}`),
  });
  return { ran, clock, memory };
}

/** Returns a sync to run under `memory.around` and the function that settles it. */
function pending(): { sync: () => Promise<boolean>; settle: (full: boolean | Error) => void } {
  let settle: (full: boolean | Error) => void = () => {};
  const done = new Promise<boolean>((resolve, reject) => {
    settle = (full) => full instanceof Error ? reject(full) : resolve(full);
  });
  return { sync: () => done, settle };
}

Deno.test("SyncMemory: a full sync that ends while another is in flight is collected thoroughly when the last ends", async () => {
  const { ran, clock, memory } = recorded();
  const a = pending();
  const b = pending();
  const runs = [memory.around(a.sync), memory.around(b.sync)];
  clock.ms = 100;
  a.settle(true);
  await runs[0];
  assertEquals(ran, [], "nothing runs while the other sync is in flight");
  clock.ms = 2_000;
  b.settle(false);
  await runs[1];
  assertEquals(ran, ["thorough@2000", "trim@2000"]);
});

Deno.test("SyncMemory: a partial sync collects only when due; trims at most every TRIM_PERIOD_MS; a failure passes on after the step", async () => {
  const { ran, clock, memory } = recorded();
  await memory.around(() => Promise.resolve(false));
  clock.ms = TRIM_PERIOD_MS - 1;
  await memory.around(() => Promise.resolve(false));
  clock.ms = TRIM_PERIOD_MS;
  const failed = pending();
  const run = memory.around(failed.sync);
  failed.settle(new Error("restore failed"));
  assertEquals((await assertRejects(() => run, Error)).message, "restore failed");
  assertEquals(ran, [
    "ifDue@0",
    "trim@0",
    `ifDue@${TRIM_PERIOD_MS - 1}`,
    `ifDue@${TRIM_PERIOD_MS}`,
    `trim@${TRIM_PERIOD_MS}`,
  ]);
  // The failed sync is no longer counted as in flight: the next one's step runs.
  await memory.around(() => Promise.resolve(true));
  assertEquals(ran.at(-1), `thorough@${TRIM_PERIOD_MS}`);
});

Deno.test("SyncMemory: within a sync, a plain collection once the heap grew by MID_SYNC_GROWTH_BYTES since its low point (the last collection's, or V8's own seen since)", async () => {
  const ran: string[] = [];
  const heap = { used: 100 * 2 ** 20 };
  const memory = new SyncMemory({
    now: () => 0,
    thorough: () => ran.push("thorough"),
    ordinary: () => (ran.push("ordinary"), heap.used -= 80 * 2 ** 20),
    ifDue: () => ran.push("ifDue"),
    trim: () => {},
    heapUsed: () => heap.used,
  });
  const load = pending();
  const run = memory.around(load.sync);
  heap.used += MID_SYNC_GROWTH_BYTES - 1;
  memory.midSync();
  assertEquals(ran, [], "grown by less than the limit");
  heap.used += 1;
  memory.midSync();
  assertEquals(ran, ["ordinary"]);
  // Measured again from what the collection left.
  heap.used += MID_SYNC_GROWTH_BYTES - 1;
  memory.midSync();
  assertEquals(ran, ["ordinary"]);
  heap.used += 1;
  memory.midSync();
  assertEquals(ran, ["ordinary", "ordinary"]);
  // V8 collected on its own (the heap shrank below the mark): growth counts from there.
  heap.used -= 50 * 2 ** 20;
  memory.midSync();
  heap.used += MID_SYNC_GROWTH_BYTES - 1;
  memory.midSync();
  assertEquals(ran, ["ordinary", "ordinary"], "grown by less than the limit since the low point");
  heap.used += 1;
  memory.midSync();
  assertEquals(ran, ["ordinary", "ordinary", "ordinary"]);
  load.settle(true);
  await run;
  assertEquals(ran, ["ordinary", "ordinary", "ordinary", "thorough"]);
});

Deno.test("SyncMemory: what piled up before a sync counts (a first sync on what the lists left): its first point collects", async () => {
  const ran: string[] = [];
  const heap = { used: 40 * 2 ** 20 };
  const memory = new SyncMemory({
    now: () => 0,
    thorough: () => (ran.push("thorough"), heap.used = 150 * 2 ** 20),
    ordinary: () => (ran.push("ordinary"), heap.used = 120 * 2 ** 20),
    ifDue: () => ran.push("ifDue"),
    trim: () => {},
    heapUsed: () => heap.used,
  });
  heap.used += 2 * MID_SYNC_GROWTH_BYTES;
  const first = pending();
  const run = memory.around(first.sync);
  memory.midSync();
  assertEquals(ran, ["ordinary"]);
  first.settle(true);
  await run;
  // The thorough step's live heap is the next low point, though above the last one.
  const next = pending();
  const again = memory.around(next.sync);
  heap.used += MID_SYNC_GROWTH_BYTES - 1;
  memory.midSync();
  assertEquals(ran, ["ordinary", "thorough"]);
  heap.used += 1;
  memory.midSync();
  assertEquals(ran, ["ordinary", "thorough", "ordinary"]);
  next.settle(false);
  await again;
});

Deno.test("SyncMemory.afterSyncs: a task waits for every sync in flight and runs before the step's collection; with none in flight it runs soon", async () => {
  const { ran, memory } = recorded();
  const a = pending();
  const b = pending();
  const runs = [memory.around(a.sync), memory.around(b.sync)];
  memory.afterSyncs(() => ran.push("task"));
  await Promise.resolve();
  a.settle(true);
  await runs[0];
  assertEquals(ran, [], "the other family's sync is still in flight");
  b.settle(false);
  await runs[1];
  assertEquals(ran, ["task", "thorough@0", "trim@0"]);
  memory.afterSyncs(() => ran.push("idle task"));
  assertEquals(ran.length, 3, "not run within the caller");
  await Promise.resolve();
  assertEquals(ran.at(-1), "idle task");
  await memory.around(() => Promise.resolve(false));
  assertEquals(ran.filter((r) => r.endsWith("task")).length, 2, "each task runs once");
});
