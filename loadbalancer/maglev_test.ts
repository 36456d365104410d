import { assert, assertEquals } from "../tests/support/assert.ts";
import { DEFAULT_MAGLEV_SEED, DEFAULT_MAGLEV_TABLE_SIZE, isPrime, maglevTable } from "./maglev.ts";
import { jhash, nftJhash, portBytes, reciprocalScale } from "./jhash.ts";

const backends = (n: number) => Array.from({ length: n }, (_, i) => `10.180.${i >> 8}.${i & 255}:8080`);
const counts = (table: readonly string[]) => {
  const c = new Map<string, number>();
  for (const b of table) c.set(b, (c.get(b) ?? 0) + 1);
  return c;
};

Deno.test("maglev: every backend's share is within one slot of M/N (the paper's balance)", () => {
  for (const [n, m] of [[3, 1021], [10, 1021], [100, 16381], [7, 65537]]) {
    const c = counts(maglevTable(backends(n), m, DEFAULT_MAGLEV_SEED));
    assertEquals(c.size, n);
    const shares = [...c.values()];
    assert(
      Math.max(...shares) - Math.min(...shares) <= 1,
      `${n} backends, M=${m}: ${Math.min(...shares)}..${Math.max(...shares)}`,
    );
  }
});

Deno.test("maglev: the table depends on the set of backends, not the order they came in", () => {
  const b = backends(10);
  const reversed = [...b].reverse();
  const shuffled = [b[3], b[7], b[0], b[9], b[1], b[5], b[2], b[8], b[4], b[6]];
  const t = maglevTable(b, DEFAULT_MAGLEV_TABLE_SIZE, DEFAULT_MAGLEV_SEED);
  assertEquals(maglevTable(reversed, DEFAULT_MAGLEV_TABLE_SIZE, DEFAULT_MAGLEV_SEED), t);
  assertEquals(maglevTable(shuffled, DEFAULT_MAGLEV_TABLE_SIZE, DEFAULT_MAGLEV_SEED), t);
  // Another seed is another table (the seed is cluster-wide: every node must use the same).
  assert(maglevTable(b, DEFAULT_MAGLEV_TABLE_SIZE, 1).join() !== t.join());
});

Deno.test("maglev: removing one of N backends moves at most 1/N + 2% of the slots (minimal disruption)", () => {
  for (const [n, m] of [[3, 1021], [10, 16381], [100, 16381]]) {
    const before = maglevTable(backends(n), m, DEFAULT_MAGLEV_SEED);
    const removed = backends(n)[Math.floor(n / 2)];
    const after = maglevTable(backends(n).filter((b) => b !== removed), m, DEFAULT_MAGLEV_SEED);
    const moved = before.filter((b, i) => b !== after[i]).length / m;
    assert(moved <= 1 / n + 0.02, `${n} backends, M=${m}: ${(moved * 100).toFixed(2)}% moved`);
    // The removed backend's own slots all moved; they are the most of what moved.
    assert(before.every((b, i) => b !== removed || after[i] !== removed));
  }
});

Deno.test("maglev: M is prime; an empty set has an empty table", () => {
  assertEquals([isPrime(1021), isPrime(16381), isPrime(65537), isPrime(1024), isPrime(1)], [
    true,
    true,
    true,
    false,
    false,
  ]);
  assertEquals(maglevTable([], 1021, 0), []);
});

Deno.test("jhash: lookup3 as the kernel computes it, and nft's slot (checked against nft on a real kernel in tests/e2e)", () => {
  // The kernel's own test vector for jhash of the empty key: the initial value's final mix is skipped.
  assertEquals(jhash(new Uint8Array(0), 0), 0xdeadbeef);
  assertEquals(reciprocalScale(0xffffffff, 1021), 1020);
  assertEquals(reciprocalScale(0, 1021), 0);
  // Values nft 1.0.6 on Linux 6.x gave for `jhash ip saddr . th sport mod 1021 seed 0x1234` and
  // `jhash ip saddr mod 1021 seed 0x1234` from 10.9.9.9 (tests/e2e/jhash_test.ts re-checks live).
  const ip = Uint8Array.of(10, 9, 9, 9);
  assertEquals([40001, 40002, 51234, 60000].map((p) => nftJhash([ip, portBytes(p)], 1021, 0x1234)), [
    866,
    131,
    528,
    577,
  ]);
  assertEquals(nftJhash([ip], 1021, 0x1234), 774);
});
