/**
 * Explicit garbage collection, where the runtime allows it.
 * @module
 */

/**
 * Collects garbage now when the runtime allows it (`--v8-flags=--expose-gc`, as deno.json's start
 * and compile tasks set); a no-op otherwise. A full sync at scale leaves tens of MiB of garbage,
 * and a burst of proxied connections as much in buffers; V8 otherwise keeps the heap at its peak
 * until its memory reducer runs, minutes later. Callers run it only after such rare events (full
 * syncs: start, failures, hourly; the end of a connection burst), so the pause (tens of ms) is too.
 */
export function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}
