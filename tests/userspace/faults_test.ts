/**
 * The userspace mode under faults, with real sockets: a killed backend, timed-out dials, an fd
 * limit reached. Bounded in count and time.
 */
import type { UserspaceProxier } from "../../proxier/userspace/proxier.ts";
import type { SpliceLimits } from "../../proxier/socket_proxy/tcp_copy.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { realKernel, sh } from "../support/namespace.ts";
import { ep, loopbackUserspaceProxier, makeEndpointSlice, makeService } from "../support/fixtures.ts";
import { eventually, freePort, tcpAsk, tcpNameServer } from "../support/net_helpers.ts";
import { ANSWER_MS, CONVERGE_MS } from "../support/bounds.ts";

const { ignore, note } = await realKernel(["iptables"]);

async function withNodePort(
  /** Each backend's port on 127.0.0.1, or its own address and port. */
  backends: Array<number | { ip: string; port: number }>,
  fn: (nodePort: number, p: UserspaceProxier) => Promise<void>,
  tcpLimits?: SpliceLimits,
  tcpWorkers = 0,
  /** The backends answer (their name): ready means one answered, not merely that the port accepted. */
  answering = true,
): Promise<void> {
  const p = loopbackUserspaceProxier({ tcpLimits, tcpWorkers });
  const nodePort = freePort();
  const ac = new AbortController();
  const loop = p.syncLoop(ac.signal);
  p.onServicesSynced();
  p.onEndpointSlicesSynced();
  p.onServiceAdd(makeService("ns1", "svc1", (s) => {
    s.spec!.type = "NodePort";
    s.spec!.ports = [{ name: "p", port: 80, protocol: "TCP", nodePort }];
  }));
  backends.forEach((b, i) =>
    p.onEndpointSliceAdd(makeEndpointSlice("ns1", "svc1", (s) => {
      s.metadata!.name = `svc1-${i}`;
      s.ports = [{ name: "p", port: typeof b === "number" ? b : b.port, protocol: "TCP" }];
      s.endpoints = [ep(typeof b === "number" ? "127.0.0.1" : b.ip)];
    }))
  );
  try {
    // Served once a backend answers: a connection the proxy accepts before the workers have the
    // endpoints ends empty, and must not count as ready (it made the fault tests flaky under load).
    // The port itself opens at the first sync (the workers bind it after): refused until then, for
    // as long as a busy machine takes, within the suite's bound for a state.
    await eventually(async () => {
      const answer = await tcpAsk(nodePort).catch((e) =>
        e instanceof Deno.errors.ConnectionRefused ? Promise.reject(e) : ""
      );
      if (answering && answer === "") throw new Error("accepted, no endpoint yet");
    }, CONVERGE_MS);
    await fn(nodePort, p);
  } finally {
    ac.abort();
    await loop;
    p.close();
  }
}

for (const workers of [0, 2]) {
  Deno.test(`userspace faults: one of two backends killed: 0 failed new connections (TCP workers: ${workers})`, async () => {
    const a = tcpNameServer("a");
    // On an address of its own: once killed, its port refuses for sure (on 127.0.0.1 a test running
    // beside this one could bind the freed port and accept, and the proxy would not retry).
    const b = tcpNameServer("b", "127.0.0.77");
    try {
      await withNodePort(
        [a.port, { ip: "127.0.0.77", port: b.port }],
        async (nodePort) => {
          b.close(); // killed: its port now refuses
          const answers = [];
          for (let i = 0; i < 200; i++) answers.push(await tcpAsk(nodePort));
          assertEquals(
            new Set(answers),
            new Set(["a"]),
            "every new connection answered, by the live backend",
          );
        },
        undefined,
        workers,
      );
    } finally {
      a.close();
    }
  });
}

Deno.test({
  name:
    `userspace faults: thousands of timed-out dials leave no socket open, even those that connect late${note}`,
  ignore,
  async fn() {
    const ns = `kpd-${crypto.randomUUID().slice(0, 8)}-dial`;
    await sh("ip", ["netns", "add", ns]);
    try {
      await sh("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
      const child = new URL("./dial_leak.child.ts", import.meta.url).pathname;
      const out = await sh("ip", ["netns", "exec", ns, Deno.execPath(), "run", "-A", child, "2000"]);
      const r = JSON.parse(out.trim().split("\n").at(-1)!);
      assertEquals(r.timeouts, 2000, out);
      assert(r.during > r.base + 1000, `the pending dials held sockets: ${out}`);
      assert(r.after <= r.base + 2, `every late connection was closed: ${out}`);
    } finally {
      await sh("ip", ["netns", "del", ns], { allowFail: true });
    }
  },
});

Deno.test({
  name: "userspace faults: the fd limit reached under load, then freed: the port serves again",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const a = tcpNameServer("a");
    const child = new Deno.Command("sh", {
      args: [
        "-c",
        `ulimit -n 256 && exec "$0" run -A --unstable-net "$1" "$2"`,
        Deno.execPath(),
        new URL("./fd_limit.child.ts", import.meta.url).pathname,
        String(a.port),
      ],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const lines = child.stdout.pipeThrough(new TextDecoderStream())[Symbol.asyncIterator]();
    const held: Deno.TcpConn[] = [];
    try {
      const { nodePort } = JSON.parse((await lines.next()).value as string);
      await eventually(async () => assertEquals(await tcpAsk(nodePort), "a"), CONVERGE_MS);
      // 600 connections held open: far beyond the proxy's 256 fds, so its accepts fail (EMFILE).
      for (let i = 0; i < 600; i++) {
        const c = await Deno.connect({
          hostname: "127.0.0.1",
          port: nodePort,
          signal: AbortSignal.timeout(2000),
        })
          .catch(() => undefined);
        if (c !== undefined) held.push(c);
      }
      await new Promise((r) => setTimeout(r, 500));
      for (const c of held.splice(0)) c.close();
      // The accept loop retries with a short backoff (at most 1 s): it serves again as soon as the
      // machine lets it, within the suite's bound for an answer (a timed claim would test the load).
      await eventually(async () => assertEquals(await tcpAsk(nodePort), "a"), ANSWER_MS);
    } finally {
      for (const c of held) c.close();
      child.kill("SIGKILL");
      await child.status;
      await child.stdout.cancel().catch(() => {});
      a.close();
    }
  },
});

Deno.test("userspace faults: a backend that never reads: the client gets an error within the write timeout, and an idle connection is closed", async () => {
  // A backend that accepts and never reads (and never answers).
  const stuck = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepted: Deno.Conn[] = [];
  (async () => {
    for await (const c of stuck) accepted.push(c);
  })().catch(() => {});
  try {
    await withNodePort(
      [(stuck.addr as Deno.NetAddr).port],
      async (nodePort) => {
        const c = await Deno.connect({ hostname: "127.0.0.1", port: nodePort });
        const started = Date.now();
        // Far more than the socket buffers hold: the proxy's write to the backend stalls.
        const chunk = new Uint8Array(1 << 20);
        let ended = false;
        try {
          for (let i = 0; i < 256; i++) await c.write(chunk);
          ended = (await c.read(new Uint8Array(1))) === null;
        } catch {
          ended = true; // reset by the proxy's close
        }
        const waited = Date.now() - started;
        assert(ended, "the client saw the connection end");
        assert(waited < 5000, `a bounded wait: ${waited} ms`);
        try {
          c.close();
        } catch { /* closed */ }
        // Idle: a connection with nothing moving is closed after the idle timeout.
        const idle = await Deno.connect({ hostname: "127.0.0.1", port: nodePort });
        const t = Date.now();
        const n = await idle.read(new Uint8Array(1)).catch(() => null);
        assertEquals(n, null, "closed by the proxy");
        assert(Date.now() - t < 3000, `idle close after ${Date.now() - t} ms`);
        idle.close();
      },
      { idleTimeoutMs: 800, writeTimeoutMs: 500 },
      0,
      false,
    );
  } finally {
    stuck.close();
    for (const c of accepted) c.close();
  }
});
