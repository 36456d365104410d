import { assertEquals } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { freePort } from "../../tests/support/net_helpers.ts";
import type { EventSpec } from "../runtime/events.ts";
import { ServiceHealthServer } from "./service_health.ts";

/** Where the tests' health check ports listen: the loopback address alone, never the host's others. */
const LOOPBACK = ["127.0.0.1"];

async function get(port: number): Promise<string> {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/`);
    return `${r.status} ${(await r.json()).localEndpoints}`;
  } catch {
    return "closed";
  }
}

Deno.test("ServiceHealthServer: each family's proxier reports its view; a port is served while either has it", async () => {
  const hs = new ServiceHealthServer({ log: new MemoryLogger() });
  const port = freePort();
  const svc = (localEndpoints: number) => [{ namespace: "ns1", name: "lb", port, localEndpoints }];
  try {
    hs.sync(svc(1), "IPv4", LOOPBACK);
    assertEquals(await get(port), "200 1");
    // The IPv6 proxier has no IPv6 half of this Service: the port stays, as the IPv4 one said.
    hs.sync([], "IPv6", LOOPBACK);
    assertEquals(await get(port), "200 1");
    hs.sync(svc(2), "IPv6", LOOPBACK);
    assertEquals(await get(port), "200 2");
    hs.sync([], "IPv6", LOOPBACK);
    hs.sync([], "IPv4", LOOPBACK);
    assertEquals(await get(port), "closed");
  } finally {
    hs.close();
  }
});

Deno.test("ServiceHealthServer: serviceProxyHealthy is the proxy's own health; a stuck proxy answers 503", async () => {
  let proxyHealthy = true;
  const hs = new ServiceHealthServer({
    log: new MemoryLogger(),
    proxyHealthy: () => proxyHealthy,
  });
  const port = freePort();
  try {
    hs.sync([{ namespace: "ns1", name: "lb", port, localEndpoints: 2 }], "IPv4", LOOPBACK);
    const ask = async () => {
      const r = await fetch(`http://127.0.0.1:${port}/`);
      const body = await r.json();
      return [r.status, body.serviceProxyHealthy, body.localEndpoints];
    };
    assertEquals(await ask(), [200, true, 2]);
    proxyHealthy = false; // its syncs keep failing
    assertEquals(await ask(), [503, false, 2]);
  } finally {
    hs.close();
  }
});

Deno.test("ServiceHealthServer: a health check port that cannot be bound is an Event on the Service, as upstream", () => {
  const events: EventSpec[] = [];
  const hs = new ServiceHealthServer({
    log: new MemoryLogger(),
    events: { record: (e) => events.push(e) },
    nodeName: "node-a",
  });
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (taken.addr as Deno.NetAddr).port;
  try {
    hs.sync([{ namespace: "ns1", name: "lb", port, localEndpoints: 1 }], "IPv4", LOOPBACK);
    assertEquals(events.length, 1);
    const e = events[0];
    assertEquals([e.regarding, e.type, e.reason, e.action], [
      { kind: "Service", namespace: "ns1", name: "lb" },
      "Warning",
      "FailedToStartServiceHealthcheck",
      "Listen",
    ]);
    assertEquals(
      e.note.startsWith(`node node-a failed to start healthcheck "ns1/lb" on port ${port}: `),
      true,
      e.note,
    );
  } finally {
    hs.close();
    taken.close();
  }
});

Deno.test("ServiceHealthServer: a port listens on each family's addresses, and moves when they change", async () => {
  const hs = new ServiceHealthServer({ log: new MemoryLogger() });
  const port = freePort();
  const svc = [{ namespace: "ns1", name: "lb", port, localEndpoints: 1 }];
  const at = async (host: string) => {
    try {
      const r = await fetch(`http://${host}:${port}/`);
      await r.body?.cancel();
      return r.status;
    } catch {
      return "refused";
    }
  };
  try {
    hs.sync(svc, "IPv4", ["127.0.0.1"]);
    hs.sync([], "IPv6", ["::1"]);
    assertEquals([await at("127.0.0.1"), await at("127.0.0.2"), await at("[::1]")], [200, "refused", 200]);
    // The node's address moved (say, --nodeport-addresses=primary and a new InternalIP).
    hs.sync(svc, "IPv4", ["127.0.0.2"]);
    assertEquals([await at("127.0.0.1"), await at("127.0.0.2"), await at("[::1]")], ["refused", 200, 200]);
  } finally {
    hs.close();
  }
});
