import { assertEquals } from "../tests/support/assert.ts";
import { MemoryLogger } from "../tests/support/fixtures.ts";
import { ANOTHER_WRITER, DriftWatch } from "./drift.ts";
import { FakeClock } from "./runtime/clock.ts";
import { Exclusive } from "./runtime/exclusive.ts";

function watch(detect: (thorough: boolean) => Promise<string | undefined>, ready = true) {
  const log = new MemoryLogger();
  const clock = new FakeClock();
  let repairs = 0;
  let others = 0;
  let fullSyncs = 0;
  const w = new DriftWatch({
    family: "IPv4",
    log,
    clock,
    periodMs: 30_000,
    detect,
    counters: { driftRepairsTotal: { inc: () => repairs++ }, otherWritersTotal: { inc: () => others++ } },
    exclusive: new Exclusive(),
    ready: () => ready,
    repair: () => fullSyncs++,
  });
  return { w, log, clock, counts: () => ({ repairs, others, fullSyncs }) };
}

Deno.test("drift watch: what drifted is logged once, counted and repaired by a full sync; a failing check counts as drift", async () => {
  const { w, log, counts } = watch((thorough) =>
    thorough ? Promise.reject(new Error("nft: Permission denied")) : Promise.resolve(undefined)
  );
  assertEquals(await w.check(false), undefined);
  assertEquals(await w.repair(), "the check failed: nft: Permission denied");
  assertEquals(counts(), { repairs: 1, others: 0, fullSyncs: 1 });
  assertEquals(log.messages("warn"), ["Rules changed outside the proxy; doing a full sync"]);
});

Deno.test("drift watch: another writer the mode names is said as such and counted apart", async () => {
  const { w, log, counts } = watch(() =>
    Promise.resolve(`${ANOTHER_WRITER}: kube-proxy-deno nftables/1a2b3c4d pid 7 wrote transaction 9`)
  );
  await w.repair();
  assertEquals(counts(), { repairs: 1, others: 1, fullSyncs: 1 });
  assertEquals(log.messages("warn"), [
    "Another writer programs this node's rules; rewriting them (one proxy per node)",
  ]);
  assertEquals(
    log.records[0].fields?.drift,
    `${ANOTHER_WRITER}: kube-proxy-deno nftables/1a2b3c4d pid 7 wrote transaction 9`,
  );
});

Deno.test("drift watch: nothing is checked before the first sync may run; then once per period until stopped", async () => {
  let checks = 0;
  let ready = false;
  const log = new MemoryLogger();
  const clock = new FakeClock();
  const w = new DriftWatch({
    family: "IPv4",
    log,
    clock,
    periodMs: 30_000,
    detect: () => (checks++, Promise.resolve(undefined)),
    counters: { driftRepairsTotal: { inc: () => {} }, otherWritersTotal: { inc: () => {} } },
    exclusive: new Exclusive(),
    ready: () => ready,
    repair: () => {},
  });
  const ac = new AbortController();
  w.watch(ac.signal);
  await clock.advance(30_000);
  assertEquals(checks, 0);
  ready = true;
  await clock.advance(60_000);
  assertEquals(checks, 2);
  ac.abort();
  await clock.advance(60_000);
  assertEquals([checks, clock.pendingTimers], [2, 0]);
});
