/**
 * Copies both directions of a TCP connection (one small buffer per direction while traffic is
 * small; two large ones, overlapping read and write, while a bulk stream runs), half-closing
 * each destination when its source ends, with idle and stalled-write bounds.
 * @module
 */

/**
 * Buffer size of a direction that moves little data (most connections: requests and answers).
 * A pending read holds its buffer, so this is what an idle connection costs: 2 x 4 KiB.
 */
const MIN_BUFFER = 4 * 1024;
/**
 * Largest buffer. Per-read overhead dominates on fast links: measured on loopback, 4 MiB buffers
 * carry about 90% of direct throughput where 64 KiB carry about 35% (`deno task bench`).
 */
const MAX_BUFFER = 4 * 1024 * 1024;
/** Reads in a row that use under a quarter of a grown buffer before it shrinks back to the minimum. */
const SHRINK_AFTER = 4;

/** Writes all of `data`, looping over short writes. */
async function writeAll(w: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await w.write(data.subarray(off));
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
  let cur = new Uint8Array(MIN_BUFFER);
  let spare: Uint8Array<ArrayBuffer> | undefined;
  let small = 0;
  let total = 0;
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
      if (cur.length > MIN_BUFFER) cur = new Uint8Array(MIN_BUFFER);
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
    [cur, spare] = [spare, cur];
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
