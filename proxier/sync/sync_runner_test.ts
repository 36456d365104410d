import { assertEquals } from "../../tests/support/assert.ts";
import { FakeClock, settle } from "../runtime/clock.ts";
import { SyncRunner } from "./sync_runner.ts";

function setup(opts: { fail?: () => boolean } = {}) {
  const clock = new FakeClock();
  const runs: number[] = [];
  /** Each run: whether only the period brought it. */
  const periodic: boolean[] = [];
  const errors: number[] = [];
  const runner = new SyncRunner({
    clock,
    minIntervalMs: 1000,
    maxIntervalMs: 30_000,
    fn: (p) => {
      runs.push(clock.now() - start);
      periodic.push(p);
      return opts.fail?.() ? Promise.reject(new Error("boom")) : Promise.resolve();
    },
    onError: (_e, retry) => errors.push(retry),
  });
  const start = clock.now();
  const ac = new AbortController();
  const done = runner.loop(ac.signal);
  return { clock, runs, periodic, errors, runner, stop: async () => (ac.abort(), await done) };
}

Deno.test("SyncRunner runs once at start and coalesces requests", async () => {
  const { clock, runs, runner, stop } = setup();
  await settle();
  assertEquals(runs, [0]);
  for (let i = 0; i < 10; i++) runner.run();
  await settle();
  // Burst 2: the second run may follow at once; the other eight requests coalesce into one more.
  assertEquals(runs, [0, 0]);
  await clock.advance(999);
  assertEquals(runs, [0, 0]);
  await clock.advance(1);
  assertEquals(runs, [0, 0, 1000]);
  await clock.advance(10_000);
  assertEquals(runs.length, 3, "no run without a request before maxInterval");
  await stop();
});

Deno.test("SyncRunner limits to one run per minInterval once the burst is spent", async () => {
  const { clock, runs, runner, stop } = setup();
  await settle();
  for (let t = 0; t < 5000; t += 100) {
    runner.run();
    await clock.advance(100);
  }
  // Start run, burst token, then one per second.
  assertEquals(runs, [0, 0, 1000, 2000, 3000, 4000]);
  await stop();
});

Deno.test("SyncRunner runs at least every maxInterval", async () => {
  const { clock, runs, stop } = setup();
  await clock.advance(65_000);
  assertEquals(runs, [0, 30_000, 60_000]);
  await stop();
});

Deno.test("SyncRunner retries a failed run with backoff, then recovers", async () => {
  let failures = 3;
  const { clock, runs, errors, stop } = setup({ fail: () => failures-- > 0 });
  await clock.advance(20_000);
  assertEquals(errors, [1000, 2000, 4000]);
  assertEquals(runs, [0, 1000, 3000, 7000]);
  await clock.advance(40_000);
  assertEquals(runs, [0, 1000, 3000, 7000, 37_000], "after recovery only the periodic run");
  await stop();
});

Deno.test("SyncRunner.loop resolves after abort and runs no more", async () => {
  const { clock, runs, runner, stop } = setup();
  await settle();
  await stop();
  runner.run();
  await clock.advance(100_000);
  assertEquals(runs, [0]);
  assertEquals(clock.pendingTimers, 0);
});

Deno.test("SyncRunner.runAfter: a run is due by then, not at the periodic one; the earliest request wins and any run satisfies it", async () => {
  const { clock, runs, runner, stop } = setup();
  await settle();
  await clock.advance(5000);
  runner.runAfter(1500);
  runner.runAfter(3000);
  await clock.advance(1499);
  assertEquals(runs, [0]);
  await clock.advance(1);
  assertEquals(runs, [0, 6500], "at the earliest request, far before the 30 s periodic run");
  await clock.advance(5000);
  assertEquals(runs.length, 2, "the later request was satisfied by that run");
  runner.runAfter(2000);
  runner.run();
  await settle();
  assertEquals(runs.length, 3);
  await clock.advance(10_000);
  assertEquals(runs.length, 3, "a run in between satisfied it");
  await stop();
});

Deno.test("SyncRunner says which runs only the period brought: not one asked for, a retry or delayed work", async () => {
  let failing = false;
  const { clock, periodic, runner, stop } = setup({ fail: () => failing });
  await settle();
  await clock.advance(30_000);
  runner.run();
  await settle();
  runner.runAfter(5_000);
  await clock.advance(5_000);
  failing = true;
  await clock.advance(30_000);
  failing = false;
  await clock.advance(1_000);
  // The start, the period, the request, the delayed work, the failing periodic run, its retry.
  assertEquals(periodic, [false, true, false, false, true, false]);
  await stop();
});

Deno.test("SyncRunner tells of each request at once, also while a run is in flight; the period is none", async () => {
  let release = () => {};
  const clock = new FakeClock();
  const asks: number[] = [];
  const runner = new SyncRunner({
    clock,
    minIntervalMs: 1000,
    maxIntervalMs: 30_000,
    fn: () => new Promise<void>((r) => release = r),
    onAsk: () => asks.push(clock.now()),
  });
  const ac = new AbortController();
  const done = runner.loop(ac.signal);
  const start = clock.now();
  await settle();
  // The loop's own first run is a request.
  assertEquals(asks, [start]);
  runner.run();
  assertEquals(asks, [start, start], "told while the first run is in flight");
  release();
  await clock.advance(30_000);
  release();
  await clock.advance(30_000);
  release();
  assertEquals(asks.length, 2, "periodic runs ask nothing");
  ac.abort();
  release();
  await clock.advance(1_000);
  await done;
});
