import { assertEquals } from "../../tests/support/assert.ts";
import { RefCounts } from "./ref_counts.ts";

Deno.test("ref counts: a key stays while any user holds it; the first and last use are told", () => {
  const c = new RefCounts<string>();
  assertEquals([c.add("10.0.0.1"), c.add("10.0.0.1"), c.add("10.0.0.2")], [true, false, true]);
  assertEquals([c.count("10.0.0.1"), c.size], [2, 2]);
  assertEquals(c.remove("10.0.0.1"), false);
  assertEquals(c.has("10.0.0.1"), true);
  assertEquals(c.remove("10.0.0.1"), true);
  assertEquals([c.has("10.0.0.1"), c.remove("10.0.0.1"), c.count("10.0.0.1")], [false, false, 0]);
  assertEquals([...c.keys()], ["10.0.0.2"]);
});

Deno.test("ref counts: a value per key, as its first use set it", () => {
  const c = new RefCounts<string, { port: number }>();
  c.add("a", { port: 80 });
  c.add("a", { port: 81 });
  c.add("b", { port: 53 });
  assertEquals([...c.values()], [{ port: 80 }, { port: 53 }]);
  c.clear();
  assertEquals(c.size, 0);
});
