/**
 * Load tools for the userspace benchmark, each run as its own process so the proxy under test
 * does not share its thread with the load:
 *   sink          accept connections, read to EOF, close; prints the port
 *   hello         answer every connection with "hello" and close; prints the port
 *   stream P B    send B bytes to 127.0.0.1:P, half-close, wait for EOF; prints MB/s
 *   conns P N     N sequential connect/read/close to 127.0.0.1:P; prints connections/s
 *   http          HTTP/1.1 server answering every request with "ok"; prints the port
 *   udpecho       UDP server echoing every datagram to its sender; prints the port
 *   udp P R S T   S sockets send R datagrams/s in all to 127.0.0.1:P for T s, counting the echoes;
 *                 prints {"sent":..,"received":..}
 * @module
 */
const [mode, a, b] = Deno.args;
const print = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(s + "\n"));

if (mode === "sink" || mode === "hello") {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  print(String((l.addr as Deno.NetAddr).port));
  const hello = new TextEncoder().encode("hello");
  for await (const c of l) {
    if (mode === "hello") {
      c.write(hello).finally(() => c.close()).catch(() => {});
      continue;
    }
    (async () => {
      const buf = new Uint8Array(1 << 20);
      try {
        while ((await c.read(buf)) !== null) { /* discard */ }
      } finally {
        c.close();
      }
    })().catch(() => {});
  }
} else if (mode === "stream") {
  const bytes = Number(b);
  const c = await Deno.connect({ hostname: "127.0.0.1", port: Number(a) });
  const chunk = new Uint8Array(1 << 20);
  const start = performance.now();
  for (let sent = 0; sent < bytes;) {
    sent += await c.write(chunk.subarray(0, Math.min(chunk.length, bytes - sent)));
  }
  await c.closeWrite();
  await c.read(new Uint8Array(1)); // EOF: the sink read every byte
  print(String(bytes / ((performance.now() - start) / 1000) / 1e6));
  c.close();
} else if (mode === "http") {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => new Response("ok"));
  print(String(server.addr.port));
} else if (mode === "udpecho") {
  const sock = Deno.listenDatagram({ transport: "udp", hostname: "127.0.0.1", port: 0 });
  print(String((sock.addr as Deno.NetAddr).port));
  const buf = new Uint8Array(2048);
  for (;;) {
    const [data, from] = await sock.receive(buf);
    sock.send(data.slice(), from).catch(() => {});
  }
} else if (mode === "udp") {
  await udpLoad(Number(a), Number(b), Number(Deno.args[3]), Number(Deno.args[4]));
} else if (mode === "conns") {
  const n = Number(b);
  const buf = new Uint8Array(16);
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    const c = await Deno.connect({ hostname: "127.0.0.1", port: Number(a) });
    while ((await c.read(buf)) !== null) { /* until close */ }
    c.close();
  }
  print(String(n / ((performance.now() - start) / 1000)));
}

/**
 * Sends `rate` datagrams/s spread over `sockets` sockets to 127.0.0.1:`port` for `seconds`, paced
 * every millisecond, then waits a second for late echoes; prints how many were sent and echoed.
 */
async function udpLoad(port: number, rate: number, sockets: number, seconds: number): Promise<void> {
  const socks = Array.from(
    { length: sockets },
    () => Deno.listenDatagram({ transport: "udp", hostname: "127.0.0.1", port: 0 }),
  );
  let received = 0;
  const loops = socks.map(async (s) => {
    const buf = new Uint8Array(2048);
    try {
      for (;;) {
        await s.receive(buf);
        received++;
      }
    } catch { /* closed */ }
  });
  const to: Deno.NetAddr = { transport: "udp", hostname: "127.0.0.1", port };
  const payload = new Uint8Array(64);
  let sent = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  for (let now = start; now < end; now = performance.now()) {
    const due = Math.floor(rate * (now - start) / 1000);
    const batch: Promise<number>[] = [];
    for (; sent < due; sent++) batch.push(socks[sent % sockets].send(payload, to));
    await Promise.all(batch).catch(() => {});
    await new Promise((r) => setTimeout(r, 1));
  }
  await new Promise((r) => setTimeout(r, 1000));
  for (const s of socks) s.close();
  await Promise.all(loops);
  print(JSON.stringify({ sent, received }));
}
