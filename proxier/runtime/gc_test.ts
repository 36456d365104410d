import { assertEquals } from "../../tests/assert.ts";
import { collectGarbageIfBuffersPiled, EXTERNAL_GC_BYTES } from "./gc.ts";

Deno.test("collectGarbageIfBuffersPiled: collects only when buffers outside the heap pile up past 16 MiB and a quarter of the heap", () => {
  // Whatever earlier tests left is collected (or found below the bound) first.
  collectGarbageIfBuffersPiled();
  const bound = Math.max(EXTERNAL_GC_BYTES, Deno.memoryUsage().heapUsed / 4);
  if (Deno.memoryUsage().external > bound / 2) return; // nothing to learn in a process holding that much
  // A quarter of the bound more: still under it.
  let held: Uint8Array | undefined = new Uint8Array(Math.floor(bound / 4)).fill(1);
  assertEquals(collectGarbageIfBuffersPiled(), false);
  held = new Uint8Array(Math.ceil(bound) + 2 ** 20).fill(1);
  assertEquals(held.length > bound, true);
  held = undefined;
  assertEquals(collectGarbageIfBuffersPiled(), true);
});
