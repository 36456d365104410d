import { assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { Exclusive } from "./exclusive.ts";

Deno.test("exclusive: a task asked while another runs starts only after it ended, failure or not", async () => {
  const ex = new Exclusive();
  const order: string[] = [];
  let release = () => {};
  const first = ex.run(async () => {
    order.push("first starts");
    await new Promise<void>((r) => release = r);
    order.push("first ends");
    throw new Error("first failed");
  });
  const second = ex.run(() => {
    order.push("second runs");
    return Promise.resolve(2);
  });
  await Promise.resolve();
  assertEquals(order, ["first starts"]);
  release();
  assertEquals((await assertRejects(() => first, Error)).message, "first failed");
  assertEquals(await second, 2);
  assertEquals(order, ["first starts", "first ends", "second runs"]);
});
