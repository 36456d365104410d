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

/** glibc's malloc_trim, opened at the first thorough collection; null when unavailable. */
let mallocTrim: (() => void) | null | undefined;

function openMallocTrim(): (() => void) | null {
  for (const path of LIBC_PATHS) {
    try {
      const lib = Deno.dlopen(path, { malloc_trim: { parameters: ["usize"], result: "i32" } });
      return () => lib.symbols.malloc_trim(0n);
    } catch {
      // Not this architecture's path, not glibc (musl has no malloc_trim), or no FFI permission.
    }
  }
  return null;
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
 * fragmentation otherwise keeps (measured after 5,000 connections: RSS 305 MiB with a plain
 * collection, 162 MiB with last-resort, 116 MiB with both; idle 97). Returns whether malloc_trim ran.
 */
export function collectGarbage(opts: { thorough?: boolean } = {}): boolean {
  const gc = (globalThis as { gc?: (o?: unknown) => void }).gc;
  if (opts.thorough !== true) {
    gc?.();
    return false;
  }
  gc?.({ type: "major", execution: "sync", flavor: "last-resort" });
  return trimMalloc();
}

/**
 * Gives the memory glibc's malloc holds free back to the system (malloc_trim), without a garbage
 * collection. Returns whether it ran (false without glibc or the FFI permission).
 */
export function trimMalloc(): boolean {
  mallocTrim ??= openMallocTrim();
  mallocTrim?.();
  return mallocTrim !== null;
}

/** External (buffer) memory above which {@linkcode collectGarbageIfBuffersPiled} collects. */
export const EXTERNAL_GC_BYTES = 16 * 2 ** 20;

/**
 * Collects garbage when buffers outside the V8 heap hold more than {@linkcode EXTERNAL_GC_BYTES}
 * and more than a quarter of the heap in use; returns whether it did. Kernel tools' input and
 * output live in such buffers, which V8 does not weigh when it decides to collect: with a small
 * heap (iptables mode, 1,000 services, a change a second, each partial restore rewriting
 * KUBE-SERVICES) they piled up to 34 MiB, and the malloc memory under them, until a collection
 * two minutes later. With a large heap V8 collects often on its own, and a forced collection
 * would cost more (the quarter keeps it rare there).
 */
export function collectGarbageIfBuffersPiled(): boolean {
  const m = Deno.memoryUsage();
  if (m.external <= Math.max(EXTERNAL_GC_BYTES, m.heapUsed / 4)) return false;
  collectGarbage();
  return true;
}
