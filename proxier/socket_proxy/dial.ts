/**
 * TCP dials for the userspace proxy: staggered, never leaking a socket.
 *
 * An attempt that has not connected after its stagger delay is not abandoned: the next endpoint
 * is dialled beside it and the first to connect wins. On a saturated event loop a timer can fire
 * long after a connect completed in the kernel; racing instead of cancelling turns such a false
 * timeout into a harmless extra SYN instead of a dropped client. Every socket that loses the race,
 * or connects after the dial was given up, is closed (`Deno.connect` with an abort signal can
 * reject after the socket connected, leaving it open and unreferenced: Deno 2.9.6; we never abort).
 * @module
 */

/** The dial gave up waiting for this attempt; its socket, if it ever connects, is closed. */
export class DialTimeout extends Error {
  /** @param ms how long the whole dial waited. */
  constructor(readonly ms: number) {
    super(`connect timed out after ${ms} ms`);
    this.name = "DialTimeout";
  }
}

/** How connections are opened (Deno.connect; injectable for tests). */
export type Connect = (o: { hostname: string; port: number }) => Promise<Deno.TcpConn>;

/** What {@linkcode dialStaggered} needs. */
export interface StaggeredDial {
  /** The next endpoint (`ip:port` / `[ip]:port`) to try, not in `tried`; undefined when none is left. */
  pick(tried: ReadonlySet<string>): string | undefined;
  /**
   * Attempt i+1 starts `staggerMs[i]` after attempt i unless every attempt so far failed sooner
   * (then at once); at most `staggerMs.length` attempts; the dial is given up `sum(staggerMs)`
   * after it started.
   */
  readonly staggerMs: readonly number[];
  /** Called once for each attempt that failed (refused, or still pending when the dial gave up). */
  onFailure(endpoint: string, error: Error): void;
  readonly connect?: Connect;
}

/** Splits `ip:port` / `[ip]:port`. */
export function splitEndpoint(ep: string): { hostname: string; port: number } {
  const i = ep.lastIndexOf(":");
  return { hostname: ep.slice(0, i).replace(/^\[|\]$/g, ""), port: Number(ep.slice(i + 1)) };
}

function closeQuietly(c: Deno.Conn): void {
  try {
    c.close();
  } catch { /* already closed */ }
}

/**
 * Dials endpoints chosen by `o.pick` until one connects; resolves with that connection and its
 * endpoint, or undefined when every attempt failed or the time ran out. Never rejects.
 */
export function dialStaggered(
  o: StaggeredDial,
): Promise<{ conn: Deno.TcpConn; endpoint: string } | undefined> {
  const connect = o.connect ?? ((a) => Deno.connect(a));
  const deadlineMs = o.staggerMs.reduce((a, b) => a + b, 0);
  const tried = new Set<string>();
  const pending = new Set<string>();
  return new Promise((resolve) => {
    const t0 = performance.now();
    let done = false;
    let started = 0;
    // One timer at a time (the next attempt's stagger, or the deadline): a dial is made for every
    // new connection, and each timer costs about a microsecond to make and clear.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arm = (ms: number) => {
      clearTimeout(timer);
      timer = setTimeout(tick, Math.max(0, Math.min(ms, deadlineMs - (performance.now() - t0))));
    };
    const finish = (won?: { conn: Deno.TcpConn; endpoint: string }) => {
      done = true;
      clearTimeout(timer);
      resolve(won);
    };
    const start = (): boolean => {
      if (started >= o.staggerMs.length) return false;
      const endpoint = o.pick(tried);
      if (endpoint === undefined) return false;
      const i = started++;
      tried.add(endpoint);
      pending.add(endpoint);
      connect(splitEndpoint(endpoint)).then((conn) => {
        pending.delete(endpoint);
        // Lost the race, or connected after the dial gave up.
        if (done) closeQuietly(conn);
        else finish({ conn, endpoint });
      }, (e) => {
        pending.delete(endpoint);
        if (done) return;
        o.onFailure(endpoint, e as Error);
        if (pending.size === 0 && !start()) finish();
      });
      arm(o.staggerMs[i]);
      return true;
    };
    const tick = () => {
      if (done) return;
      if (performance.now() - t0 < deadlineMs) {
        // Nothing left to start: wait for the pending attempts until the deadline, then give up.
        if (!start()) arm(deadlineMs);
        return;
      }
      for (const endpoint of pending) o.onFailure(endpoint, new DialTimeout(deadlineMs));
      finish();
    };
    if (!start()) finish();
  });
}
