import { assertEquals } from "../tests/support/assert.ts";
import { median, soonerIn } from "./cold_starts.ts";

Deno.test("soonerIn counts the rounds the second started sooner, of those both finished", () => {
  assertEquals(soonerIn([2600, 2500, 2700, NaN], [2550, 2550, 2600, 2400]), { sooner: 2, of: 3 });
  assertEquals(soonerIn([2600, 2500], [2600, 2500]), { sooner: 0, of: 2 });
});

Deno.test("median takes the middle of the values in any order, the upper one of an even count", () => {
  assertEquals(median([2.5, 1.2, 1.9]), 1.9);
  assertEquals(median([4, 1, 3, 2]), 3);
  assertEquals(median([]), NaN);
});
