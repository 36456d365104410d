import { assertEquals, assertThrows } from "../tests/support/assert.ts";
import { FRESH_LANES } from "../proxier/nftables/fresh_load.ts";
import { leanParts } from "./lean_start.ts";
import { nftTransactions } from "./scale.ts";

Deno.test("leanParts: the layout, every element statement once and in order over parts for each lane, then what follows", async () => {
  const [full] = await nftTransactions(3000, 1, 0);
  const p = leanParts(full);
  assertEquals(p.layout + p.parts.join("") + p.hooks, full);
  assertEquals(p.layout.includes("add element "), false);
  assertEquals(p.parts.length % FRESH_LANES, 0);
  for (const part of p.parts) {
    assertEquals(part.trimEnd().split("\n").every((l) => l.startsWith("add element ")), true);
  }
  assertEquals(p.hooks.split("\n")[0].startsWith("add element "), false);
});

Deno.test("leanParts refuses a transaction without elements", () => {
  const e = assertThrows(() => leanParts("add table ip kube-proxy\n"), Error);
  assertEquals(e.message, "the transaction holds no add element statement");
});
