import { createHash } from "node:crypto";
import { assertEquals } from "../../tests/support/assert.ts";
import { sha256 } from "./sha256.ts";

Deno.test("sha256 matches node:crypto for lengths around block boundaries and UTF-8", () => {
  const inputs = [
    "",
    "abc",
    "ns1/svc1:p80tcp",
    "é€😀",
    ...[55, 56, 63, 64, 65, 119, 120, 200].map((n) => "x".repeat(n)),
  ];
  for (const s of inputs) {
    assertEquals(
      Buffer.from(sha256(s)).toString("hex"),
      createHash("sha256").update(s).digest("hex"),
      JSON.stringify(s),
    );
  }
});
