/**
 * TCP dials that never leak a socket: a dial given up (timeout) keeps waiting for the connect in
 * the background and closes the connection if it arrives late. (`Deno.connect` with an abort signal
 * can reject after the socket connected, leaving it open and unreferenced: Deno 2.9.6.)
 * @module
 */

/** The dial timed out; the socket, if it ever connects, is closed. */
export class DialTimeout extends Error {
  /** @param ms how long the dial was given. */
  constructor(readonly ms: number) {
    super(`connect timed out after ${ms} ms`);
    this.name = "DialTimeout";
  }
}

/** How connections are opened (Deno.connect; injectable for tests). */
export type Connect = (o: { hostname: string; port: number }) => Promise<Deno.TcpConn>;

/**
 * Connects to `hostname:port` within `timeoutMs`. On timeout it rejects with {@linkcode DialTimeout}
 * and closes the connection if it completes later.
 */
export function dialTCP(
  hostname: string,
  port: number,
  timeoutMs: number,
  connect: Connect = (o) => Deno.connect(o),
): Promise<Deno.TcpConn> {
  const pending = connect({ hostname, port });
  return new Promise((resolve, reject) => {
    let done = false;
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      reject(new DialTimeout(timeoutMs));
      // Given up: whatever the connect produces later is closed.
      pending.then((c) => {
        try {
          c.close();
        } catch { /* already closed */ }
      }, () => {});
    }, timeoutMs);
    pending.then((c) => {
      clearTimeout(timer);
      if (done) return;
      done = true;
      resolve(c);
    }, (e) => {
      clearTimeout(timer);
      if (done) return;
      done = true;
      reject(e);
    });
  });
}
