import { assertEquals } from "../../tests/support/assert.ts";
import { copyHalf, splice, SpliceWatch } from "./tcp_copy.ts";

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

/** A connection whose reads wait until it is closed (then fail, as Deno's do), or get `feed`'s data. */
function quietConn() {
  let closed = false;
  let wake: ((n: number | null) => void) | undefined;
  let fail: ((e: Error) => void) | undefined;
  const conn = {
    read: (buf: Uint8Array) =>
      new Promise<number | null>((res, rej) => {
        if (closed) return rej(new Error("closed"));
        wake = (n) => res(n === null ? null : Math.min(n, buf.length));
        fail = rej;
      }),
    write: (d: Uint8Array) => Promise.resolve(d.length),
    closeWrite: () => Promise.resolve(),
    close: () => {
      closed = true;
      fail?.(new Error("closed"));
    },
  } as unknown as Deno.Conn;
  return { conn, closed: () => closed, feed: (n: number) => wake?.(n) };
}

Deno.test("SpliceWatch: one timer closes the idle connection and spares the busy one", async () => {
  const watch = new SpliceWatch({ idleTimeoutMs: 300, writeTimeoutMs: 0 });
  const idle = [quietConn(), quietConn()];
  const busy = [quietConn(), quietConn()];
  const idleDone = splice(idle[0].conn, idle[1].conn, watch);
  const busyDone = splice(busy[0].conn, busy[1].conn, watch);
  const feeder = setInterval(() => busy[0].feed(10), 50);
  // The watch's timer is unreferenced (real sockets keep a program alive; these fakes do not).
  const alive = setInterval(() => {}, 1000);
  await idleDone;
  assertEquals(idle.map((c) => c.closed()), [true, true]);
  assertEquals(busy.map((c) => c.closed()), [false, false], "bytes kept moving: still open");
  clearInterval(feeder);
  await busyDone;
  clearInterval(alive);
  assertEquals(busy.map((c) => c.closed()), [true, true], "idle once the bytes stopped");
});
