/**
 * A command run in a pod's container through the API server alone: `GET .../pods/NAME/exec` upgraded
 * to a WebSocket speaking the API's stream protocol (`v5.channel.k8s.io`, else `v4.channel.k8s.io`:
 * each binary message is a channel byte, 1 stdout, 2 stderr, 3 the command's end as a `Status`, then
 * its payload). Our own small client over one TCP (or TLS) connection: the platform's WebSocket shows
 * a refused upgrade as a bare status code, and a refusal's `Status` (who is forbidden what) is what
 * an operator needs. Nothing is written anywhere; the output is bounded and the whole exchange ends
 * at a deadline.
 * @module
 */
import type { ApiAccess } from "../../../sources/api_access.ts";

/** The stream protocols asked for, best first; both carry the command's end on channel 3. */
export const EXEC_PROTOCOLS: readonly string[] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

/** Which container runs what. */
export interface ExecTarget {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  readonly command: readonly string[];
}

/** How long and how much. */
export interface ExecLimits {
  /** The whole exchange, connection to the command's end. */
  readonly deadlineMs: number;
  /** stdout and stderr together; past it the stream is closed. */
  readonly maxOutputBytes: number;
  /** The program's stop. */
  readonly signal?: AbortSignal;
}

/** What came of it. */
export type ExecOutcome =
  /** The command ran and ended with `exitCode`. */
  | { readonly kind: "exited"; readonly exitCode: number; readonly stdout: string; readonly stderr: string }
  /** The container runtime could not start it (no such executable...): its message. */
  | { readonly kind: "not-started"; readonly message: string }
  /** The API server answered instead of upgrading (403 forbidden, 404 no such pod...). */
  | { readonly kind: "refused"; readonly status: number; readonly reason: string; readonly message: string }
  | { readonly kind: "timed-out"; readonly afterMs: number }
  | { readonly kind: "too-large"; readonly limit: number }
  /** No connection, a broken one, or a stream that ended without the command's end. */
  | { readonly kind: "unreachable"; readonly message: string };

/** The parts of {@linkcode ApiAccess} an exec uses. */
export type ExecAccess = Pick<ApiAccess, "server" | "headers" | "tls" | "proxyURL">;

const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
const MAX_HEAD = 64 * 1024;
const MAX_REFUSAL_BODY = 64 * 1024;
const READ_CHUNK = 16 * 1024;

/**
 * Runs `t.command` in the container and returns how it ended. Never throws for what the server or
 * the network does: each is an outcome.
 */
export async function podExec(api: ExecAccess, t: ExecTarget, l: ExecLimits): Promise<ExecOutcome> {
  const started = performance.now();
  const timeout = AbortSignal.timeout(l.deadlineMs);
  const stop = l.signal === undefined ? timeout : AbortSignal.any([timeout, l.signal]);
  const url = execURL(api.server, t);
  let conn: Deno.Conn | undefined;
  const close = () => {
    try {
      conn?.close();
    } catch { /* closed */ }
  };
  stop.addEventListener("abort", close, { once: true });
  // A connect that hangs (no route, a silent firewall) must not outlive the deadline: the exchange
  // races the signal, and a connection that opens after it is closed at once.
  const work = (async () => {
    conn = await open(url, api, stop);
    if (stop.aborted) close();
    return await exchange(conn, url, await api.headers(), l.maxOutputBytes);
  })();
  let fail = () => {};
  const aborted = new Promise<never>((_, reject) => {
    fail = () => reject(new Error("aborted"));
    if (stop.aborted) fail();
    else stop.addEventListener("abort", fail, { once: true });
  });
  // Whichever loses the race settles unobserved later: neither may become an unhandled rejection.
  work.catch(() => {});
  aborted.catch(() => {});
  try {
    return await Promise.race([work, aborted]);
  } catch (e) {
    if (timeout.aborted) return { kind: "timed-out", afterMs: Math.round(performance.now() - started) };
    if (stop.aborted) return { kind: "unreachable", message: "interrupted by the program's stop" };
    return { kind: "unreachable", message: (e as Error).message };
  } finally {
    stop.removeEventListener("abort", close);
    stop.removeEventListener("abort", fail);
    close();
  }
}

/** The exec URL: the command's words as repeated `command` parameters, stdout and stderr, no stdin. */
export function execURL(server: string, t: ExecTarget): URL {
  const url = new URL(
    `${server}/api/v1/namespaces/${encodeURIComponent(t.namespace)}/pods/${encodeURIComponent(t.pod)}/exec`,
  );
  for (const word of t.command) url.searchParams.append("command", word);
  url.searchParams.set("container", t.container);
  url.searchParams.set("stdout", "true");
  url.searchParams.set("stderr", "true");
  return url;
}

async function open(url: URL, api: ExecAccess, signal: AbortSignal): Promise<Deno.Conn> {
  const tls = url.protocol === "https:";
  const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(url.port || (tls ? 443 : 80));
  if (api.proxyURL === undefined) {
    if (!tls) return await Deno.connect({ hostname, port, signal });
    const caCerts = api.tls.caCerts === undefined ? undefined : [...api.tls.caCerts];
    return api.tls.cert !== undefined && api.tls.key !== undefined
      ? await Deno.connectTls({ hostname, port, caCerts, cert: api.tls.cert, key: api.tls.key })
      : await Deno.connectTls({ hostname, port, caCerts });
  }
  const proxy = new URL(api.proxyURL);
  if (proxy.protocol !== "http:") {
    throw new Error(`proxy-url ${api.proxyURL}: only http:// proxies are spoken`);
  }
  if (tls && api.tls.cert !== undefined) {
    throw new Error("a client certificate through proxy-url is not supported: use a token, or no proxy");
  }
  const conn = await Deno.connect({
    hostname: proxy.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: Number(proxy.port || 80),
    signal,
  });
  const authority = `${url.hostname}:${port}`;
  await writeAll(
    conn,
    new TextEncoder().encode(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`),
  );
  const reader = new Reader(conn);
  const head = await reader.head();
  if (!/^HTTP\/1\.[01] 200/.test(head)) {
    conn.close();
    throw new Error(`proxy ${proxy.host} refused CONNECT: ${head.split("\r\n")[0]}`);
  }
  if (!tls) return conn;
  const caCerts = api.tls.caCerts === undefined ? undefined : [...api.tls.caCerts];
  return await Deno.startTls(conn, { hostname, caCerts });
}

/** The upgrade, then the stream until the command's end. */
async function exchange(
  conn: Deno.Conn,
  url: URL,
  headers: Headers,
  maxOutput: number,
): Promise<ExecOutcome> {
  const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
  const lines = [
    `GET ${url.pathname}${url.search} HTTP/1.1`,
    `Host: ${url.host}`,
    "Connection: Upgrade",
    "Upgrade: websocket",
    "Sec-WebSocket-Version: 13",
    `Sec-WebSocket-Key: ${key}`,
    `Sec-WebSocket-Protocol: ${EXEC_PROTOCOLS.join(", ")}`,
    "User-Agent: kube-proxy-deno explain",
  ];
  for (const [k, v] of headers) if (k !== "accept") lines.push(`${k}: ${v}`);
  await writeAll(conn, new TextEncoder().encode(lines.join("\r\n") + "\r\n\r\n"));
  const reader = new Reader(conn);
  const head = await reader.head();
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? "0");
  const header = (name: string) => new RegExp(`\r\n${name}: *([^\r]*)`, "i").exec(head)?.[1]?.trim();
  if (status !== 101) return refusal(status, head, await reader.body(header("content-length")));
  const accept = await acceptFor(key);
  if (header("sec-websocket-accept") !== accept) {
    return { kind: "unreachable", message: "the server's upgrade answer does not match the request" };
  }
  const protocol = header("sec-websocket-protocol");
  if (protocol === undefined || !EXEC_PROTOCOLS.includes(protocol)) {
    return {
      kind: "unreachable",
      message: `the API server speaks no exec stream protocol of ${EXEC_PROTOCOLS.join(", ")} (it chose ` +
        `${JSON.stringify(protocol ?? "none")})`,
    };
  }
  const out: Uint8Array[] = [];
  const err: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const message = await reader.message(conn, maxOutput + 4096);
    if (message === "closed") {
      return { kind: "unreachable", message: "the stream ended before the command's end was sent" };
    }
    if (message === "too-large") return { kind: "too-large", limit: maxOutput };
    if (message.length <= 1) continue; // a channel's opening message carries only its number
    const channel = message[0];
    const payload = message.subarray(1);
    if (channel === 1 || channel === 2) {
      size += payload.length;
      if (size > maxOutput) return { kind: "too-large", limit: maxOutput };
      (channel === 1 ? out : err).push(payload.slice());
    } else if (channel === 3) {
      await sendClose(conn);
      return ended(new TextDecoder().decode(payload), text(out), text(err));
    }
  }
}

const text = (parts: readonly Uint8Array[]) => {
  const d = new TextDecoder();
  return parts.map((p) => d.decode(p, { stream: true })).join("") + d.decode();
};

/** The command's end: a `Status` (Success, or NonZeroExitCode with the code as a cause). */
function ended(json: string, stdout: string, stderr: string): ExecOutcome {
  let s: { status?: string; reason?: string; message?: string; details?: { causes?: unknown[] } };
  try {
    s = JSON.parse(json);
  } catch {
    return { kind: "unreachable", message: `the command's end is not a Status: ${json.slice(0, 200)}` };
  }
  if (s.status === "Success") return { kind: "exited", exitCode: 0, stdout, stderr };
  const cause = (s.details?.causes ?? []).find((c) => (c as { reason?: unknown })?.reason === "ExitCode") as
    | { message?: unknown }
    | undefined;
  const code = Number(cause?.message);
  if (s.reason === "NonZeroExitCode" && Number.isInteger(code)) {
    return { kind: "exited", exitCode: code, stdout, stderr };
  }
  return { kind: "not-started", message: String(s.message ?? s.reason ?? json.slice(0, 200)) };
}

function refusal(status: number, head: string, body: string): ExecOutcome {
  try {
    const s = JSON.parse(body) as { reason?: unknown; message?: unknown };
    return {
      kind: "refused",
      status,
      reason: typeof s.reason === "string" ? s.reason : "",
      message: typeof s.message === "string" ? s.message : body.slice(0, 500),
    };
  } catch {
    return {
      kind: "refused",
      status,
      reason: "",
      message: body.trim().slice(0, 500) || head.split("\r\n")[0],
    };
  }
}

async function acceptFor(key: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(key + WS_GUID));
  return btoa(String.fromCharCode(...new Uint8Array(digest)));
}

/** A close frame (code 1000), masked as every client frame must be. */
async function sendClose(conn: Deno.Conn): Promise<void> {
  try {
    await writeAll(conn, clientFrame(0x8, new Uint8Array([0x03, 0xe8])));
  } catch { /* the server may have closed first */ }
}

/** One client frame: FIN, `opcode`, masked `payload` (control frames here: under 126 bytes). */
function clientFrame(opcode: number, payload: Uint8Array): Uint8Array {
  const mask = crypto.getRandomValues(new Uint8Array(4));
  const frame = new Uint8Array(6 + payload.length);
  frame[0] = 0x80 | opcode;
  frame[1] = 0x80 | payload.length;
  frame.set(mask, 2);
  for (let i = 0; i < payload.length; i++) frame[6 + i] = payload[i] ^ mask[i % 4];
  return frame;
}

async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  for (let off = 0; off < data.length;) off += await conn.write(data.subarray(off));
}

/** Buffered reads of one connection: the HTTP head, a refusal's body, then WebSocket messages. */
class Reader {
  #store = new Uint8Array(READ_CHUNK * 2);
  #start = 0;
  #end = 0;
  readonly #conn: Deno.Conn;

  constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  get #buf(): Uint8Array {
    return this.#store.subarray(this.#start, this.#end);
  }

  /**
   * Reads until at least `n` bytes are buffered; false when the connection ends first. The store
   * grows by doubling and is compacted only when its tail is full: each byte is copied a bounded
   * number of times, whatever the output's size.
   */
  async #fill(n: number): Promise<boolean> {
    while (this.#end - this.#start < n) {
      if (this.#store.length - this.#end < READ_CHUNK) {
        const len = this.#end - this.#start;
        const need = Math.max(n, len + READ_CHUNK);
        if (need * 2 <= this.#store.length) this.#store.copyWithin(0, this.#start, this.#end);
        else {
          const next = new Uint8Array(need * 2);
          next.set(this.#store.subarray(this.#start, this.#end));
          this.#store = next;
        }
        this.#start = 0;
        this.#end = len;
      }
      const got = await this.#conn.read(this.#store.subarray(this.#end));
      if (got === null) return false;
      this.#end += got;
    }
    return true;
  }

  /** The next `n` buffered bytes: a view, valid until the next read. */
  #take(n: number): Uint8Array {
    const out = this.#store.subarray(this.#start, this.#start + n);
    this.#start += n;
    return out;
  }

  /** The response head, without its blank line. @throws {Error} when it is cut short or too long. */
  async head(): Promise<string> {
    for (let from = 0;;) {
      const end = indexOfCRLF2(this.#buf, from);
      if (end >= 0) return new TextDecoder().decode(this.#take(end + 4)).slice(0, -4);
      from = Math.max(0, this.#buf.length - 3);
      if (this.#buf.length > MAX_HEAD) throw new Error("the server's answer has a head over 64 KiB");
      if (!(await this.#fill(this.#buf.length + 1))) throw new Error("the server closed the connection");
    }
  }

  /** A refusal's body (at most 64 KiB: a `Status` is small). */
  async body(contentLength: string | undefined): Promise<string> {
    const want = Math.min(
      contentLength === undefined ? MAX_REFUSAL_BODY : Number(contentLength),
      MAX_REFUSAL_BODY,
    );
    await this.#fill(want).catch(() => false);
    return new TextDecoder().decode(this.#buf.subarray(0, want));
  }

  /**
   * The next whole message (continuations joined; pings answered), `closed` at a close frame or the
   * connection's end, `too-large` past `max` bytes.
   */
  async message(conn: Deno.Conn, max: number): Promise<Uint8Array | "closed" | "too-large"> {
    const parts: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      if (!(await this.#fill(2))) return "closed";
      const fin = (this.#buf[0] & 0x80) !== 0;
      const opcode = this.#buf[0] & 0x0f;
      const masked = (this.#buf[1] & 0x80) !== 0;
      let len = this.#buf[1] & 0x7f;
      let at = 2;
      if (len === 126) {
        if (!(await this.#fill(4))) return "closed";
        len = (this.#buf[2] << 8) | this.#buf[3];
        at = 4;
      } else if (len === 127) {
        if (!(await this.#fill(10))) return "closed";
        const big = new DataView(this.#buf.buffer, this.#buf.byteOffset + 2, 8).getBigUint64(0);
        if (big > BigInt(max)) return "too-large";
        len = Number(big);
        at = 10;
      }
      if (size + len > max) return "too-large";
      const maskAt = at;
      if (masked) at += 4;
      if (!(await this.#fill(at + len))) return "closed";
      const frame = this.#take(at + len);
      const payload = frame.slice(at);
      if (masked) { for (let i = 0; i < payload.length; i++) payload[i] ^= frame[maskAt + (i % 4)]; }
      if (opcode === 0x8) return "closed";
      if (opcode === 0x9) {
        await writeAll(conn, clientFrame(0xa, payload.subarray(0, 125)));
        continue;
      }
      if (opcode === 0xa) continue;
      parts.push(payload);
      size += payload.length;
      if (fin) {
        if (parts.length === 1) return parts[0];
        const whole = new Uint8Array(size);
        let off = 0;
        for (const p of parts) whole.set(p, (off += p.length) - p.length);
        return whole;
      }
    }
  }
}

function indexOfCRLF2(b: Uint8Array, from: number): number {
  for (let i = from; i + 3 < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && b[i + 2] === 13 && b[i + 3] === 10) return i;
  }
  return -1;
}
