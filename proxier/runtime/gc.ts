/**
 * Explicit garbage collection and giving memory back to the system, where the runtime allows it.
 * @module
 */

/**
 * Where glibc lives on the architectures the program ships for. The `proxy` permission set in
 * deno.json allows FFI to exactly these files (a test keeps the two lists equal).
 */
export const LIBC_PATHS: readonly string[] = [
  "/lib/x86_64-linux-gnu/libc.so.6",
  "/usr/lib/x86_64-linux-gnu/libc.so.6",
  "/lib/aarch64-linux-gnu/libc.so.6",
  "/usr/lib/aarch64-linux-gnu/libc.so.6",
];

/** glibc's malloc controls, opened at first use; null when unavailable. */
let malloc: { trim(): void; arenas(n: number): void } | null | undefined;

function openMalloc(): { trim(): void; arenas(n: number): void } | null {
  for (const path of LIBC_PATHS) {
    try {
      const lib = Deno.dlopen(path, {
        malloc_trim: { parameters: ["usize"], result: "i32" },
        mallopt: { parameters: ["i32", "i32"], result: "i32" },
      });
      return {
        trim: () => lib.symbols.malloc_trim(0n),
        // M_ARENA_MAX (-8): threads beyond the limit share the arenas there are.
        arenas: (n) => lib.symbols.mallopt(-8, n),
      };
    } catch {
      // Not this architecture's path, not glibc (musl has no malloc_trim), or no FFI permission.
    }
  }
  return null;
}

/**
 * Caps glibc's malloc arenas at `n` for the threads that start from now on (returns whether it
 * could). glibc gives each new thread an arena of its own, up to eight per core, and keeps what
 * each holds: the threads that run kernel tools and serve requests come and go, and their arenas
 * stay. A proxy allocates little off its V8 heap; two arenas serve it.
 */
export function limitMallocArenas(n: number): boolean {
  malloc ??= openMalloc();
  malloc?.arenas(n);
  return malloc !== null;
}

/**
 * Collects garbage now when the runtime allows it (`--v8-flags=--expose-gc`, as deno.json's start
 * and compile tasks set); a no-op otherwise. A full sync at scale leaves tens of MiB of garbage,
 * and a burst of proxied connections as much in buffers; V8 otherwise keeps the heap at its peak
 * until its memory reducer runs, minutes later. Callers run it only after such rare events (full
 * syncs: start, failures, hourly; the end of a connection burst), so the pause (tens of ms) is too.
 *
 * `thorough` (after a connection burst): V8's last-resort collection, which also returns its
 * pooled pages, then glibc's malloc_trim, which returns the freed socket and buffer memory that
 * fragmentation otherwise keeps; neither alone gives back most of a burst's memory. Returns
 * whether malloc_trim ran.
 */
export function collectGarbage(opts: { thorough?: boolean } = {}): boolean {
  const gc = (globalThis as { gc?: (o?: unknown) => void }).gc;
  if (gc !== undefined) {
    if (opts.thorough !== true) gc();
    else gc({ type: "major", execution: "sync", flavor: "last-resort" });
    const atMs = performance.now();
    lastCollection = { atMs, heapUsed: Deno.memoryUsage().heapUsed };
    if (opts.thorough === true) lastThoroughMs = atMs;
  }
  return opts.thorough === true && trimMalloc();
}

/** When the last explicit collection ran and the heap in use it left (about the live objects). */
let lastCollection: { atMs: number; heapUsed: number } | undefined;
/** When the last thorough collection ran (the process start counts as one). */
let lastThoroughMs = performance.now();

/**
 * Gives the memory glibc's malloc holds free back to the system (malloc_trim), without a garbage
 * collection. Returns whether it ran (false without glibc or the FFI permission).
 */
export function trimMalloc(): boolean {
  malloc ??= openMalloc();
  malloc?.trim();
  return malloc !== null;
}

/** External (buffer) memory above which {@linkcode collectGarbageAfterSync} collects. */
export const EXTERNAL_GC_BYTES = 16 * 2 ** 20;
/** Heap growth over what the last explicit collection left above which it collects: half, and 16 MiB. */
export const HEAP_GROWTH_GC_RATIO = 0.5;
/** See {@linkcode HEAP_GROWTH_GC_RATIO}. */
export const HEAP_GROWTH_GC_BYTES = 16 * 2 ** 20;
/** Heap growth collects at most this often. */
export const HEAP_GC_MIN_INTERVAL_MS = 30_000;

/**
 * A thorough collection runs after a sync at most this often (and at least, while syncs come): V8's
 * ordinary collections compact only the emptiest pages, so under steady churn its old generation
 * fragments and the pages it holds grow with a flat set of live objects; a thorough one compacts
 * every fragmented page and returns them. It costs about twice an ordinary one, so not every sync.
 */
export const THOROUGH_GC_PERIOD_MS = 5 * 60_000;

/** Which collection {@linkcode collectionDue} asks for. */
export type Collection = "thorough" | "ordinary";

/**
 * After a sync: collects what {@linkcode collectionDue} asks for, with this process's readings;
 * returns which collection ran, if any.
 */
export function collectGarbageAfterSync(): Collection | undefined {
  const due = collectionDue(Deno.memoryUsage(), performance.now(), lastCollection, lastThoroughMs);
  if (due !== undefined) collectGarbage({ thorough: due === "thorough" });
  return due;
}

/**
 * Returns the collection due after a sync: thorough when the last thorough one ran at
 * `lastThoroughMs`, {@linkcode THOROUGH_GC_PERIOD_MS} or more before `nowMs`; else ordinary when
 * garbage piled up ({@linkcode garbagePiled}); else none.
 */
export function collectionDue(
  m: { readonly heapUsed: number; readonly external: number },
  nowMs: number,
  last: { readonly atMs: number; readonly heapUsed: number } | undefined,
  lastThoroughMs: number,
): Collection | undefined {
  if (nowMs - lastThoroughMs >= THOROUGH_GC_PERIOD_MS) return "thorough";
  return garbagePiled(m, nowMs, last) ? "ordinary" : undefined;
}

/**
 * Returns whether garbage piled up, given the heap's readings `m` at `nowMs` and what the last
 * explicit collection left (`last`, none yet: undefined). Two piles count:
 *
 * - Buffers outside the V8 heap above {@linkcode EXTERNAL_GC_BYTES} and a quarter of the heap in
 *   use. Kernel tools' input and output live in such buffers, which V8 does not weigh when it
 *   decides to collect: with a small heap they pile up, and the malloc memory under them, for
 *   minutes.
 * - The heap in use half as large again as the last explicit collection left it (and 16 MiB more),
 *   at most every {@linkcode HEAP_GC_MIN_INTERVAL_MS}. Under steady churn V8 lets its old
 *   generation grow up to four times the live objects before it collects, and the memory reducer
 *   that would shrink it waits for a quiet moment that never comes.
 */
export function garbagePiled(
  m: { readonly heapUsed: number; readonly external: number },
  nowMs: number,
  last: { readonly atMs: number; readonly heapUsed: number } | undefined,
): boolean {
  if (m.external > Math.max(EXTERNAL_GC_BYTES, m.heapUsed / 4)) return true;
  return last !== undefined && nowMs - last.atMs >= HEAP_GC_MIN_INTERVAL_MS &&
    m.heapUsed > last.heapUsed * (1 + HEAP_GROWTH_GC_RATIO) + HEAP_GROWTH_GC_BYTES;
}
