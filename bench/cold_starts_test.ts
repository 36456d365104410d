import { assertEquals } from "../tests/support/assert.ts";
import { soonerIn } from "./cold_starts.ts";

Deno.test("soonerIn counts the rounds the second started sooner, of those both finished", () => {
  assertEquals(soonerIn([2600, 2500, 2700, NaN], [2550, 2550, 2600, 2400]), { sooner: 2, of: 3 });
  assertEquals(soonerIn([2600, 2500], [2600, 2500]), { sooner: 0, of: 2 });
});
