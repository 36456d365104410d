import { assertEquals } from "../tests/support/assert.ts";
import { median, percentile } from "./percentile.ts";

Deno.test("percentile: the smallest value that share of the values are at or under; NaN for none", () => {
  assertEquals(percentile([1.2, 1.9, 2.5], 0.5), 1.9);
  assertEquals(percentile([1, 2, 3, 4], 0.5), 2);
  assertEquals(percentile([1, 2, 3, 4], 0.99), 4);
  assertEquals(percentile([], 0.5), NaN);
});

Deno.test("median: percentile 0.5 of values in any order, which it leaves as they were", () => {
  const values = [4, 1, 3, 2];
  assertEquals(median(values), 2);
  assertEquals(values, [4, 1, 3, 2]);
  assertEquals(median([2.5, 1.2, 1.9]), 1.9);
  assertEquals(median([]), NaN);
});
