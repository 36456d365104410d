import { assertEquals } from "../../tests/support/assert.ts";
import { makeNode } from "../../tests/support/fixtures.ts";
import { FakeClock } from "../runtime/clock.ts";
import { ProxyHealth, serveHealthz, TO_BE_DELETED_TAINT } from "./proxier_health.ts";

Deno.test("ProxyHealth: unhealthy only when a queued update waits longer than the timeout", async () => {
  const clock = new FakeClock();
  const h = new ProxyHealth({ clock, timeoutMs: 60_000 });
  assertEquals(h.status().healthy, true);
  h.updated("IPv4");
  h.queued("IPv4");
  await clock.advance(59_000);
  assertEquals(h.status().healthy, true);
  h.queued("IPv4"); // the oldest pending time counts
  await clock.advance(2_000);
  assertEquals(h.status().healthy, false);
  h.updated("IPv4");
  assertEquals(h.status().healthy, true);
  assertEquals(h.status().body.lastUpdated, new Date(clock.now()).toISOString());
});

Deno.test("ProxyHealth: a family is healthy while it starts, as upstream's: an update queued before its first sync counts for nothing", async () => {
  const clock = new FakeClock();
  const h = new ProxyHealth({ clock, timeoutMs: 60_000 });
  h.queued("IPv4");
  await clock.advance(10 * 60_000);
  assertEquals(h.status().healthy, true, "a first sync of ten minutes is no failure");
  assertEquals(h.status().body.status, {}, "a family is in the status once it has synced");
  h.updated("IPv4");
  h.queued("IPv4");
  await clock.advance(60_001);
  assertEquals(h.status().healthy, false, "after it, a sync that waits longer than the timeout is one");
});

Deno.test("ProxyHealth: each family on its own; a good IPv4 sync does not hide a stuck IPv6 family", async () => {
  const clock = new FakeClock();
  const h = new ProxyHealth({ clock, timeoutMs: 1000 });
  h.updated("IPv4");
  h.updated("IPv6");
  const t0 = clock.now();
  h.queued("IPv4");
  h.queued("IPv6");
  await clock.advance(5000);
  h.updated("IPv4");
  const { healthy, body } = h.status();
  assertEquals(healthy, false);
  assertEquals(body.status, {
    IPv4: { lastUpdated: new Date(t0 + 5000).toISOString(), healthy: true },
    IPv6: { lastUpdated: new Date(t0).toISOString(), healthy: false },
  });
  assertEquals(body.healthy, false);
});

Deno.test("serveHealthz: upstream's JSON; 503 when unhealthy; /healthz also 503 while the Node goes away, /livez not", async () => {
  const clock = new FakeClock();
  const h = new ProxyHealth({ clock, timeoutMs: 1000 });
  h.updated("IPv4");
  const ac = new AbortController();
  const server = serveHealthz(h, { hostname: "127.0.0.1", port: 0 }, ac.signal);
  const url = `http://127.0.0.1:${server.addr.port}`;
  const get = async (path: string) => {
    const r = await fetch(url + path);
    return { status: r.status, body: await r.json() };
  };
  try {
    const hz = await get("/healthz");
    assertEquals([hz.status, Object.keys(hz.body)], [200, [
      "lastUpdated",
      "currentTime",
      "nodeEligible",
      "healthy",
      "status",
    ]]);
    assertEquals([hz.body.nodeEligible, hz.body.healthy, Object.keys(hz.body.status)], [true, true, [
      "IPv4",
    ]]);
    const lz = await get("/livez");
    assertEquals([lz.status, "nodeEligible" in lz.body], [200, false]);
    // The cluster autoscaler is about to remove the node; then it is being deleted.
    const tainted = makeNode("node-a");
    tainted.spec = { taints: [{ key: TO_BE_DELETED_TAINT, value: "1732400000", effect: "NoSchedule" }] };
    const deleting = makeNode("node-a");
    deleting.metadata!.deletionTimestamp = new Date(0);
    for (const node of [tainted, deleting]) {
      h.setNode(node);
      const r = await get("/healthz");
      assertEquals([r.status, r.body.nodeEligible, r.body.healthy], [503, false, true]);
      assertEquals((await get("/livez")).status, 200);
    }
    h.setNode(makeNode("node-a"));
    assertEquals((await get("/healthz")).status, 200);
    h.queued("IPv4");
    await clock.advance(5000);
    assertEquals([(await get("/healthz")).status, (await get("/livez")).status], [503, 503]);
    const nf = await fetch(url + "/nope");
    await nf.body?.cancel();
    assertEquals(nf.status, 404);
  } finally {
    ac.abort();
    await server.finished;
  }
});

Deno.test("/readyz: 503 until every family's first sync is in, 503 while a family's syncs fail, 200 again after one succeeds", async () => {
  const h = new ProxyHealth({ clock: new FakeClock(), timeoutMs: 1000 });
  const ac = new AbortController();
  const server = serveHealthz(h, { hostname: "127.0.0.1", port: 0 }, ac.signal);
  const get = async () => {
    const r = await fetch(`http://127.0.0.1:${server.addr.port}/readyz`);
    return [r.status, await r.json()];
  };
  try {
    assertEquals(await get(), [503, { ready: false, status: {} }], "no sync loop yet");
    h.expect("IPv4");
    h.expect("IPv6");
    h.updated("IPv4");
    assertEquals(await get(), [503, {
      ready: false,
      status: { IPv4: "synced", IPv6: "waiting for the first sync" },
    }]);
    h.updated("IPv6");
    assertEquals((await get())[0], 200);
    h.failed("IPv6");
    assertEquals(await get(), [503, {
      ready: false,
      status: { IPv4: "synced", IPv6: "the last sync failed" },
    }]);
    h.expect("IPv6"); // a family already known keeps its state
    assertEquals((await get())[0], 503);
    h.updated("IPv6");
    assertEquals(await get(), [200, { ready: true, status: { IPv4: "synced", IPv6: "synced" } }]);
  } finally {
    ac.abort();
    await server.finished;
  }
});

Deno.test("whenSynced resolves once every family's first sync is in, with when the last of them ended", async () => {
  const clock = new FakeClock();
  const h = new ProxyHealth({ clock, timeoutMs: 1000 });
  h.expect("IPv4");
  h.expect("IPv6");
  const synced = h.whenSynced();
  h.updated("IPv6");
  await clock.advance(700);
  const ended = clock.now();
  h.updated("IPv4");
  // What follows the sync (its collection) takes time before the waiter runs: not counted.
  await clock.advance(300);
  assertEquals(await synced, ended);
  assertEquals(await h.whenSynced(), ended, "already synced: at once, the same time");
});

Deno.test("whenReady resolves once every expected family's first sync is in, not before", async () => {
  const h = new ProxyHealth({ clock: new FakeClock(), timeoutMs: 1000 });
  h.expect("IPv4");
  h.expect("IPv6");
  let ready = false;
  const p = h.whenReady().then(() => ready = true);
  h.updated("IPv4");
  await Promise.resolve();
  assertEquals(ready, false);
  h.updated("IPv6");
  await p;
  assertEquals(ready, true);
  await h.whenReady(); // already ready: at once
});
