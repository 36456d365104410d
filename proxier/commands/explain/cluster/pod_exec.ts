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
import { writeAll } from "../../../runtime/write_all.ts";
import { acceptFor, sendClose, WsReader } from "./ws_frames.ts";

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
  const reader = new WsReader(conn);
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
  const reader = new WsReader(conn);
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
