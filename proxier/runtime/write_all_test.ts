import { assertEquals } from "../../tests/support/assert.ts";
import { writeAll } from "./write_all.ts";

Deno.test("writeAll: short writes are continued until every byte went, in order", async () => {
  const got: number[] = [];
  const calls: number[] = [];
  // A connection that takes at most 3 bytes a write.
  const w = {
    write(p: Uint8Array): Promise<number> {
      const n = Math.min(3, p.length);
      got.push(...p.subarray(0, n));
      calls.push(n);
      return Promise.resolve(n);
    },
  };
  await writeAll(w, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
  assertEquals(got, [1, 2, 3, 4, 5, 6, 7, 8]);
  assertEquals(calls, [3, 3, 2]);
});
