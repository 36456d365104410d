/**
 * One proxy per node. A running proxy holds an abstract Unix socket, whose name the kernel scopes
 * to the network namespace (the node, for a hostNetwork pod or a systemd unit; each test
 * namespace its own) and releases when the process ends, however it ends. A second start finds
 * it taken, asks the holder who it is (it answers with its identity), waits a little for a holder
 * that is stopping (a rolling update: the old pod stops while the new one starts), and otherwise
 * refuses, naming it; `--take-over` asks the holder to stop first. `--cleanup` asks the same
 * question to warn that a running proxy will write its rules again.
 * @module
 */
import type { Clock } from "../../runtime/clock.ts";
import type { Logger } from "../../runtime/logger.ts";

/** The socket's abstract name (a leading NUL: no file, scoped to the network namespace). */
export const LOCK_NAME = "\0kube-proxy-deno";
/** How long a start waits for a holder that does not stop by itself. */
export const LOCK_WAIT_MS = 10_000;
/** How long a question to the holder may take. */
const ASK_MS = 2_000;
/** How often a waiting start looks again. */
const RETRY_MS = 200;

/** Who a running proxy is: said to a second start, and written into the rules it programs. */
export interface Identity {
  readonly pid: number;
  readonly mode: string;
  /** Random per process: two processes never share it, across restarts and reboots. */
  readonly instance: string;
  readonly node: string;
  readonly version: string;
  /** ISO time of the process's start. */
  readonly started: string;
}

/** Says `who` as log lines and errors do: `kube-proxy-deno 0.1.0 (nftables mode, pid 42, ...)`. */
export function describeIdentity(who: Identity): string {
  return `kube-proxy-deno ${who.version} (${who.mode} mode, pid ${who.pid}, instance ${who.instance}, ` +
    `node ${who.node}, started ${who.started})`;
}

/** The short form written into rules: `nftables/5f3a9c1e pid 42`. */
export function writerOf(who: Identity): string {
  return `${who.mode}/${who.instance} pid ${who.pid}`;
}

/** The lock, held: it answers who holds it, and a take-over request, until it is released. */
export class NodeLock {
  readonly #listener: Deno.Listener;
  readonly #me: Identity;
  #onTakeOver: (by: Identity | undefined) => void = () => {};

  private constructor(listener: Deno.Listener, me: Identity) {
    this.#listener = listener;
    this.#me = me;
  }

  /** Takes the lock when free; undefined when another process holds it. */
  static tryTake(me: Identity, name = LOCK_NAME): NodeLock | undefined {
    try {
      return new NodeLock(Deno.listen({ transport: "unix", path: name }), me);
    } catch (e) {
      if (e instanceof Deno.errors.AddrInUse) return undefined;
      throw e;
    }
  }

  /**
   * Answers each asker with this holder's identity until {@linkcode release}; a take-over request
   * calls `onTakeOver` once (the proxy then stops as SIGTERM does).
   */
  async serve(onTakeOver: (by: Identity | undefined) => void): Promise<void> {
    this.#onTakeOver = onTakeOver;
    try {
      for await (const conn of this.#listener) void this.#answer(conn);
    } catch { /* released */ }
  }

  async #answer(conn: Deno.Conn): Promise<void> {
    try {
      await conn.write(new TextEncoder().encode(JSON.stringify(this.#me) + "\n"));
      const line = await readLine(conn, ASK_MS);
      if (line?.startsWith("take-over ")) {
        await conn.write(new TextEncoder().encode("stopping\n"));
        this.#onTakeOver(parseIdentity(line.slice("take-over ".length)));
      }
    } catch {
      /* the asker went away */
    } finally {
      try {
        conn.close();
      } catch { /* closed */ }
    }
  }

  /** Releases the lock (the kernel releases it anyway when the process ends). */
  release(): void {
    try {
      this.#listener.close();
    } catch { /* released already */ }
  }
}

/**
 * Asks the holder of the lock who it is (and, with `takeOver`, to stop); undefined when none holds
 * it or it does not answer in time.
 */
export async function askHolder(
  o: { readonly takeOver?: Identity; readonly name?: string } = {},
): Promise<Identity | undefined> {
  let conn: Deno.Conn;
  try {
    conn = await Deno.connect({ transport: "unix", path: o.name ?? LOCK_NAME });
  } catch {
    return undefined;
  }
  try {
    const who = parseIdentity(await readLine(conn, ASK_MS));
    if (who !== undefined && o.takeOver !== undefined) {
      await conn.write(new TextEncoder().encode(`take-over ${JSON.stringify(o.takeOver)}\n`));
      await readLine(conn, ASK_MS);
    }
    return who;
  } catch {
    return undefined;
  } finally {
    try {
      conn.close();
    } catch { /* closed */ }
  }
}

/** What {@linkcode takeNodeLock} needs. */
export interface LockWait {
  readonly me: Identity;
  /** Ask the holder to stop instead of waiting for it to stop by itself. */
  readonly takeOver: boolean;
  readonly log: Logger;
  readonly clock: Clock;
  /** Default {@linkcode LOCK_WAIT_MS}. */
  readonly waitMs?: number;
  readonly name?: string;
}

/**
 * Takes the lock, waiting up to `waitMs` for a holder to stop (asking it to, with `takeOver`);
 * returns it, or the holder that kept it (named in the caller's refusal; undefined when the holder
 * never answered).
 */
export async function takeNodeLock(o: LockWait): Promise<NodeLock | { readonly heldBy?: Identity }> {
  const deadline = o.clock.now() + (o.waitMs ?? LOCK_WAIT_MS);
  let holder: Identity | undefined;
  let asked = false;
  for (;;) {
    const lock = NodeLock.tryTake(o.me, o.name);
    if (lock !== undefined) {
      if (holder !== undefined) o.log.info("The other instance stopped; this one holds the node now");
      return lock;
    }
    const who = await askHolder({ name: o.name, takeOver: o.takeOver && !asked ? o.me : undefined });
    if (who !== undefined && holder === undefined) {
      o.log.warn(
        o.takeOver
          ? "Another kube-proxy-deno runs on this node; asking it to stop (--take-over)"
          : "Another kube-proxy-deno runs on this node; waiting for it to stop",
        { other: describeIdentity(who) },
      );
    }
    if (who !== undefined) asked ||= o.takeOver;
    holder = who ?? holder;
    if (o.clock.now() >= deadline) return { heldBy: holder };
    await new Promise<void>((resolve) => o.clock.setTimer(resolve, RETRY_MS));
  }
}

/** Returns a new identity for this process. */
export function newIdentity(o: { mode: string; node: string; version: string }): Identity {
  return {
    pid: Deno.pid,
    mode: o.mode,
    instance: crypto.randomUUID().slice(0, 8),
    node: o.node,
    version: o.version,
    started: new Date(performance.timeOrigin).toISOString(),
  };
}

function parseIdentity(line: string | undefined): Identity | undefined {
  if (line === undefined) return undefined;
  try {
    const v = JSON.parse(line) as Identity;
    return typeof v?.pid === "number" && typeof v.mode === "string" ? v : undefined;
  } catch {
    return undefined;
  }
}

/** Reads one line (at most 4 KiB) from `conn` within `ms`; undefined when none comes. */
async function readLine(conn: Deno.Conn, ms: number): Promise<string | undefined> {
  const buf = new Uint8Array(4096);
  let got = 0;
  const timer = setTimeout(() => conn.close(), ms);
  try {
    while (got < buf.length) {
      const n = await conn.read(buf.subarray(got));
      if (n === null) break;
      got += n;
      const nl = buf.subarray(0, got).indexOf(10);
      if (nl >= 0) return new TextDecoder().decode(buf.subarray(0, nl));
    }
    return undefined;
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}
