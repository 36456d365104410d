/**
 * Copies one direction of a TCP connection with two buffers, so that the next read overlaps
 * the current write, and half-closes the destination when the source ends.
 * @module
 */

/** Size of each of the two copy buffers. */
const BUFFER_SIZE = 256 * 1024;

/** Writes all of `data`, looping over short writes. */
async function writeAll(w: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await w.write(data.subarray(off));
}

/**
 * Copies `src` to `dst` until `src` ends, then shuts down `dst`'s write side so the peer sees
 * EOF while the other direction keeps flowing. Returns the bytes copied; rejects on an I/O
 * error (the caller then closes both connections).
 */
export async function copyHalf(src: Deno.Conn, dst: Deno.Conn): Promise<number> {
  let cur = new Uint8Array(BUFFER_SIZE);
  let spare = new Uint8Array(BUFFER_SIZE);
  let total = 0;
  let n = await src.read(cur);
  while (n !== null) {
    const write = writeAll(dst, cur.subarray(0, n));
    const read = src.read(spare);
    // Both are awaited below; a failure of one must not leave the other unhandled.
    read.catch(() => {});
    await write;
    total += n;
    n = await read;
    [cur, spare] = [spare, cur];
  }
  await dst.closeWrite().catch(() => {});
  return total;
}

/** Splices two connections both ways; resolves when both directions ended, closing both. */
export async function splice(a: Deno.Conn, b: Deno.Conn): Promise<void> {
  const closeBoth = () => {
    for (const c of [a, b]) {
      try {
        c.close();
      } catch { /* already closed */ }
    }
  };
  try {
    await Promise.all([copyHalf(a, b), copyHalf(b, a)]);
  } catch {
    // A reset on one side ends both; the other direction's pending read then fails too.
  } finally {
    closeBoth();
  }
}
