/**
 * The userspace proxier with real sockets on loopback (NodePorts; no iptables needed).
 */
import type { V1Service } from "@kubernetes/client-node";
import type { UserspaceProxier } from "../../proxier/userspace/proxier.ts";
import { assert, assertEquals, assertRejects } from "../support/assert.ts";
import { ANSWER_MS } from "../support/bounds.ts";
import { ep, loopbackUserspaceProxier, makeEndpointSlice, makeService } from "../support/fixtures.ts";
import {
  eventually,
  freePort,
  freeUdpPort,
  readAll,
  tcpAsk,
  tcpNameServer,
  udpAsk,
  udpNameServer,
  writeAll,
} from "../support/net_helpers.ts";

function nodePortService(
  nodePort: number,
  protocol: "TCP" | "UDP",
  mutate: (s: V1Service) => void = () => {},
) {
  return makeService("ns1", "svc1", (s) => {
    s.spec!.type = "NodePort";
    s.spec!.ports = [{ name: "p", port: 80, protocol, nodePort }];
    mutate(s);
  });
}

function sliceFor(ports: number[], protocol: "TCP" | "UDP") {
  // One slice per backend port: each backend listens on its own port on 127.0.0.1.
  return ports.map((port, i) =>
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.metadata!.name = `svc1-${i}`;
      s.ports = [{ name: "p", port, protocol }];
      s.endpoints = [ep("127.0.0.1")];
    })
  );
}

async function withProxier(fn: (p: UserspaceProxier) => Promise<void>): Promise<void> {
  const p = loopbackUserspaceProxier();
  const ac = new AbortController();
  const loop = p.syncLoop(ac.signal);
  p.onServicesSynced();
  p.onEndpointSlicesSynced();
  try {
    await fn(p);
  } finally {
    ac.abort();
    await loop;
    p.close();
  }
}

Deno.test("userspace: TCP through a NodePort reaches every backend in turn", async () => {
  const backends = ["a", "b", "c"].map((n) => tcpNameServer(n));
  const nodePort = freePort();
  try {
    await withProxier(async (p) => {
      p.onServiceAdd(nodePortService(nodePort, "TCP"));
      for (const s of sliceFor(backends.map((b) => b.port), "TCP")) p.onEndpointSliceAdd(s);
      const first = await eventually(() => tcpAsk(nodePort));
      const answers = [first];
      for (let i = 0; i < 5; i++) answers.push(await tcpAsk(nodePort));
      assertEquals(new Set(answers.slice(0, 3)), new Set(["a", "b", "c"]));
      assertEquals(answers.slice(3), answers.slice(0, 3), "round robin repeats the same order");
    });
  } finally {
    backends.forEach((b) => b.close());
  }
});

Deno.test("userspace: UDP through a NodePort reaches every backend in turn", async () => {
  const backends = ["u1", "u2"].map((n) => udpNameServer(n));
  const nodePort = freeUdpPort();
  try {
    await withProxier(async (p) => {
      p.onServiceAdd(nodePortService(nodePort, "UDP"));
      for (const s of sliceFor(backends.map((b) => b.port), "UDP")) p.onEndpointSliceAdd(s);
      const answers = [await eventually(() => udpAsk(nodePort, 300))];
      for (let i = 0; i < 3; i++) answers.push(await udpAsk(nodePort));
      assertEquals(new Set(answers), new Set(["u1", "u2"]));
      assert(answers[0] !== answers[1] && answers[0] === answers[2], `alternates: ${answers}`);
    });
  } finally {
    backends.forEach((b) => b.close());
  }
});

Deno.test("userspace: UDP datagrams cross whole and in order of sending, big ones and a burst alike", async () => {
  // An echo backend: each datagram goes back as it came, so the client can check every byte.
  const echo = Deno.listenDatagram({ hostname: "127.0.0.1", port: 0, transport: "udp" });
  (async () => {
    try {
      for (;;) {
        const [d, from] = await echo.receive();
        await echo.send(d, from);
      }
    } catch { /* closed */ }
  })();
  const nodePort = freeUdpPort();
  const client = Deno.listenDatagram({ hostname: "127.0.0.1", port: 0, transport: "udp" });
  const to: Deno.NetAddr = { transport: "udp", hostname: "127.0.0.1", port: nodePort };
  try {
    await withProxier(async (p) => {
      p.onServiceAdd(nodePortService(nodePort, "UDP"));
      for (const s of sliceFor([(echo.addr as Deno.NetAddr).port], "UDP")) p.onEndpointSliceAdd(s);
      await eventually(() => udpAsk(nodePort, 300));
      const big = new Uint8Array(60_000).map((_, i) => i % 251);
      await client.send(big, to);
      const [back] = await client.receive();
      assertEquals(back.length, big.length, "a 60,000-byte datagram is not cut");
      assertEquals(back, big);
      // 200 datagrams in bursts of 25 (fewer than a socket buffer holds; the client shares the
      // proxy's event loop, so it yields between bursts): none may be lost, reordered or mixed up.
      const n = 200;
      const got: number[] = [];
      const reading = (async () => {
        while (got.length < n) got.push(new DataView((await client.receive())[0].buffer).getUint32(0));
      })();
      for (let i = 0; i < n; i++) {
        const d = new Uint8Array(1200);
        new DataView(d.buffer).setUint32(0, i);
        await client.send(d, to);
        if (i % 25 === 24) await new Promise((r) => setTimeout(r, 5));
      }
      await Promise.race([
        reading,
        new Promise((_, rej) =>
          setTimeout(() => rej(new Error(`only ${got.length} of ${n} came back`)), ANSWER_MS)
        ),
      ]);
      assertEquals(got, Array.from({ length: n }, (_, i) => i));
    });
  } finally {
    client.close();
    echo.close();
  }
});

Deno.test("userspace: ClientIP affinity pins a client to one backend", async () => {
  const backends = ["a", "b", "c"].map((n) => tcpNameServer(n));
  const nodePort = freePort();
  try {
    await withProxier(async (p) => {
      p.onServiceAdd(nodePortService(nodePort, "TCP", (s) => s.spec!.sessionAffinity = "ClientIP"));
      for (const s of sliceFor(backends.map((b) => b.port), "TCP")) p.onEndpointSliceAdd(s);
      const first = await eventually(() => tcpAsk(nodePort));
      for (let i = 0; i < 6; i++) assertEquals(await tcpAsk(nodePort), first);
    });
  } finally {
    backends.forEach((b) => b.close());
  }
});

Deno.test("userspace: a dead endpoint is skipped", async () => {
  const live = tcpNameServer("live");
  const dead = freePort(); // nothing listens here: connections are refused
  const nodePort = freePort();
  try {
    await withProxier(async (p) => {
      p.onServiceAdd(nodePortService(nodePort, "TCP"));
      for (const s of sliceFor([live.port, dead], "TCP")) p.onEndpointSliceAdd(s);
      await eventually(() => tcpAsk(nodePort));
      for (let i = 0; i < 6; i++) assertEquals(await tcpAsk(nodePort), "live");
    });
  } finally {
    live.close();
  }
});

Deno.test("userspace: removing a service closes its port", async () => {
  const b = tcpNameServer("a");
  const nodePort = freePort();
  try {
    await withProxier(async (p) => {
      const svc = nodePortService(nodePort, "TCP");
      p.onServiceAdd(svc);
      for (const s of sliceFor([b.port], "TCP")) p.onEndpointSliceAdd(s);
      assertEquals(await eventually(() => tcpAsk(nodePort)), "a");
      p.onServiceDelete(svc);
      await eventually(() => assertRejects(() => tcpAsk(nodePort), Deno.errors.ConnectionRefused));
    });
  } finally {
    b.close();
  }
});

Deno.test("userspace: an unchanged service update keeps its listener and open connections", async () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const backendPort = (l.addr as Deno.NetAddr).port;
  const conns: Deno.Conn[] = [];
  (async () => {
    for await (const c of l) conns.push(c);
  })().catch(() => {});
  const nodePort = freePort();
  try {
    await withProxier(async (p) => {
      const svc = nodePortService(nodePort, "TCP");
      p.onServiceAdd(svc);
      for (const s of sliceFor([backendPort], "TCP")) p.onEndpointSliceAdd(s);
      const client = await eventually(() => Deno.connect({ hostname: "127.0.0.1", port: nodePort }));
      await eventually(() => assertEquals(conns.length, 1));
      p.onServiceUpdate(svc, nodePortService(nodePort, "TCP", (s) => s.metadata!.labels = { x: "y" }));
      p.sync();
      await new Promise((r) => setTimeout(r, 100));
      await writeAll(conns[0], new TextEncoder().encode("still here"));
      const buf = new Uint8Array(32);
      const n = await client.read(buf);
      assertEquals(new TextDecoder().decode(buf.subarray(0, n!)), "still here");
      client.close();
    });
  } finally {
    l.close();
    conns.forEach((c) => c.close());
  }
});

async function sha256(data: Uint8Array): Promise<string> {
  return [...new Uint8Array(await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("userspace: half-closed TCP delivers 10 MB each way intact", async () => {
  const size = 10 * 1024 * 1024;
  // Random bytes in 64 KiB pieces (the most getRandomValues fills at once).
  const upData = new Uint8Array(size);
  for (let off = 0; off < size; off += 65536) crypto.getRandomValues(upData.subarray(off, off + 65536));
  const downData = upData.slice().reverse();
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const received = (async () => {
    const c = await l.accept();
    // The server reads to EOF (the client half-closed) and only then answers.
    const got = await readAll(c);
    await writeAll(c, downData);
    c.close();
    return got;
  })();
  const nodePort = freePort();
  try {
    await withProxier(async (p) => {
      p.onServiceAdd(nodePortService(nodePort, "TCP"));
      for (const s of sliceFor([(l.addr as Deno.NetAddr).port], "TCP")) p.onEndpointSliceAdd(s);
      const c = await eventually(() => Deno.connect({ hostname: "127.0.0.1", port: nodePort }));
      const reading = readAll(c);
      await writeAll(c, upData);
      await c.closeWrite();
      const down = await reading;
      c.close();
      assertEquals(await sha256(await received), await sha256(upData));
      assertEquals(await sha256(down), await sha256(downData));
    });
  } finally {
    l.close();
  }
});

Deno.test("userspace: 100 overlapping connections, some reset mid-way, each gets back exactly its own bytes", async () => {
  // Small buffers are pooled and reused across connections; a buffer given back while still in use
  // would hand one client's bytes to another.
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const echo = (async () => {
    for await (const c of l) {
      (async () => {
        const buf = new Uint8Array(3000);
        try {
          for (let n = await c.read(buf); n !== null; n = await c.read(buf)) {
            await writeAll(c, buf.subarray(0, n));
          }
          await c.closeWrite();
        } catch { /* a client reset */ }
      })();
    }
  })().catch(() => {});
  const nodePort = freePort();
  try {
    await withProxier(async (p) => {
      p.onServiceAdd(nodePortService(nodePort, "TCP"));
      for (const s of sliceFor([(l.addr as Deno.NetAddr).port], "TCP")) p.onEndpointSliceAdd(s);
      (await eventually(() => Deno.connect({ hostname: "127.0.0.1", port: nodePort }))).close();
      const client = async (i: number) => {
        const data = new Uint8Array(40_000);
        crypto.getRandomValues(data);
        // Staggered, so later connections take buffers earlier ones gave back.
        await new Promise((r) => setTimeout(r, 3 * i));
        const c = await Deno.connect({ hostname: "127.0.0.1", port: nodePort });
        const reading = readAll(c).catch(() => undefined);
        // Pieces from 100 bytes (small reads) to 8 KiB (full reads that grow the buffer).
        for (let off = 0, k = 0; off < data.length; k++) {
          const piece = [100, 1000, 8192][(i + k) % 3];
          await writeAll(c, data.subarray(off, off + piece));
          off += piece;
          if (i % 10 === 0 && off > data.length / 2) {
            c.close();
            await reading;
            return;
          }
          if (k % 4 === 0) await new Promise((r) => setTimeout(r, 1));
        }
        await c.closeWrite();
        const back = await reading;
        c.close();
        assertEquals(
          back !== undefined && (await sha256(back)) === (await sha256(data)),
          true,
          `client ${i}`,
        );
      };
      await Promise.all(Array.from({ length: 100 }, (_, i) => client(i)));
    });
  } finally {
    l.close();
    await echo;
  }
});
