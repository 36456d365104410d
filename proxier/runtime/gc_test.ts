import { assertEquals } from "../../tests/support/assert.ts";
import {
  collectGarbageAfterSync,
  collectionDue,
  EXTERNAL_GC_BYTES,
  garbagePiled,
  HEAP_GC_MIN_INTERVAL_MS,
  HEAP_GROWTH_GC_BYTES,
  THOROUGH_GC_PERIOD_MS,
} from "./gc.ts";

const MiB = 2 ** 20;

Deno.test("collectGarbageAfterSync: collects only when buffers outside the heap pile up past 16 MiB and a quarter of the heap", () => {
  // Whatever earlier tests left is collected (or found below the bound) first.
  collectGarbageAfterSync();
  const bound = Math.max(EXTERNAL_GC_BYTES, Deno.memoryUsage().heapUsed / 4);
  if (Deno.memoryUsage().external > bound / 2) return; // nothing to learn in a process holding that much
  // A quarter of the bound more: still under it.
  let held: Uint8Array | undefined = new Uint8Array(Math.floor(bound / 4)).fill(1);
  assertEquals(collectGarbageAfterSync(), undefined);
  held = new Uint8Array(Math.ceil(bound) + 2 ** 20).fill(1);
  assertEquals(held.length > bound, true);
  held = undefined;
  assertEquals(collectGarbageAfterSync(), "ordinary");
});

Deno.test("garbagePiled: the heap grown by half (and 16 MiB) over the last collection, at most every 30 s; buffers past 16 MiB and a quarter of the heap", () => {
  const last = { atMs: 1000, heapUsed: 100 * MiB };
  const later = last.atMs + HEAP_GC_MIN_INTERVAL_MS;
  const grown = 150 * MiB + HEAP_GROWTH_GC_BYTES;
  assertEquals(garbagePiled({ heapUsed: grown - MiB, external: 0 }, later, last), false, "not grown enough");
  assertEquals(garbagePiled({ heapUsed: grown + MiB, external: 0 }, later - 1, last), false, "too soon");
  assertEquals(garbagePiled({ heapUsed: grown + MiB, external: 0 }, later, last), true);
  assertEquals(
    garbagePiled({ heapUsed: grown + MiB, external: 0 }, later, undefined),
    false,
    "no reference yet",
  );
  // Buffers: past 16 MiB and a quarter of the heap in use, whenever.
  assertEquals(garbagePiled({ heapUsed: 40 * MiB, external: 17 * MiB }, 0, undefined), true);
  assertEquals(garbagePiled({ heapUsed: 80 * MiB, external: 17 * MiB }, 0, undefined), false);
  assertEquals(garbagePiled({ heapUsed: 80 * MiB, external: 21 * MiB }, 0, last), true);
});

Deno.test("collectionDue: a thorough collection every 5 minutes while syncs come, whatever piled up; else an ordinary one when garbage piled", () => {
  const last = { atMs: 1000, heapUsed: 100 * MiB };
  const calm = { heapUsed: 100 * MiB, external: 0 };
  const piled = { heapUsed: 200 * MiB, external: 0 };
  const later = last.atMs + HEAP_GC_MIN_INTERVAL_MS;
  assertEquals(collectionDue(calm, later, last, 0), undefined);
  assertEquals(collectionDue(piled, later, last, 0), "ordinary");
  assertEquals(collectionDue(calm, THOROUGH_GC_PERIOD_MS - 1, last, 0), undefined, "not yet");
  assertEquals(collectionDue(calm, THOROUGH_GC_PERIOD_MS, last, 0), "thorough");
  assertEquals(collectionDue(piled, THOROUGH_GC_PERIOD_MS, last, 0), "thorough");
});
