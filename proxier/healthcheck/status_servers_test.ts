import { assertEquals, assertMatch, assertRejects, assertThrows } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { freePort } from "../../tests/support/net_helpers.ts";
import { ProxyMetrics } from "../metrics.ts";
import { realClock } from "../runtime/clock.ts";
import { ListenError } from "./listener.ts";
import { ProxyHealth } from "./proxier_health.ts";
import { serveStatus } from "./status_servers.ts";

const PAGES = {
  mode: "iptables",
  configuration: {} as never,
  flags: [],
  version: "0",
  emulates: "1.37",
  startedMs: 0,
};

function options(healthzPort: number, metricsPort: number, hardFail: boolean, signal: AbortSignal) {
  const failures: string[] = [];
  return {
    failures,
    o: {
      healthz: { hostname: "127.0.0.1", port: healthzPort },
      metricsAddress: { hostname: "127.0.0.1", port: metricsPort },
      health: new ProxyHealth({ clock: realClock, timeoutMs: 60_000 }),
      metrics: new ProxyMetrics(),
      pages: PAGES,
      signal,
      log: new MemoryLogger(),
      clock: realClock,
      hardFail,
      onFailure: (reason: string) => failures.push(reason),
    },
  };
}

Deno.test("status servers: /healthz and /metrics answer on their addresses until stopped", async () => {
  const ac = new AbortController();
  const [hz, m] = [freePort(), freePort()];
  const tasks: Promise<unknown>[] = [];
  serveStatus(options(hz, m, true, ac.signal).o, tasks);
  assertEquals(tasks.length, 2);
  assertEquals((await fetch(`http://127.0.0.1:${hz}/livez`)).status, 200);
  assertMatch(
    await (await fetch(`http://127.0.0.1:${m}/metrics`)).text(),
    /kubeproxy_sync_proxy_rules_duration_seconds/,
  );
  ac.abort();
  await Promise.all(tasks);
});

Deno.test("status servers: with hard fail, a taken metrics port throws and the healthz server already started is the caller's to stop", async () => {
  const ac = new AbortController();
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const hz = freePort();
    const tasks: Promise<unknown>[] = [];
    const { o, failures } = options(hz, (taken.addr as Deno.NetAddr).port, true, ac.signal);
    assertThrows(() => serveStatus(o, tasks), ListenError);
    assertEquals([tasks.length, failures], [1, []]);
    ac.abort();
    await Promise.all(tasks);
    await assertRejects(() => fetch(`http://127.0.0.1:${hz}/livez`), TypeError);
  } finally {
    ac.abort();
    taken.close();
  }
});

Deno.test("status servers: without hard fail, a taken port is retried and named once in an Event", async () => {
  const ac = new AbortController();
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const tasks: Promise<unknown>[] = [];
    const { o, failures } = options(freePort(), (taken.addr as Deno.NetAddr).port, false, ac.signal);
    serveStatus(o, tasks);
    assertEquals([tasks.length, failures], [2, ["FailedToStartMetricServer"]]);
    ac.abort();
    await Promise.all(tasks);
  } finally {
    ac.abort();
    taken.close();
  }
});
