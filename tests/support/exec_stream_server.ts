/**
 * The API server's side of a pod exec for the test API server: the WebSocket upgrade of
 * `GET .../pods/NAME/exec` speaking `v5.channel.k8s.io` / `v4.channel.k8s.io` as the kubelet's stream
 * server does (an empty opening message per channel, output on channels 1 and 2, the command's end
 * as a `Status` on channel 3, then a close), with what the command does chosen by the test: run a
 * real process, fail to start, answer at once, or hang.
 * @module
 */

/** What one exec request asks. */
export interface ExecRequest {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  readonly command: readonly string[];
}

/** What the test API server does with an exec request. */
export type ExecPlan =
  /** Answers instead of upgrading (a `Status` with this code). */
  | { readonly refuse: { readonly status: number; readonly reason: string; readonly message: string } }
  /** Runs a real process; its output is streamed and its exit code becomes the `Status`. */
  | { readonly run: { readonly cmd: string; readonly args: readonly string[] } }
  /** The container runtime cannot start the command: a Failure `Status` with this message. */
  | { readonly fail: string }
  /** Answers at once. */
  | { readonly print: { readonly stdout: string; readonly stderr?: string; readonly code: number } }
  /** Upgrades, then says nothing until the client goes away (then `gone` is called). */
  | { readonly hang: true; readonly gone?: () => void };

const PROTOCOLS = ["v5.channel.k8s.io", "v4.channel.k8s.io"];
const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** The `Status` a command's end is sent as. */
export function endStatus(code: number, command: readonly string[]): unknown {
  return code === 0 ? { metadata: {}, status: "Success" } : {
    metadata: {},
    status: "Failure",
    message: `command terminated with non-zero exit code: error executing command [${
      command.join(" ")
    }], exit code ${code}`,
    reason: "NonZeroExitCode",
    details: { causes: [{ reason: "ExitCode", message: String(code) }] },
  };
}

/**
 * Serves one exec on `c`, whose request head is `head`: upgrades and carries out `plan`. With
 * `fragment`, every message is sent as two frames (a continuation), as a proxy in between may.
 */
export async function serveExec(
  c: Deno.Conn,
  head: string,
  request: ExecRequest,
  plan: ExecPlan,
  o: { readonly fragment?: boolean } = {},
): Promise<void> {
  const enc = new TextEncoder();
  if ("refuse" in plan) {
    const { status, reason, message } = plan.refuse;
    const body = JSON.stringify({
      kind: "Status",
      apiVersion: "v1",
      status: "Failure",
      code: status,
      reason,
      message,
    });
    await writeAll(
      c,
      enc.encode(
        `HTTP/1.1 ${plan.refuse.status} ${plan.refuse.reason}\r\ncontent-type: application/json\r\ncontent-length: ${
          enc.encode(body).length
        }\r\n\r\n${body}`,
      ),
    );
    return;
  }
  const key = /\r\nsec-websocket-key: *([^\r]+)/i.exec(head)?.[1]?.trim() ?? "";
  const asked = (/\r\nsec-websocket-protocol: *([^\r]+)/i.exec(head)?.[1] ?? "").split(",").map((p) =>
    p.trim()
  );
  const protocol = PROTOCOLS.find((p) => asked.includes(p));
  if (protocol === undefined) {
    const body = JSON.stringify({ kind: "Status", code: 400, message: "no supported stream protocol" });
    await writeAll(
      c,
      enc.encode(`HTTP/1.1 400 Bad Request\r\ncontent-length: ${body.length}\r\n\r\n${body}`),
    );
    return;
  }
  const digest = await crypto.subtle.digest("SHA-1", enc.encode(key + GUID));
  const accept = btoa(String.fromCharCode(...new Uint8Array(digest)));
  await writeAll(
    c,
    enc.encode(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
        `Sec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: ${protocol}\r\n\r\n`,
    ),
  );
  let chain = Promise.resolve();
  const send = (channel: number, data: Uint8Array) => {
    const message = new Uint8Array(data.length + 1);
    message[0] = channel;
    message.set(data, 1);
    chain = chain.then(() => writeAll(c, frames(message, o.fragment === true))).catch(() => {});
    return chain;
  };
  for (const ch of [1, 2, 3]) await send(ch, new Uint8Array(0));
  const clientGone = (async () => {
    const buf = new Uint8Array(1024);
    try {
      while ((await c.read(buf)) !== null) { /* the client's close frame, or nothing */ }
    } catch { /* closed */ }
  })();
  const end = async (status: unknown) => {
    await send(3, enc.encode(JSON.stringify(status)));
    await writeAll(c, new Uint8Array([0x88, 0x02, 0x03, 0xe8])).catch(() => {});
  };
  if ("hang" in plan) {
    await clientGone;
    return plan.gone?.();
  }
  if ("fail" in plan) {
    return await end({
      metadata: {},
      status: "Failure",
      message: plan.fail,
      reason: "InternalError",
      details: { causes: [{ message: plan.fail }] },
      code: 500,
    });
  }
  if ("print" in plan) {
    if (plan.print.stdout !== "") await send(1, enc.encode(plan.print.stdout));
    if ((plan.print.stderr ?? "") !== "") await send(2, enc.encode(plan.print.stderr));
    return await end(endStatus(plan.print.code, request.command));
  }
  const child = new Deno.Command(plan.run.cmd, {
    args: [...plan.run.args],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let done = false;
  clientGone.then(() => {
    if (!done) {
      try {
        child.kill("SIGKILL");
      } catch { /* ended */ }
    }
  });
  const pump = async (stream: ReadableStream<Uint8Array>, channel: number) => {
    for await (const chunk of stream) await send(channel, chunk);
  };
  await Promise.all([pump(child.stdout, 1), pump(child.stderr, 2)]);
  const status = await child.status;
  done = true;
  await end(endStatus(status.code, request.command));
}

/** One message as server frames (unmasked): one frame, or two with a continuation. */
function frames(message: Uint8Array, fragment: boolean): Uint8Array {
  if (!fragment || message.length < 2) return frame(0x80 | 0x2, message);
  const cut = Math.ceil(message.length / 2);
  const a = frame(0x2, message.subarray(0, cut));
  const b = frame(0x80 | 0x0, message.subarray(cut));
  const both = new Uint8Array(a.length + b.length);
  both.set(a);
  both.set(b, a.length);
  return both;
}

function frame(first: number, payload: Uint8Array): Uint8Array {
  const n = payload.length;
  const head = n < 126 ? [first, n] : n < 65536 ? [first, 126, n >> 8, n & 0xff] : [
    first,
    127,
    ...Array.from({ length: 8 }, (_, i) => i < 4 ? 0 : (n >>> ((7 - i) * 8)) & 0xff),
  ];
  const out = new Uint8Array(head.length + n);
  out.set(head);
  out.set(payload, head.length);
  return out;
}

async function writeAll(c: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await c.write(data.subarray(off));
}
