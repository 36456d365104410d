import { assert, assertEquals } from "../tests/support/assert.ts";

/** Asserts `actual` is `expected` to within a billionth. */
const near = (actual: number, expected: number) =>
  assert(Math.abs(actual - expected) < 1e-9, `${actual} is not ${expected}`);
import { againstFirst } from "./cold_starts.ts";

Deno.test("againstFirst counts the rounds the second started sooner, of those both finished", () => {
  const r = againstFirst([2600, 2500, 2700, NaN], [2550, 2550, 2600, 2400]);
  assertEquals({ sooner: r.sooner, of: r.of }, { sooner: 2, of: 3 });
  const level = againstFirst([2600, 2500], [2600, 2500]);
  assertEquals({ sooner: level.sooner, of: level.of, meanMs: level.meanMs, twoSeMs: level.twoSeMs }, {
    sooner: 0,
    of: 2,
    meanMs: 0,
    twoSeMs: 0,
  });
});

Deno.test("againstFirst: the mean of the rounds' differences with twice its standard error", () => {
  // Differences -100, 50, -100: mean -50, sample deviation 86.6, so 2 x 86.6 / sqrt(3) = 100.
  const r = againstFirst([2600, 2500, 2700, NaN], [2500, 2550, 2600, 2400]);
  near(r.meanMs, -50);
  near(r.twoSeMs, 100);
  // Two checkouts whose starts drift together round by round: the difference is steady, its error small,
  // though each checkout's own spread is a second.
  const drifting = againstFirst([2000, 3000, 2500, 3500], [1900, 2900, 2400, 3400]);
  assertEquals(drifting.meanMs, -100);
  assertEquals(drifting.twoSeMs, 0);
  assert(Number.isNaN(againstFirst([2000], [1900]).twoSeMs), "one round: no error to say");
});
