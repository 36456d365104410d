import { assertEquals } from "../../tests/assert.ts";
import { collectGarbageIfBuffersPiled, EXTERNAL_GC_BYTES } from "./gc.ts";

Deno.test("collectGarbageIfBuffersPiled: collects only when buffers outside the heap pile up past the bound", () => {
  // Whatever earlier tests left is collected (or found below the bound) first.
  collectGarbageIfBuffersPiled();
  const before = Deno.memoryUsage().external;
  if (before > EXTERNAL_GC_BYTES) return; // nothing to learn in a process that holds that much
  assertEquals(collectGarbageIfBuffersPiled(), false);
  let held: Uint8Array | undefined = new Uint8Array(EXTERNAL_GC_BYTES + 2 ** 20).fill(1);
  assertEquals(held.length > EXTERNAL_GC_BYTES, true);
  held = undefined;
  assertEquals(collectGarbageIfBuffersPiled(), true);
});
