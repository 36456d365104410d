import { assertEquals } from "../../tests/support/assert.ts";
import { formatDuration, parseDuration } from "./duration.ts";

Deno.test("parseDuration accepts Go syntax", () => {
  const cases: Array<[string, number]> = [
    ["0", 0],
    ["1s", 1000],
    ["500ms", 500],
    ["1m30s", 90_000],
    ["1.5h", 5_400_000],
    ["2h45m", 9_900_000],
    ["100us", 0.1],
    ["1000000ns", 1],
    [".5s", 500],
    ["-1s", -1000],
    ["+1m", 60_000],
    ["-0", 0],
  ];
  for (const [s, ms] of cases) assertEquals(parseDuration(s), ms, s);
});

Deno.test("parseDuration rejects what Go rejects", () => {
  for (const s of ["", "1", "s", "1x", "--1s", "1s ", " 1s", "1.s.", "1S", "1e3s", "1s-", "+", "-"]) {
    assertEquals(parseDuration(s), undefined, JSON.stringify(s));
  }
});

Deno.test("formatDuration prints Go-like text", () => {
  assertEquals(formatDuration(90_000), "1m30s");
  assertEquals(formatDuration(250), "250ms");
  assertEquals(formatDuration(3_600_000), "1h0m0s");
  assertEquals(formatDuration(86_400_000), "24h0m0s");
  assertEquals(formatDuration(-1000), "-1s");
});
