import { assertEquals } from "../../tests/assert.ts";
import { FakeClock } from "../clock.ts";
import { ProxyHealth, serveHealthz } from "./proxier_health.ts";

Deno.test("ProxyHealth: unhealthy only when a queued update waits longer than the timeout", async () => {
  const clock = new FakeClock();
  const h = new ProxyHealth({ clock, timeoutMs: 60_000 });
  assertEquals(h.status().healthy, true);
  h.queued();
  await clock.advance(59_000);
  assertEquals(h.status().healthy, true);
  h.queued(); // the oldest pending time counts
  await clock.advance(2_000);
  assertEquals(h.status().healthy, false);
  h.updated();
  assertEquals(h.status().healthy, true);
  assertEquals(h.status().body.lastUpdated, new Date(clock.now()).toISOString());
});

Deno.test("serveHealthz answers /healthz and /livez with JSON, 503 when unhealthy", async () => {
  const clock = new FakeClock();
  const h = new ProxyHealth({ clock, timeoutMs: 1000 });
  const ac = new AbortController();
  const server = serveHealthz(h, { hostname: "127.0.0.1", port: 0 }, ac.signal);
  const url = `http://127.0.0.1:${server.addr.port}`;
  try {
    for (const path of ["/healthz", "/livez"]) {
      const r = await fetch(url + path);
      assertEquals([r.status, Object.keys(await r.json())], [200, ["lastUpdated", "currentTime"]]);
    }
    h.queued();
    await clock.advance(5000);
    const r = await fetch(url + "/healthz");
    await r.body?.cancel();
    assertEquals(r.status, 503);
    const nf = await fetch(url + "/nope");
    await nf.body?.cancel();
    assertEquals(nf.status, 404);
  } finally {
    ac.abort();
    await server.finished;
  }
});
