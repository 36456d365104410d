/**
 * Load tools for the userspace benchmark, each run as its own process so the proxy under test
 * does not share its thread with the load:
 *   sink          accept connections, read to EOF, close; prints the port
 *   hello         answer every connection with "hello" and close; prints the port
 *   stream P B    send B bytes to 127.0.0.1:P, half-close, wait for EOF; prints MB/s
 *   conns P N     N sequential connect/read/close to 127.0.0.1:P; prints connections/s
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
