import { assertEquals, assertMatch, assertThrows } from "../tests/support/assert.ts";
import { parseBaseHook, priorityValue } from "./nft_priority.ts";

Deno.test("nft priorities: numbers, names and offsets as nft prints them; anything else is an error", () => {
  assertEquals(
    ["-110", "0", "dstnat", "dstnat - 10", "dstnat + 10", "srcnat", "filter", "mangle", "raw", "security"]
      .map(
        priorityValue,
      ),
    [-110, 0, -100, -110, -90, 100, 0, -150, -300, 50],
  );
  for (const bad of ["", "nat", "dstnat -", "1e3"]) {
    assertMatch(assertThrows(() => priorityValue(bad), Error).message, /not an nft priority/, bad);
  }
  assertEquals(parseBaseHook("type filter hook output priority -110; policy accept;"), {
    type: "filter",
    hook: "output",
    priority: -110,
  });
  assertEquals(parseBaseHook('comment "x"'), undefined);
});
