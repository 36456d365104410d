/**
 * Loopback servers and helpers for tests that move real bytes.
 * @module
 */
import { CONVERGE_MS } from "./bounds.ts";

/** Returns a TCP port that was free a moment ago on 127.0.0.1. */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Returns a UDP port that was free a moment ago on 127.0.0.1. */
export function freeUdpPort(): number {
  const l = Deno.listenDatagram({ hostname: "127.0.0.1", port: 0, transport: "udp" });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Reads a connection to its end. */
export async function readAll(conn: Deno.Conn): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  const buf = new Uint8Array(64 * 1024);
  for (;;) {
    const n = await conn.read(buf);
    if (n === null) break;
    chunks.push(buf.slice(0, n));
  }
  const out = new Uint8Array(chunks.reduce((a, c) => a + c.length, 0));
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

/** Writes all of `data`. */
export async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

/** A TCP server on 127.0.0.1 that answers every connection with `name` and closes. */
export function tcpNameServer(name: string, hostname = "127.0.0.1"): { port: number; close(): void } {
  const l = Deno.listen({ hostname, port: 0 });
  (async () => {
    try {
      for await (const c of l) {
        c.write(new TextEncoder().encode(name)).finally(() => c.close()).catch(() => {});
      }
    } catch { /* closed */ }
  })();
  return { port: (l.addr as Deno.NetAddr).port, close: () => l.close() };
}

/** A UDP server on 127.0.0.1 (or `hostname`) that answers every datagram with `name`. */
export function udpNameServer(name: string, hostname = "127.0.0.1"): { port: number; close(): void } {
  const s = Deno.listenDatagram({ hostname, port: 0, transport: "udp" });
  (async () => {
    try {
      for (;;) {
        const [, addr] = await s.receive();
        await s.send(new TextEncoder().encode(name), addr);
      }
    } catch { /* closed */ }
  })();
  return { port: (s.addr as Deno.NetAddr).port, close: () => s.close() };
}

/** Connects to 127.0.0.1:port and returns what the server sends before closing. */
export async function tcpAsk(port: number, hostname = "127.0.0.1"): Promise<string> {
  const c = await Deno.connect({ hostname, port });
  try {
    return new TextDecoder().decode(await readAll(c));
  } finally {
    c.close();
  }
}

/** Sends one datagram from a fresh loopback socket and returns the reply text (rejects after `ms`). */
export async function udpAsk(port: number, ms = 2000, hostname = "127.0.0.1"): Promise<string> {
  const local = hostname.includes(":") ? "::1" : "127.0.0.1";
  const s = Deno.listenDatagram({ hostname: local, port: 0, transport: "udp" });
  try {
    await s.send(new TextEncoder().encode("ping"), { transport: "udp", hostname, port });
    const timer = new Promise<never>((_, rej) => setTimeout(() => rej(new Error("udp timeout")), ms));
    const [data] = await Promise.race([s.receive(), timer]);
    return new TextDecoder().decode(data);
  } finally {
    s.close();
  }
}

/**
 * A failure no retry can mend (a helper process that died): {@linkcode eventually} rethrows it at
 * once instead of polling it until its bound.
 */
export class Unrecoverable extends Error {
  override name = "Unrecoverable";
}

/**
 * Polls `fn` until it returns without throwing (or `ms` passes, then rethrows; an
 * {@linkcode Unrecoverable} is rethrown at once). The default bound is the suite's for a state
 * ({@linkcode CONVERGE_MS}): it returns as soon as `fn` holds, so only a check that never holds pays
 * it, and a busy machine slows a check without failing it.
 */
export async function eventually<T>(fn: () => Promise<T> | T, ms = CONVERGE_MS): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof Unrecoverable || Date.now() > end) throw e;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}

/**
 * Serves `handler` over HTTPS on 127.0.0.1 (a free port) with the test certificate signed by
 * `tests/testdata/tls/ca.crt`, until `signal` aborts.
 */
export async function serveTls(
  handler: (req: Request) => Response | Promise<Response>,
  signal: AbortSignal,
): Promise<Deno.HttpServer<Deno.NetAddr>> {
  const tls = new URL("../testdata/tls/", import.meta.url).pathname;
  return Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: await Deno.readTextFile(`${tls}server.crt`),
    key: await Deno.readTextFile(`${tls}server.key`),
    signal,
    onListen: () => {},
  }, handler);
}
