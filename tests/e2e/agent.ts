/**
 * A helper process for end-to-end tests, started inside a network namespace. It reads one JSON
 * command per line on stdin and answers one JSON line on stdout:
 * - `{"op":"serve","name":"a","port":8080,"hostname"?:"::"}`: answer TCP connections and UDP datagrams on the port
 *   with "a" (UDP replies "a" to every datagram), and on port + 1 keep TCP connections open: "a" on
 *   connect, then "a:" + each chunk received;
 * - `{"op":"whoami","port":9090,"name"?:"a","hostname"?:"::"}`: answer each TCP connection with the
 *   client's address as the server sees it (after "a " when a name is given);
 * - `{"op":"hello","host":..,"port":..}`: connect, return the first chunk the server sends, close;
 * - `{"op":"open","id":"c1","host":..,"port":..}`: connect and keep the connection as "c1", return
 *   its first chunk; `{"op":"say","id":"c1","data":"x"}`: send, return the reply chunk;
 *   `{"op":"close","id":"c1"}`;
 * - `{"op":"tcp","host":"172.30.0.10","port":80,"timeoutMs":2000}`: connect, return what the
 *   server sends before closing (`{"ok":true,"data":"a"}`, or `{"ok":false,"error":"..."}`);
 * - `{"op":"udp","host":..,"port":..,"srcPort":0,"srcHost"?:..,"timeoutMs":1000}`: send "ping" (from
 *   `srcHost`, default any address), return the reply;
 * - `{"op":"http","host":..,"port":..,"path"?:..}`: GET path (default /), return
 *   `{"ok":true,"status":200,"data":"..."}`.
 * Requests run one after another, in order.
 * @module
 */
const enc = new TextEncoder();
const dec = new TextDecoder();

async function readAll(c: Deno.Conn): Promise<string> {
  let out = "";
  const buf = new Uint8Array(4096);
  for (;;) {
    const n = await c.read(buf);
    if (n === null) return out;
    out += dec.decode(buf.subarray(0, n));
  }
}

/** Connections kept open by "open", by id. */
const kept = new Map<string, Deno.Conn>();

async function firstChunk(c: Deno.Conn, timeoutMs: number): Promise<string> {
  const buf = new Uint8Array(4096);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const n = await Promise.race([
    c.read(buf),
    new Promise<never>((_, rej) => timer = setTimeout(() => rej(new Error("read timeout")), timeoutMs)),
  ]);
  clearTimeout(timer);
  if (n === null) throw new Error("closed");
  return dec.decode(buf.subarray(0, n));
}

function serve(name: string, port: number, hostname = "0.0.0.0"): void {
  const echo = Deno.listen({ hostname, port: port + 1 });
  (async () => {
    for await (const c of echo) {
      (async () => {
        await c.write(enc.encode(name));
        const buf = new Uint8Array(4096);
        for (let n; (n = await c.read(buf)) !== null;) {
          await c.write(enc.encode(`${name}:${dec.decode(buf.subarray(0, n))}`));
        }
      })().catch(() => {}).finally(() => {
        try {
          c.close();
        } catch { /* closed */ }
      });
    }
  })();
  const l = Deno.listen({ hostname, port });
  (async () => {
    for await (const c of l) c.write(enc.encode(name)).finally(() => c.close()).catch(() => {});
  })();
  const u = Deno.listenDatagram({ hostname, port, transport: "udp" });
  (async () => {
    for (;;) {
      const [, addr] = await u.receive();
      await u.send(enc.encode(name), addr);
    }
  })();
}

type Cmd = {
  op: string;
  id?: string;
  data?: string;
  /** serve: the address to listen on (default 0.0.0.0; "::" for IPv6). */
  hostname?: string;
  name?: string;
  host?: string;
  port: number;
  timeoutMs?: number;
  srcPort?: number;
  srcHost?: string;
  path?: string;
};

async function handle(cmd: Cmd): Promise<unknown> {
  const timeout = cmd.timeoutMs ?? 2000;
  if (cmd.op === "serve") {
    serve(cmd.name!, cmd.port, cmd.hostname);
    return { ok: true };
  }
  if (cmd.op === "whoami") {
    // Answers each TCP connection with the address it came from (after `name` and a space, when
    // given): shows which endpoint answered and whether the client was masqueraded. An IPv4 client
    // of a "::" listener is said as IPv4.
    const l = Deno.listen({ hostname: cmd.hostname ?? "0.0.0.0", port: cmd.port });
    (async () => {
      for await (const c of l) {
        const from = (c.remoteAddr as Deno.NetAddr).hostname.replace(/^::ffff:(\d+\.)/, "$1");
        c.write(enc.encode(cmd.name === undefined ? from : `${cmd.name} ${from}`)).finally(() => c.close())
          .catch(() => {});
      }
    })();
    return { ok: true };
  }
  if (cmd.op === "tcp") {
    const c = await Deno.connect({
      hostname: cmd.host!,
      port: cmd.port,
      signal: AbortSignal.timeout(timeout),
    });
    // A reset read must not leave the timer to close the connection a second time (uncaught).
    const t = setTimeout(() => {
      try {
        c.close();
      } catch { /* closed */ }
    }, timeout);
    try {
      return { ok: true, data: await readAll(c) };
    } finally {
      clearTimeout(t);
      try {
        c.close();
      } catch { /* closed */ }
    }
  }
  if (cmd.op === "hello" || cmd.op === "open") {
    const c = await Deno.connect({
      hostname: cmd.host!,
      port: cmd.port,
      signal: AbortSignal.timeout(timeout),
    });
    try {
      const data = await firstChunk(c, timeout);
      if (cmd.op === "open") kept.set(cmd.id!, c);
      return { ok: true, data };
    } finally {
      if (cmd.op === "hello") c.close();
    }
  }
  if (cmd.op === "say") {
    const c = kept.get(cmd.id!);
    if (c === undefined) throw new Error(`no connection ${cmd.id}`);
    await c.write(enc.encode(cmd.data!));
    return { ok: true, data: await firstChunk(c, timeout) };
  }
  if (cmd.op === "close") {
    kept.get(cmd.id!)?.close();
    kept.delete(cmd.id!);
    return { ok: true };
  }
  if (cmd.op === "udp") {
    const local = cmd.srcHost ?? (cmd.host!.includes(":") ? "::" : "0.0.0.0");
    const s = Deno.listenDatagram({ hostname: local, port: cmd.srcPort ?? 0, transport: "udp" });
    try {
      await s.send(enc.encode("ping"), { transport: "udp", hostname: cmd.host!, port: cmd.port });
      let timer: ReturnType<typeof setTimeout> | undefined;
      const [data] = await Promise.race([
        s.receive(),
        new Promise<never>((_, rej) => timer = setTimeout(() => rej(new Error("udp timeout")), timeout)),
      ]);
      clearTimeout(timer);
      return { ok: true, data: dec.decode(data) };
    } finally {
      s.close();
    }
  }
  if (cmd.op === "http") {
    const res = await fetch(`http://${cmd.host}:${cmd.port}${cmd.path ?? "/"}`, {
      signal: AbortSignal.timeout(timeout),
    });
    return { ok: true, status: res.status, data: await res.text() };
  }
  throw new Error(`unknown op ${cmd.op}`);
}

let rest = "";
for await (const chunk of Deno.stdin.readable) {
  rest += dec.decode(chunk, { stream: true });
  let nl;
  while ((nl = rest.indexOf("\n")) >= 0) {
    const line = rest.slice(0, nl);
    rest = rest.slice(nl + 1);
    let reply: unknown;
    try {
      reply = await handle(JSON.parse(line));
    } catch (e) {
      reply = { ok: false, error: `${(e as Error).name}: ${(e as Error).message}` };
    }
    await Deno.stdout.write(enc.encode(JSON.stringify(reply) + "\n"));
  }
}
