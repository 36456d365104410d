import { assertEquals } from "../tests/support/assert.ts";
import { percentile } from "./percentile.ts";

Deno.test("percentile: the smallest value that share of the values are at or under; NaN for none", () => {
  assertEquals(percentile([1.2, 1.9, 2.5], 0.5), 1.9);
  assertEquals(percentile([1, 2, 3, 4], 0.5), 2);
  assertEquals(percentile([1, 2, 3, 4], 0.99), 4);
  assertEquals(percentile([], 0.5), NaN);
});
