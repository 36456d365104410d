import { assert, assertEquals } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import {
  eventually,
  freePort,
  freeUdpPort,
  tcpAsk,
  tcpNameServer,
  udpAsk,
  udpNameServer,
} from "../../tests/support/net_helpers.ts";
import { realClock } from "../runtime/clock.ts";
import type { IPFamily } from "../model/types.ts";
import { type LocalhostNodePort, LocalhostNodePorts } from "./localhost_node_ports.ts";

/** Loopback listeners on the real sockets, with their log and metrics. */
function listeners(family: IPFamily = "IPv4") {
  const log = new MemoryLogger();
  const metrics = { open: 0, failures: 0 };
  const lo = new LocalhostNodePorts({
    family,
    log,
    clock: realClock,
    udpIdleTimeoutMs: 1000,
    metrics: { listeners: (n) => metrics.open = n, creationFailed: () => metrics.failures++ },
  });
  return { lo, log, metrics };
}

const port = (o: Partial<LocalhostNodePort> & Pick<LocalhostNodePort, "nodePort" | "endpoints">) => ({
  name: "ns1/web:http",
  protocol: "TCP" as const,
  stickyMaxAgeSeconds: 0,
  ...o,
});

/**
 * Whether TCP connections to `hostname:p` are refused (within a moment: a connection racing the
 * close can be queued on the listener, then reset).
 */
async function refused(p: number, hostname = "127.0.0.1"): Promise<boolean> {
  return await eventually(async () => {
    try {
      (await Deno.connect({ hostname, port: p })).close();
    } catch (e) {
      if (e instanceof Deno.errors.ConnectionRefused) return true;
    }
    throw new Error(`${hostname}:${p} is not refused`);
  }, 1000).catch(() => false);
}

Deno.test("localhost NodePorts: TCP and UDP reach the endpoints; without endpoints the port is refused", async () => {
  const { lo, metrics } = listeners();
  const a = tcpNameServer("a");
  const b = tcpNameServer("b");
  const u = udpNameServer("u");
  const [tcpPort, udpPort] = [freePort(), freeUdpPort()];
  try {
    lo.sync([
      [
        "ns1/web:http",
        port({ nodePort: tcpPort, endpoints: [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`] }),
      ],
      [
        "ns1/dns:dns",
        port({ name: "ns1/dns:dns", protocol: "UDP", nodePort: udpPort, endpoints: [`127.0.0.1:${u.port}`] }),
      ],
    ], true);
    assertEquals(metrics.open, 2);
    const seen = new Set<string>();
    for (let i = 0; i < 6; i++) seen.add(await tcpAsk(tcpPort));
    assertEquals([...seen].sort(), ["a", "b"], "round robin over both endpoints");
    assertEquals(await udpAsk(udpPort), "u");
    assertEquals(lo.route("TCP", tcpPort)?.service, "ns1/web:http");
    // The endpoints gone (externalTrafficPolicy Local without a local one, or none at all): refused.
    lo.sync([["ns1/web:http", port({ nodePort: tcpPort, endpoints: [] })]], false);
    assert(await refused(tcpPort), "no listener without endpoints");
    assertEquals([metrics.open, lo.route("TCP", tcpPort)], [1, undefined]);
    // A full sync without the UDP port closes it too.
    lo.sync([], true);
    assertEquals(metrics.open, 0);
  } finally {
    lo.close();
    a.close();
    b.close();
    u.close();
  }
});

Deno.test("localhost NodePorts: ClientIP affinity keeps a client on one endpoint", async () => {
  const { lo } = listeners();
  const servers = ["a", "b", "c"].map((n) => tcpNameServer(n));
  const p = freePort();
  try {
    lo.sync([[
      "ns1/web:http",
      port({ nodePort: p, endpoints: servers.map((s) => `127.0.0.1:${s.port}`), stickyMaxAgeSeconds: 600 }),
    ]], true);
    const first = await tcpAsk(p);
    for (let i = 0; i < 5; i++) assertEquals(await tcpAsk(p), first);
  } finally {
    lo.close();
    for (const s of servers) s.close();
  }
});

Deno.test("localhost NodePorts: a port another program holds is said once and counted, the others served, and it is served once free", async () => {
  const { lo, log, metrics } = listeners();
  const a = tcpNameServer("a");
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const takenPort = (taken.addr as Deno.NetAddr).port;
  const free = freePort();
  const ep = [`127.0.0.1:${a.port}`];
  try {
    lo.sync([
      ["ns1/taken:http", port({ name: "ns1/taken:http", nodePort: takenPort, endpoints: ep })],
      ["ns1/web:http", port({ nodePort: free, endpoints: ep })],
    ], true);
    assertEquals(await tcpAsk(free), "a");
    assertEquals([lo.unserved, metrics.failures, metrics.open], [1, 1, 1]);
    lo.sync([], false); // a retry, still taken: counted again, not said again
    assertEquals(metrics.failures, 2);
    assertEquals(log.messages("warn").filter((m) => m.startsWith("Cannot listen")).length, 1);
    taken.close();
    lo.sync([], false);
    assertEquals([lo.unserved, metrics.open], [0, 2]);
    assertEquals(await tcpAsk(takenPort), "a");
  } finally {
    lo.close();
    a.close();
  }
});

/** This machine has IPv6 loopback. */
const v6 = (() => {
  try {
    Deno.listen({ hostname: "::1", port: 0 }).close();
    return true;
  } catch {
    return false;
  }
})();

Deno.test({
  name: `localhost NodePorts: IPv6 listens on ::1, TCP and UDP${
    v6 ? "" : " (skipped: no IPv6 loopback here)"
  }`,
  ignore: !v6,
}, async () => {
  const { lo } = listeners("IPv6");
  const t = tcpNameServer("six", "::1");
  const u = udpNameServer("six-udp", "::1");
  const [tp, up] = [freePort(), freeUdpPort()];
  try {
    lo.sync([
      ["ns1/web:http", port({ nodePort: tp, endpoints: [`[::1]:${t.port}`] })],
      ["ns1/dns:dns", port({ protocol: "UDP", nodePort: up, endpoints: [`[::1]:${u.port}`] })],
    ], true);
    assertEquals(lo.address, "::1");
    assertEquals(await tcpAsk(tp, "::1"), "six");
    await eventually(async () => assertEquals(await udpAsk(up, 500, "::1"), "six-udp"));
    assert(await refused(tp, "127.0.0.1"), "not on IPv4 loopback");
  } finally {
    lo.close();
    t.close();
    u.close();
  }
});
