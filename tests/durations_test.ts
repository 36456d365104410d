import { assertEquals, assertMatch } from "./support/assert.ts";
import { parseDuration, report, testTimes } from "./durations.ts";

Deno.test("parseDuration reads Deno's durations; anything else is NaN", () => {
  assertEquals(
    ["765µs", "11ms", "32s", "1m44s", "1h0m2s"].map(parseDuration),
    [0.765, 11, 32_000, 104_000, 3_602_000],
  );
  assertEquals(["", "12", "3 s", "1m44sx"].map(parseDuration).every(Number.isNaN), true);
});

Deno.test("durations: each part's tests and time, and the slowest tests, from a parallel run's log", () => {
  const log = [
    "./iptables/ip_test.ts => inCIDR: every prefix ... ok (5ms)",
    "./iptables/ip_test.ts => a step of it ...",
    "  a step ... ok (3s)",
    "./tests/faults/chaos_test.ts => chaos nftables ...----- post-test output end -----",
    "./tests/faults/chaos_test.ts => chaos nftables ... ok (32s)",
    "./tests/e2e/e2e_test.ts => e2e iptables ... FAILED (1m2s)",
    "./tests/vm/ipvs_vm_test.ts => vm e2e ipvs ... ok (1m44s)",
    "./tests/vm/ipvs_vm_test.ts => vm chaos ipvs ... ignored (0ms)",
  ].join("\n");
  const times = testTimes(log);
  assertEquals(times.map((t) => [t.file, t.result, t.ms]), [
    ["iptables/ip_test.ts", "ok", 5],
    ["tests/faults/chaos_test.ts", "ok", 32_000],
    ["tests/e2e/e2e_test.ts", "FAILED", 62_000],
    ["tests/vm/ipvs_vm_test.ts", "ok", 104_000],
    ["tests/vm/ipvs_vm_test.ts", "ignored", 0],
  ]);
  const text = report(times);
  assertMatch(text, /unit +1 tests, 0 failed, 0s\n/);
  assertMatch(text, /e2e +2 tests, 1 failed, 1m34s\n/);
  assertMatch(text, /guest +1 tests, 0 failed, 1m44s\n/);
  assertMatch(text, /ten slowest tests:\n +1m44s {2}tests\/vm\/ipvs_vm_test\.ts: vm e2e ipvs\n +1m02s/);
});
