/**
 * Whole writes on a connection: `Deno.Conn.write` may write less than it was given.
 * @module
 */

/** Writes all of `data` to `w`, looping over short writes; rejects as `w.write` does. */
export async function writeAll(
  w: { write(p: Uint8Array): Promise<number> },
  data: Uint8Array,
): Promise<void> {
  for (let off = 0; off < data.length;) off += await w.write(data.subarray(off));
}
