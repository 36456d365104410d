/**
 * Copies one direction of a TCP connection with two buffers, so that the next read overlaps
 * the current write, and half-closes the destination when the source ends.
 * @module
 */

/** First buffer size: most connections move little data and keep this. */
const MIN_BUFFER = 64 * 1024;
/**
 * Largest buffer. Per-read overhead dominates on fast links: measured on loopback, 4 MiB buffers
 * carry about 90% of direct throughput where 64 KiB carry about 35% (`deno task bench`).
 */
const MAX_BUFFER = 4 * 1024 * 1024;

/** Writes all of `data`, looping over short writes. */
async function writeAll(w: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await w.write(data.subarray(off));
}

/**
 * Copies `src` to `dst` until `src` ends, then shuts down `dst`'s write side so the peer sees
 * EOF while the other direction keeps flowing. Buffers start small and grow (x4, up to 4 MiB)
 * while reads keep filling them, so only bulk streams pay for large buffers. Returns the bytes
 * copied; rejects on an I/O error (the caller then closes both connections).
 */
export async function copyHalf(src: Deno.Conn, dst: Deno.Conn, watch?: Progress): Promise<number> {
  let size = MIN_BUFFER;
  let cur = new Uint8Array(size);
  let spare = new Uint8Array(size);
  let total = 0;
  let n = await src.read(cur);
  while (n !== null) {
    // A full read means the sender is ahead of us: give the following reads more room.
    if (n === cur.length && size < MAX_BUFFER) size = Math.min(MAX_BUFFER, size * 4);
    if (spare.length < size) spare = new Uint8Array(size);
    if (watch !== undefined) watch.writingSince = watch.lastActivity = watch.now();
    const write = writeAll(dst, cur.subarray(0, n));
    const read = src.read(spare);
    // Both are awaited below; a failure of one must not leave the other unhandled.
    read.catch(() => {});
    await write;
    if (watch !== undefined) {
      watch.writingSince = undefined;
      watch.lastActivity = watch.now();
    }
    total += n;
    n = await read;
    [cur, spare] = [spare, cur];
  }
  await dst.closeWrite().catch(() => {});
  return total;
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

/**
 * Splices two connections both ways; resolves when both directions ended, closing both. With
 * `limits`, a connection idle too long, or one whose peer stopped reading, is closed.
 */
export async function splice(a: Deno.Conn, b: Deno.Conn, limits?: SpliceLimits): Promise<void> {
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
  let timer: ReturnType<typeof setInterval> | undefined;
  const bounds = [limits?.idleTimeoutMs ?? 0, limits?.writeTimeoutMs ?? 0].filter((x) => x > 0);
  if (bounds.length > 0) {
    timer = setInterval(() => {
      const t = now();
      const idle = limits!.idleTimeoutMs > 0 &&
        t - Math.max(ab.lastActivity, ba.lastActivity) >= limits!.idleTimeoutMs;
      const stalled = limits!.writeTimeoutMs > 0 &&
        [ab, ba].some((d) => d.writingSince !== undefined && t - d.writingSince >= limits!.writeTimeoutMs);
      // Closing makes the pending reads and writes fail, which ends both directions below.
      if (idle || stalled) closeBoth();
    }, Math.max(50, Math.min(...bounds) / 4));
  }
  try {
    await Promise.all([copyHalf(a, b, ab), copyHalf(b, a, ba)]);
  } catch {
    // A reset on one side ends both; the other direction's pending read then fails too.
  } finally {
    clearInterval(timer);
    closeBoth();
  }
}
