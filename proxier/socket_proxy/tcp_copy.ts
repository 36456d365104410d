/**
 * Copies both directions of a TCP connection (one small buffer per direction while traffic is
 * small; two large ones, overlapping read and write, while a bulk stream runs), half-closing
 * each destination when its source ends, with idle and stalled-write bounds.
 * @module
 */
import { writeAll } from "../runtime/write_all.ts";

/**
 * Buffer size of a direction that moves little data (most connections: requests and answers).
 * A pending read holds its buffer, so this is what an idle connection costs: 2 x 4 KiB.
 */
const MIN_BUFFER = 4 * 1024;
/**
 * Largest buffer. Per-read overhead dominates on fast links, so a direction that fills its buffer
 * grows it up to this; small buffers cap a single stream far below the link.
 */
const MAX_BUFFER = 4 * 1024 * 1024;
/** Reads in a row that use under a quarter of a grown buffer before it shrinks back to the minimum. */
const SHRINK_AFTER = 4;

/**
 * Free small buffers, reused by later connections: a new-connection-per-request load otherwise
 * allocates and drops 2 x {@linkcode MIN_BUFFER} per connection (tens of MiB/s of garbage, which
 * the heap grows to absorb). Bounded, so a burst of thousands of connections leaves at most
 * {@linkcode POOL_MAX} x 4 KiB behind.
 */
const pool: Uint8Array<ArrayBuffer>[] = [];
const POOL_MAX = 256;

function takeSmall(): Uint8Array<ArrayBuffer> {
  return pool.pop() ?? new Uint8Array(MIN_BUFFER);
}

/** Returns a small buffer to the pool. The caller guarantees no read or write still uses it. */
function giveBack(buf: Uint8Array<ArrayBuffer>): void {
  if (buf.length === MIN_BUFFER && pool.length < POOL_MAX) pool.push(buf);
}

/**
 * Copies `src` to `dst` until `src` ends, then shuts down `dst`'s write side so the peer sees
 * EOF while the other direction keeps flowing. Returns the bytes copied; rejects on an I/O error
 * (the caller then closes both connections).
 *
 * Memory: one {@linkcode MIN_BUFFER} buffer while traffic is small, read and written in turn.
 * A read that fills its buffer means the sender is ahead: the buffer grows (x4, up to
 * {@linkcode MAX_BUFFER}) and a second one lets the next read overlap the current write. After
 * {@linkcode SHRINK_AFTER} small reads both are dropped for one small buffer again, so a burst
 * does not keep megabytes per connection.
 */
export async function copyHalf(src: Deno.Conn, dst: Deno.Conn, watch?: Progress): Promise<number> {
  // Invariant: no read or write is pending on `cur` when this returns or throws (each is awaited
  // before anything else happens to `cur`; the overlapped read goes into `spare`, never pooled), so
  // `cur` can go back to the pool in `finally`.
  let cur = takeSmall();
  let spare: Uint8Array<ArrayBuffer> | undefined;
  let small = 0;
  let total = 0;
  try {
    let n = await src.read(cur);
    while (n !== null) {
      if (n === cur.length && cur.length < MAX_BUFFER) {
        const size = Math.min(MAX_BUFFER, cur.length * 4);
        spare = new Uint8Array(size);
        small = 0;
      } else if (cur.length > MIN_BUFFER && n < cur.length / 4 && ++small >= SHRINK_AFTER) {
        spare = undefined;
        small = 0;
      }
      if (watch !== undefined) watch.writingSince = watch.lastActivity = watch.now();
      total += n;
      if (spare === undefined) {
        // Small traffic: nothing to overlap; the buffer is read into again once written.
        await writeAll(dst, cur.subarray(0, n));
        if (cur.length > MIN_BUFFER) cur = takeSmall();
        progressed(watch);
        n = await src.read(cur);
        continue;
      }
      const write = writeAll(dst, cur.subarray(0, n));
      if (spare.length < cur.length) spare = new Uint8Array(cur.length);
      const read = src.read(spare);
      // Both are awaited below; a failure of one must not leave the other unhandled.
      read.catch(() => {});
      await write;
      progressed(watch);
      n = await read;
      // `cur`'s write is done; it is read into next, unless it is a small one (the first overlap).
      const written = cur;
      cur = spare;
      if (written.length === MIN_BUFFER) {
        giveBack(written);
        spare = new Uint8Array(cur.length);
      } else {
        spare = written;
      }
    }
  } finally {
    giveBack(cur);
  }
  await dst.closeWrite().catch(() => {});
  return total;
}

function progressed(watch: Progress | undefined): void {
  if (watch === undefined) return;
  watch.writingSince = undefined;
  watch.lastActivity = watch.now();
}

/** One direction's activity, for the idle and stalled-write bounds. */
interface Progress {
  now(): number;
  lastActivity: number;
  /** When the pending write started; undefined while none is pending. */
  writingSince?: number;
}

/** Limits on a spliced connection (0 disables one). */
export interface SpliceLimits {
  /** Close after this long without a byte moving either way. */
  readonly idleTimeoutMs: number;
  /** Close when a write has waited this long (a peer that stopped reading). */
  readonly writeTimeoutMs: number;
}

/** One spliced connection as its watch sees it. */
interface Watched {
  readonly ab: Progress;
  readonly ba: Progress;
  closeBoth(): void;
}

/**
 * Enforces {@linkcode SpliceLimits} on every connection spliced with it, from one timer for all
 * (not one per connection: a timer costs about a microsecond to make and clear, on every
 * connection of a new-connection-per-request load). The timer runs only while a connection is
 * watched, every quarter of the smaller bound, so a connection is closed at most 1.25 bounds after
 * it stalled. Construction starts nothing.
 */
export class SpliceWatch {
  readonly #limits: SpliceLimits;
  readonly #periodMs: number;
  readonly #live = new Set<Watched>();
  #timer: ReturnType<typeof setInterval> | undefined;

  /** @param limits the bounds; a watch with both at 0 watches nothing */
  constructor(limits: SpliceLimits) {
    this.#limits = limits;
    const bounds = [limits.idleTimeoutMs, limits.writeTimeoutMs].filter((x) => x > 0);
    this.#periodMs = bounds.length === 0 ? 0 : Math.max(50, Math.min(...bounds) / 4);
  }

  /** Watches `w` until the returned function is called (at once when nothing is bounded). */
  add(w: Watched): () => void {
    if (this.#periodMs === 0) return () => {};
    this.#live.add(w);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#sweep(), this.#periodMs);
      // Connections keep the process alive by themselves; the watch must not.
      Deno.unrefTimer(this.#timer);
    }
    return () => {
      this.#live.delete(w);
      if (this.#live.size > 0) return;
      clearInterval(this.#timer);
      this.#timer = undefined;
    };
  }

  #sweep(): void {
    const t = performance.now();
    const { idleTimeoutMs, writeTimeoutMs } = this.#limits;
    for (const w of this.#live) {
      const idle = idleTimeoutMs > 0 && t - Math.max(w.ab.lastActivity, w.ba.lastActivity) >= idleTimeoutMs;
      const stalled = writeTimeoutMs > 0 &&
        [w.ab, w.ba].some((d) => d.writingSince !== undefined && t - d.writingSince >= writeTimeoutMs);
      // Closing makes the pending reads and writes fail, which ends both directions in splice.
      if (idle || stalled) w.closeBoth();
    }
  }
}

/**
 * Splices two connections both ways; resolves when both directions ended, closing both. With a
 * `watch`, a connection idle too long, or one whose peer stopped reading, is closed.
 */
export async function splice(a: Deno.Conn, b: Deno.Conn, watch?: SpliceWatch): Promise<void> {
  const closeBoth = () => {
    for (const c of [a, b]) {
      try {
        c.close();
      } catch { /* already closed */ }
    }
  };
  const now = () => performance.now();
  const ab: Progress = { now, lastActivity: now() };
  const ba: Progress = { now, lastActivity: now() };
  const unwatch = watch?.add({ ab, ba, closeBoth });
  try {
    await Promise.all([copyHalf(a, b, ab), copyHalf(b, a, ba)]);
  } catch {
    // A reset on one side ends both; the other direction's pending read then fails too.
  } finally {
    unwatch?.();
    closeBoth();
  }
}
