/**
 * The userspace mode's TCP workers with real sockets on loopback: the kernel spreads connections
 * over the workers' shared listeners; the workers rotate as one; ports open, close and fail as on
 * the main thread.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { ProxyHealth } from "../../proxier/healthcheck/proxier_health.ts";
import { realClock } from "../../proxier/runtime/clock.ts";
import {
  ep,
  loopbackUserspaceProxier,
  makeEndpointSlice,
  makeService,
  MemoryLogger,
} from "../support/fixtures.ts";
import { eventually, freePort, tcpAsk, tcpNameServer } from "../support/net_helpers.ts";
import type { UserspaceProxier } from "../../proxier/userspace/proxier.ts";

function nodePortService(nodePort: number, affinity = false) {
  return makeService("ns1", "svc1", (s) => {
    s.spec!.type = "NodePort";
    s.spec!.ports = [{ name: "p", port: 80, protocol: "TCP", nodePort }];
    if (affinity) s.spec!.sessionAffinity = "ClientIP";
  });
}

function slices(ports: number[]) {
  return ports.map((port, i) =>
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.metadata!.name = `svc1-${i}`;
      s.ports = [{ name: "p", port, protocol: "TCP" }];
      s.endpoints = [ep("127.0.0.1")];
    })
  );
}

async function withWorkers(fn: (p: UserspaceProxier, log: MemoryLogger) => Promise<void>): Promise<void> {
  const log = new MemoryLogger();
  const p = loopbackUserspaceProxier({ tcpWorkers: 2, log });
  const ac = new AbortController();
  const loop = p.syncLoop(ac.signal);
  p.onServicesSynced();
  p.onEndpointSlicesSynced();
  try {
    await fn(p, log);
  } finally {
    ac.abort();
    await loop;
    p.close();
  }
}

Deno.test("userspace TCP workers: connections alternate backends as one rotation; a deleted service's port closes", async () => {
  const backends = ["a", "b"].map((n) => tcpNameServer(n));
  const nodePort = freePort();
  try {
    await withWorkers(async (p) => {
      const svc = nodePortService(nodePort);
      p.onServiceAdd(svc);
      for (const s of slices(backends.map((b) => b.port))) p.onEndpointSliceAdd(s);
      const answers = [await eventually(() => tcpAsk(nodePort))];
      for (let i = 0; i < 40; i++) answers.push(await tcpAsk(nodePort));
      // The kernel hands connections to either worker; the rotation is shared, so they alternate.
      const repeats = answers.filter((a, i) => i > 0 && a === answers[i - 1]).length;
      assertEquals(repeats, 0, `in turn: ${answers.join(",")}`);
      p.onServiceDelete(svc);
      await eventually(async () => {
        const refused = await tcpAsk(nodePort).then(
          () => false,
          (e) => e instanceof Deno.errors.ConnectionRefused,
        );
        if (!refused) throw new Error("the port still answers");
      });
    });
  } finally {
    backends.forEach((b) => b.close());
  }
});

Deno.test("userspace: a port another program holds is named once, its Service waits; the sync and health stay good, readiness names it; freed, it is served and ready", async () => {
  for (const tcpWorkers of [2, 0]) {
    const backend = tcpNameServer("a");
    const nodePort = freePort();
    const otherPort = freePort();
    const holder = Deno.listen({ hostname: "127.0.0.1", port: nodePort });
    const log = new MemoryLogger();
    const health = new ProxyHealth({ clock: realClock, timeoutMs: 60_000 });
    const p = loopbackUserspaceProxier({ tcpWorkers, log, health });
    const ac = new AbortController();
    const loop = p.syncLoop(ac.signal);
    p.onServicesSynced();
    p.onEndpointSlicesSynced();
    try {
      p.onServiceAdd(nodePortService(nodePort));
      for (const s of slices([backend.port])) p.onEndpointSliceAdd(s);
      // Another Service on a free port is served meanwhile.
      const other = makeService("ns1", "other", (s) => {
        s.spec!.type = "NodePort";
        s.spec!.ports = [{ name: "p", port: 80, protocol: "TCP", nodePort: otherPort }];
      });
      p.onServiceAdd(other);
      p.onEndpointSliceAdd(makeEndpointSlice("ns1", "other", (s) => {
        s.ports = [{ name: "p", port: backend.port, protocol: "TCP" }];
        s.endpoints = [ep("127.0.0.1")];
      }));
      assertEquals(await eventually(() => tcpAsk(otherPort)), "a");
      const named = log.records.filter((r) => r.msg.startsWith("Cannot open the proxy port of this Service"));
      assertEquals(named.length, 1, `tcpWorkers=${tcpWorkers}: named once, not at every retry`);
      assertEquals([named[0].level, named[0].fields?.service, named[0].fields?.nodePort], [
        "warn",
        "ns1/svc1:p",
        nodePort,
      ]);
      assertEquals(log.messages("error").filter((m) => m.startsWith("Sync failed")), [], "syncs do not fail");
      assert(health.status().healthy, "healthy: its syncs succeed");
      const r = health.readiness();
      assertEquals(r.ready, false, "not ready: it holds a port it does not serve");
      assertMatch(
        r.conditions?.["unserved-IPv4"] ?? "",
        /^1 Service port not served: ns1\/svc1:p\/TCP \(.+\)$/,
      );
      holder.close();
      // Retried with backoff (1 s, 2 s, ...): served once the port is free.
      assertEquals(await eventually(() => tcpAsk(nodePort), 15_000), "a");
      assert(log.messages("info").includes("Serving the Service's port now"));
      assertEquals(health.readiness(), { ready: true, status: { IPv4: "synced" } });
    } finally {
      ac.abort();
      await loop;
      p.close();
      backend.close();
      try {
        holder.close();
      } catch { /* closed above */ }
    }
  }
});

Deno.test("userspace TCP workers: a ClientIP-affinity service stays on the main thread, so a client stays pinned", async () => {
  const backends = ["a", "b", "c"].map((n) => tcpNameServer(n));
  const nodePort = freePort();
  try {
    await withWorkers(async (p) => {
      p.onServiceAdd(nodePortService(nodePort, true));
      for (const s of slices(backends.map((b) => b.port))) p.onEndpointSliceAdd(s);
      const first = await eventually(() => tcpAsk(nodePort));
      for (let i = 0; i < 20; i++) assertEquals(await tcpAsk(nodePort), first);
      assert(["a", "b", "c"].includes(first));
    });
  } finally {
    backends.forEach((b) => b.close());
  }
});
