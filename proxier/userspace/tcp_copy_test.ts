import { assertEquals } from "../../tests/assert.ts";
import { copyHalf } from "./tcp_copy.ts";

/**
 * A source that answers each read with the next chunk size (filling as much of the caller's
 * buffer as the chunk asks, `"full"` for all of it), recording the buffer size each read offered.
 */
function source(chunks: Array<number | "full">) {
  const offered: number[] = [];
  let i = 0;
  const conn = {
    read: (buf: Uint8Array) => {
      offered.push(buf.length);
      if (i >= chunks.length) return Promise.resolve(null);
      const c = chunks[i++];
      return Promise.resolve(c === "full" ? buf.length : Math.min(c, buf.length));
    },
  } as unknown as Deno.Conn;
  return { conn, offered };
}

function sink() {
  let bytes = 0;
  let closedWrite = false;
  const conn = {
    write: (d: Uint8Array) => {
      bytes += d.length;
      return Promise.resolve(d.length);
    },
    closeWrite: () => {
      closedWrite = true;
      return Promise.resolve();
    },
  } as unknown as Deno.Conn;
  return { conn, bytes: () => bytes, closedWrite: () => closedWrite };
}

Deno.test("copyHalf: small traffic keeps one 4 KiB buffer; a bulk burst grows it, and it shrinks back after", async () => {
  const src = source([100, 200, "full", "full", "full", 10, 10, 10, 10, 10, 10, 10]);
  const dst = sink();
  const total = await copyHalf(src.conn, dst.conn);
  const K = 1024;
  assertEquals(src.offered, [
    4 * K,
    4 * K,
    4 * K,
    16 * K,
    64 * K,
    256 * K,
    256 * K,
    256 * K,
    256 * K,
    4 * K,
    4 * K,
    4 * K,
    4 * K,
  ]);
  assertEquals(total, 100 + 200 + 4 * K + 16 * K + 64 * K + 7 * 10);
  assertEquals(dst.bytes(), total);
  assertEquals(dst.closedWrite(), true, "the destination is half-closed at the source's end");
});
