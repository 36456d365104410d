import { assert, assertEquals } from "../tests/support/assert.ts";
import type { V1Service } from "@kubernetes/client-node";
import {
  baseOptions,
  ep,
  makeEndpointSlice,
  makeService,
  MemoryLogger,
  NODE,
} from "../tests/support/fixtures.ts";
import { freePort } from "../tests/support/net_helpers.ts";
import { ServiceHealthServer } from "./healthcheck/service_health.ts";
import { BaseProxier, type SyncContext } from "./base_proxier.ts";
import { FULL_SYNC_PERIOD_MS } from "./proxier_options.ts";
import { SyncMemory, TRIM_PERIOD_MS } from "./runtime/sync_memory.ts";
import type { IPFamily } from "./model/types.ts";
import { FakeClock } from "./runtime/clock.ts";
import { ProxyHealth } from "./healthcheck/proxier_health.ts";
import { ProxyMetrics } from "./metrics.ts";

const SYNC_PERIOD_MS = 30_000;

interface SyncRecord {
  readonly full: boolean;
  readonly at: number;
  readonly changed: readonly string[];
  readonly endpoints: readonly string[];
}

/** A proxier whose datapath takes `durationMs` of fake time per sync and can be told to fail. */
class SlowProxier extends BaseProxier {
  readonly syncs: SyncRecord[] = [];
  durationMs = 0;
  failNext = false;
  /** A sync's datapath work is under way. */
  busy = false;
  readonly #clock: FakeClock;

  constructor(
    clock: FakeClock,
    trim?: () => void,
    more: { family?: IPFamily; memory?: SyncMemory; metrics?: ProxyMetrics } = {},
  ) {
    const health = new ProxyHealth({ clock, timeoutMs: 2 * SYNC_PERIOD_MS });
    super({
      family: more.family ?? "IPv4",
      memory: more.memory,
      nodeName: "node-a",
      log: new MemoryLogger(),
      clock,
      metrics: more.metrics ?? new ProxyMetrics(),
      health,
      minSyncPeriodMs: 1_000,
      syncPeriodMs: SYNC_PERIOD_MS,
      fullSyncPeriodMs: FULL_SYNC_PERIOD_MS,
      trim,
    });
    this.#clock = clock;
  }

  /** When every family last completed a sync (the health server's own reading). */
  lastSyncMs(): number | undefined {
    return this.health.lastSyncMs();
  }

  /** What `/livez` says now: healthy or not. */
  get healthy(): boolean {
    return this.health.status().healthy;
  }

  /** How long a thorough drift check takes; what it finds (undefined: nothing). */
  checkMs = 0;
  drifted: string | undefined;
  /** Thorough checks that ran to their end. */
  checksEnded = 0;
  /** A thorough check is under way. */
  checking = false;

  protected override async detectDrift(thorough: boolean, signal?: AbortSignal): Promise<string | undefined> {
    if (!thorough) return undefined;
    this.checking = true;
    await new Promise<void>((r) => {
      const cancel = this.#clock.setTimer(r, this.checkMs);
      signal?.addEventListener("abort", () => (cancel(), r()));
    });
    this.checking = false;
    if (signal?.aborted) return undefined;
    this.checksEnded++;
    return this.drifted;
  }

  protected override async syncRules(ctx: SyncContext): Promise<void> {
    const eps = [...ctx.endpoints.values()].flat().map((e) => e.ip).sort();
    this.syncs.push({
      full: ctx.full,
      at: this.#clock.now(),
      changed: [...ctx.changedServices],
      endpoints: eps,
    });
    this.busy = true;
    await new Promise<void>((r) => this.#clock.setTimer(r, this.durationMs));
    this.busy = false;
    if (this.failNext) {
      this.failNext = false;
      throw new Error("restore failed");
    }
  }
}

function started(
  durationMs: number,
  trim?: () => void,
): { clock: FakeClock; p: SlowProxier; done: Promise<void>; abort: () => void; stop: () => Promise<void> } {
  const clock = new FakeClock();
  const p = new SlowProxier(clock, trim);
  p.durationMs = durationMs;
  p.onServiceAdd(makeService("ns1", "svc1"));
  p.onEndpointSliceAdd(makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]));
  p.onServicesSynced();
  p.onEndpointSlicesSynced();
  const ac = new AbortController();
  const done = p.syncLoop(ac.signal);
  return {
    clock,
    p,
    done,
    abort: () => ac.abort(),
    stop: async () => {
      ac.abort();
      await clock.advance(10 * SYNC_PERIOD_MS);
      await done;
    },
  };
}

Deno.test("a first sync longer than the health timeout leaves the proxy healthy, as upstream's (healthy while it starts), and sets no queued time; a later sync that long does not", async () => {
  const clock = new FakeClock();
  const metrics = new ProxyMetrics();
  const p = new SlowProxier(clock, undefined, { metrics });
  // Three sync periods per sync: the health timeout is two.
  p.durationMs = 3 * SYNC_PERIOD_MS;
  p.onServiceAdd(makeService("ns1", "svc1"));
  p.onEndpointSliceAdd(makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]));
  const queuedAt = async () =>
    (await metrics.registry.metrics()).match(
      /^kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds\{ip_family="IPv4"\} (\S+)$/m,
    )?.[1];
  assertEquals(
    await queuedAt(),
    undefined,
    "the first lists' events queue no sync: none runs before both lists are in",
  );
  p.onServicesSynced();
  p.onEndpointSlicesSynced();
  const ac = new AbortController();
  const done = p.syncLoop(ac.signal);
  await clock.advance(0);
  assertEquals(p.syncs.length, 1);
  // A change during the first sync is queued, and waits past the timeout for that sync to end.
  moveEndpoint(p, "10.180.0.1", "10.180.0.2");
  assertEquals(await queuedAt(), String(clock.now() / 1000));
  await clock.advance(2 * SYNC_PERIOD_MS + 1_000);
  assertEquals([p.syncs.length, p.healthy], [1, true], "still in its first sync, and healthy");
  await clock.advance(SYNC_PERIOD_MS);
  assertEquals(p.syncs.length, 2, "the first sync is in; the change's sync has begun");
  moveEndpoint(p, "10.180.0.2", "10.180.0.3");
  await clock.advance(2 * SYNC_PERIOD_MS + 1_000);
  assertEquals(
    p.healthy,
    false,
    "once the family has synced, a change waiting past the timeout is a failure",
  );
  ac.abort();
  await clock.advance(10 * SYNC_PERIOD_MS);
  await done;
});

function moveEndpoint(p: SlowProxier, from: string, to: string): void {
  p.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep(from)]),
    makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep(to)]),
  );
}

Deno.test("a full sync slower than the sync period does not make the next sync full", async () => {
  const { clock, p, stop } = started(45_000);
  await clock.advance(0);
  assertEquals(p.syncs.map((s) => s.full), [true]);
  // A change arriving during the long first sync is applied by the very next sync, a partial one.
  await clock.advance(10_000);
  moveEndpoint(p, "10.180.0.1", "10.180.0.2");
  p.durationMs = 100;
  await clock.advance(35_000);
  assertEquals(p.syncs.length, 2);
  assertEquals(p.syncs[1].full, false);
  assertEquals(p.syncs[1].changed, ["ns1/svc1"]);
  assertEquals(p.syncs[1].endpoints, ["10.180.0.2"]);
  assertEquals(p.syncs[1].at - p.syncs[0].at, 45_000, "runs as soon as the long sync ends");
  await stop();
});

Deno.test("the sync period drives partial resyncs; a full one comes an hour after the last full ended", async () => {
  const { clock, p, stop } = started(5_000);
  await clock.advance(FULL_SYNC_PERIOD_MS);
  const periodic = p.syncs.slice(1);
  assertEquals(periodic.filter((s) => s.full), [], "periodic resyncs are partial");
  // One every syncPeriod (measured from the start of the previous run, as upstream's runner).
  assertEquals(periodic.length, Math.floor(FULL_SYNC_PERIOD_MS / SYNC_PERIOD_MS));
  await clock.advance(2 * SYNC_PERIOD_MS);
  const fulls = p.syncs.filter((s) => s.full).map((s) => s.at - p.syncs[0].at);
  assertEquals(fulls.length, 2);
  assert(
    fulls[1] >= FULL_SYNC_PERIOD_MS + 5_000 && fulls[1] < FULL_SYNC_PERIOD_MS + 5_000 + SYNC_PERIOD_MS,
    `second full at ${fulls[1]} ms`,
  );
  await stop();
});

/**
 * Advances `clock` until a thorough check of `p` is under way with a periodic sync due behind it
 * (checks of 25 s come DRIFT_CHECK_PACE times that apart, at most).
 */
async function untilCheckWithSyncWaiting(clock: FakeClock, p: SlowProxier): Promise<void> {
  const waiting = () => p.checking && clock.now() - p.syncs.at(-1)!.at > SYNC_PERIOD_MS;
  for (let i = 0; i < 2_000 && !waiting(); i++) await clock.advance(500);
  assert(waiting(), "a check under way, a periodic sync waiting");
}

Deno.test("a thorough drift check longer than the quiet between periodic syncs still ends, and a change still cuts it short", async () => {
  // Each periodic sync takes 10 s of a 30 s period; a check takes 25 s, more than the 20 s between.
  const { clock, p, stop } = started(10_000);
  p.checkMs = 25_000;
  await clock.advance(5_000);
  p.drifted = "a real server deleted by hand";
  await clock.advance(3 * SYNC_PERIOD_MS);
  assert(p.checksEnded > 0, "a check ran to its end");
  const repairs = p.syncs.filter((s) => s.full && s.at > 5_000);
  assert(
    repairs.length > 0,
    `what drifted is repaired by a full sync: ${JSON.stringify(p.syncs.map((s) => s.at))}`,
  );
  p.drifted = undefined;
  // A change asked for while a check runs, a periodic sync due and waiting behind it, is synced at once.
  await untilCheckWithSyncWaiting(clock, p);
  const ended = p.checksEnded;
  const asked = clock.now();
  moveEndpoint(p, "10.180.0.1", "10.180.0.2");
  await clock.advance(1_000);
  const synced = p.syncs.find((s) => s.at >= asked && s.endpoints.includes("10.180.0.2"));
  assert(
    synced !== undefined && synced.at - asked < 1_000,
    `the change waited for no check: ${JSON.stringify(p.syncs)}`,
  );
  assertEquals(p.checksEnded, ended, "the check in flight was cut short");
  await stop();
});

Deno.test("stopping while a thorough drift check runs, a periodic sync waiting behind it, stops the check", async () => {
  const { clock, p, done, abort } = started(10_000);
  p.checkMs = 25_000;
  await untilCheckWithSyncWaiting(clock, p);
  const ended = p.checksEnded;
  let stopped = false;
  done.then(() => stopped = true);
  abort();
  // The waiting periodic sync takes its 10 s; what is left of the check's 25 s is not waited for.
  await clock.advance(10_000);
  assert(stopped, "the loop ended");
  assertEquals(p.checksEnded, ended, "the check was stopped");
});

Deno.test("syncs give malloc's free memory back at most every TRIM_PERIOD_MS (RSS outside the V8 heap stays flat)", async () => {
  const trims: number[] = [];
  const box: { clock?: FakeClock } = {};
  const { clock, p, stop } = started(100, () => trims.push(box.clock!.now()));
  box.clock = clock;
  // Periodic syncs (every 30 s) each trim: the period has passed.
  await clock.advance(60_000 + 1_000);
  assertEquals(p.syncs.length, 3);
  // A change a second: a sync a second, a trim only every TRIM_PERIOD_MS.
  for (let i = 0; i < 12; i++) {
    moveEndpoint(p, `10.180.0.${i + 1}`, `10.180.0.${i + 2}`);
    await clock.advance(1_000);
  }
  assertEquals(p.syncs.length, 15);
  const at = trims.map((t) => t - trims[0]);
  assertEquals(at.slice(0, 3), [0, 30_000, 60_000]);
  // 12 syncs in the burst's 12 s, 2 trims: each TRIM_PERIOD_MS or more after the one before.
  const gaps = at.slice(2).map((t, i, a) => t - (a[i - 1] ?? t)).slice(1);
  assertEquals(gaps.length, 2, `trims at ${at.join(", ")} ms`);
  assertEquals(gaps.every((g) => g >= TRIM_PERIOD_MS), true, `gaps ${gaps.join(", ")} ms`);
  await stop();
});

Deno.test("a full sync's garbage collection comes after the sync is recorded: its health and its time do not include it", async () => {
  const g = globalThis as { gc?: unknown };
  const saved = g.gc;
  const box: { clock?: FakeClock; p?: SlowProxier; collectedAt?: number; lastSyncMs?: number } = {};
  g.gc = () => {
    box.collectedAt = box.clock!.now();
    box.lastSyncMs = box.p!.lastSyncMs();
  };
  try {
    const { clock, p, stop } = started(100);
    Object.assign(box, { clock, p });
    await clock.advance(1_000);
    assertEquals(p.syncs.map((s) => s.full), [true]);
    assert(box.collectedAt !== undefined, "a full sync collects");
    assertEquals(
      box.lastSyncMs,
      box.collectedAt,
      "the sync was recorded in the health state before the collection",
    );
    await stop();
  } finally {
    g.gc = saved;
  }
});

Deno.test("two families share one memory step: no collection runs while either's sync is in flight, one runs after both", async () => {
  const g = globalThis as { gc?: unknown };
  const saved = g.gc;
  const clock = new FakeClock();
  const memory = new SyncMemory({ now: () => clock.now(), trim: () => {} });
  const v4 = new SlowProxier(clock, undefined, { memory });
  const v6 = new SlowProxier(clock, undefined, { family: "IPv6", memory });
  v4.durationMs = 2_000;
  v6.durationMs = 100;
  const collections: { atMs: number; busy: string[] }[] = [];
  const t0 = clock.now();
  g.gc = () => {
    const busy = [v4, v6].filter((p) => p.busy).map((p) => p.family);
    collections.push({ atMs: clock.now() - t0, busy });
  };
  const ctl = new AbortController();
  try {
    const loops = [v4, v6].map((p) => {
      const loop = p.syncLoop(ctl.signal);
      p.onServicesSynced();
      p.onEndpointSlicesSynced();
      return loop;
    });
    await clock.advance(3_000);
    assertEquals([v4, v6].map((p) => p.syncs.map((s) => s.full)), [[true], [true]]);
    // Each family collecting as its own sync ended would collect at 100 ms, mid IPv4's sync.
    assertEquals(collections, [{ atMs: 2_000, busy: [] }], "one thorough collection, once both are in");
    ctl.abort();
    await clock.advance(10 * SYNC_PERIOD_MS);
    await Promise.all(loops);
  } finally {
    g.gc = saved;
  }
});

Deno.test("after a failed sync the retry is full, and later periodic syncs are partial again", async () => {
  const { clock, p, stop } = started(100);
  await clock.advance(1_000);
  moveEndpoint(p, "10.180.0.1", "10.180.0.3");
  p.failNext = true;
  await clock.advance(1_000);
  assertEquals(p.syncs.map((s) => s.full), [true, false]);
  await clock.advance(2_000);
  assertEquals(p.syncs.map((s) => s.full), [true, false, true], "the retry (after 1 s) is full");
  assertEquals(p.syncs[2].endpoints, ["10.180.0.3"]);
  await clock.advance(2 * SYNC_PERIOD_MS);
  assertEquals(p.syncs.slice(3).map((s) => s.full), [false, false]);
  await stop();
});

/** A proxier whose sync waits until the loop's signal aborts it, as a long restore killed at stop. */
class HangingProxier extends BaseProxier {
  started = 0;
  constructor(clock: FakeClock, log: MemoryLogger, metrics: ProxyMetrics) {
    super({
      family: "IPv4",
      nodeName: "node-a",
      log,
      clock,
      metrics,
      health: new ProxyHealth({ clock, timeoutMs: 60_000 }),
      minSyncPeriodMs: 1_000,
      syncPeriodMs: SYNC_PERIOD_MS,
    });
  }
  protected override syncRules(ctx: SyncContext): Promise<void> {
    this.started++;
    return new Promise((_, reject) =>
      ctx.signal.addEventListener("abort", () => reject(new Error("iptables-restore killed")), { once: true })
    );
  }
}

Deno.test("stopping interrupts a sync in progress at once, counts no failure and says why", async () => {
  const clock = new FakeClock();
  const log = new MemoryLogger();
  const metrics = new ProxyMetrics();
  const p = new HangingProxier(clock, log, metrics);
  p.onServicesSynced();
  p.onEndpointSlicesSynced();
  const ac = new AbortController();
  let stopped = false;
  const loop = p.syncLoop(ac.signal).then(() => stopped = true);
  await clock.advance(0);
  assertEquals([p.started, stopped], [1, false], "the sync hangs until stopped");
  ac.abort();
  await clock.advance(0);
  await loop;
  assertEquals(stopped, true);
  assertEquals(log.messages("info"), ["Sync interrupted by shutdown; the previous rules stay"]);
  assertEquals(log.messages("error"), []);
  const page = await metrics.registry.metrics();
  assertEquals(
    page.match(/^kubeproxy_sync_proxy_rules_failures_total\{ip_family="IPv4"\} [1-9].*$/m),
    null,
    page,
  );
});

/** A proxier that records how many syncs ran, waiting for its Node as with the API source. */
class NodeWaitingProxier extends BaseProxier {
  syncs = 0;
  constructor(clock: FakeClock, log: MemoryLogger, nodeCIDR = false) {
    super({
      family: "IPv4",
      nodeName: "node-a",
      log,
      clock,
      metrics: new ProxyMetrics(),
      health: new ProxyHealth({ clock, timeoutMs: 60_000 }),
      minSyncPeriodMs: 0,
      syncPeriodMs: SYNC_PERIOD_MS,
      nodeWaitMs: nodeCIDR ? 300_000 : 30_000,
      localDetection: { mode: nodeCIDR ? "NodeCIDR" : "ClusterCIDR", clusterCIDRs: ["10.180.0.0/16"] },
    });
  }
  protected override syncRules(): Promise<void> {
    this.syncs++;
    return Promise.resolve();
  }
}

Deno.test("the first sync waits (bounded) for the own Node, and in NodeCIDR mode for its pod CIDRs, as upstream", async () => {
  const node = (podCIDR?: string) => ({
    metadata: { name: "node-a" },
    spec: podCIDR === undefined ? {} : { podCIDR, podCIDRs: [podCIDR] },
    status: { addresses: [{ type: "InternalIP", address: "192.168.0.2" }] },
  });
  const start = (p: BaseProxier) => {
    p.onServicesSynced();
    p.onEndpointSlicesSynced();
    p.onNodeSynced(); // the Node list is in, without the Node yet
  };
  {
    const clock = new FakeClock();
    const p = new NodeWaitingProxier(clock, new MemoryLogger());
    const ac = new AbortController();
    const loop = p.syncLoop(ac.signal);
    start(p);
    await clock.advance(10_000);
    assertEquals(p.syncs, 0, "no rule before the Node is known");
    p.onNodeAdd(node());
    await clock.advance(100);
    assertEquals(p.syncs, 1, "the Node arrived: the first sync runs at once");
    ac.abort();
    await loop;
  }
  {
    const clock = new FakeClock();
    const log = new MemoryLogger();
    const p = new NodeWaitingProxier(clock, log);
    const ac = new AbortController();
    const loop = p.syncLoop(ac.signal);
    start(p);
    await clock.advance(29_000);
    assertEquals(p.syncs, 0);
    await clock.advance(1_100);
    assertEquals(p.syncs, 1, "the wait is bounded: 30 s");
    assertEquals(log.messages("warn").map((m) => m.startsWith("No Node object")), [true]);
    ac.abort();
    await loop;
  }
  {
    const clock = new FakeClock();
    const p = new NodeWaitingProxier(clock, new MemoryLogger(), true);
    const ac = new AbortController();
    const loop = p.syncLoop(ac.signal);
    start(p);
    p.onNodeAdd(node());
    await clock.advance(60_000);
    assertEquals(p.syncs, 0, "NodeCIDR mode: a Node without pod CIDRs is not enough");
    p.onNodeUpdate(node(), node("10.180.3.0/24"));
    await clock.advance(100);
    assertEquals(p.syncs, 1);
    ac.abort();
    await loop;
  }
});

/** A proxier whose datapath does nothing: what the shared half does around it is observed. */
class NoopProxier extends BaseProxier {
  readonly contexts: SyncContext[] = [];
  protected override syncRules(ctx: SyncContext): Promise<void> {
    this.contexts.push(ctx);
    return Promise.resolve();
  }
}

Deno.test("health check node port: terminating endpoints do not count, even while serving (upstream's LocalReadyEndpoints)", async () => {
  const port = freePort();
  const healthServer = new ServiceHealthServer({ log: new MemoryLogger() });
  // Health check node ports answer where NodePorts do: here, the node's loopback address only.
  const p = new NoopProxier(
    baseOptions({ healthServer, nodePortAddresses: ["127.0.0.1/32"], nodeIPs: ["127.0.0.1"] }),
  );
  const lb = makeService("ns1", "lb", (s) => {
    s.spec!.type = "LoadBalancer";
    s.spec!.externalTrafficPolicy = "Local";
    s.spec!.healthCheckNodePort = port;
  });
  const slice = (...eps: ReturnType<typeof ep>[]) => makeEndpointSlice("ns1", "lb", (s) => s.endpoints = eps);
  const get = async () => {
    const r = await fetch(`http://127.0.0.1:${port}/`);
    return { status: r.status, localEndpoints: (await r.json()).localEndpoints };
  };
  try {
    p.onServiceAdd(lb);
    p.onEndpointSliceAdd(slice(ep("10.180.0.1", { node: NODE }), ep("10.180.0.2")));
    p.onServicesSynced();
    p.onEndpointSlicesSynced();
    await p.syncNow();
    assertEquals(await get(), { status: 200, localEndpoints: 1 });
    // The local pod terminates but still serves: the load balancer must drain this node now.
    p.onEndpointSliceUpdate(
      slice(),
      slice(
        ep("10.180.0.1", { node: NODE, ready: false, serving: true, terminating: true }),
        ep("10.180.0.2"),
      ),
    );
    await p.syncNow();
    assertEquals(await get(), { status: 503, localEndpoints: 0 });
  } finally {
    healthServer.close();
  }
});

Deno.test("a partial sync recomputes every port, before and after, of each changed Service, and no other", async () => {
  const p = new NoopProxier(baseOptions());
  const twoPorts = (s: V1Service) =>
    s.spec!.ports = [{ name: "p80", port: 80, protocol: "TCP" }, { name: "p81", port: 81, protocol: "TCP" }];
  p.onServiceAdd(makeService("ns1", "svc1", twoPorts));
  p.onServiceAdd(makeService("ns1", "svc2"));
  p.onServicesSynced();
  p.onEndpointSlicesSynced();
  await p.syncNow();
  const changed = () => [...p.contexts.at(-1)!.changedPorts].sort();
  // An endpoint change: every port of that Service, none of the other.
  p.onEndpointSliceAdd(makeEndpointSlice("ns1", "svc1"));
  await p.syncNow();
  assertEquals(changed(), ["ns1/svc1:p80/TCP", "ns1/svc1:p81/TCP"]);
  // A port removed: the old one (now absent from the model) and the one left.
  p.onServiceUpdate(makeService("ns1", "svc1", twoPorts), makeService("ns1", "svc1"));
  await p.syncNow();
  assertEquals(changed(), ["ns1/svc1:p80/TCP", "ns1/svc1:p81/TCP"]);
  assertEquals(p.contexts.at(-1)!.services.has("ns1/svc1:p81/TCP"), false);
  // The Service deleted: its port, gone; then an endpoint change of the deleted Service: nothing.
  p.onServiceDelete(makeService("ns1", "svc1"));
  await p.syncNow();
  assertEquals(changed(), ["ns1/svc1:p80/TCP"]);
  p.onEndpointSliceDelete(makeEndpointSlice("ns1", "svc1"));
  await p.syncNow();
  assertEquals(changed(), []);
});

Deno.test("each Service's last change, its slice's trigger time, and the sync that applied it (explain's timing)", async () => {
  const { clock, p, stop } = started(100);
  await clock.advance(100);
  const t0 = p.syncs[0].at;
  assertEquals(p.familyView().timing("ns1/svc1"), {
    changedMs: t0,
    triggerMs: undefined,
    appliedMs: t0 + 100,
  });
  // A change whose EndpointSlice carries the controller's trigger time.
  await clock.advance(5_000);
  const t1 = clock.now();
  p.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]),
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.endpoints = [ep("10.180.0.2")];
      s.metadata!.annotations = {
        "endpoints.kubernetes.io/last-change-trigger-time": new Date(t1 - 2_000).toISOString(),
      };
    }),
  );
  await clock.advance(2_000);
  const applied = p.syncs.at(-1)!.at + 100;
  assertEquals(p.familyView().timing("ns1/svc1"), {
    changedMs: t1,
    triggerMs: t1 - 2_000,
    appliedMs: applied,
  });
  // A failed sync applies nothing: no time until the retry (full) puts it in the kernel.
  p.failNext = true;
  const t2 = clock.now();
  moveEndpoint(p, "10.180.0.2", "10.180.0.3");
  await clock.advance(150);
  assertEquals(p.familyView().timing("ns1/svc1")?.appliedMs, undefined);
  assertEquals(p.familyView().timing("ns1/svc1")?.changedMs, t2);
  await clock.advance(10_000);
  assert(p.familyView().timing("ns1/svc1")!.appliedMs! > t2, "applied by the retry");
  // A Service gone has no timing left.
  p.onServiceDelete(makeService("ns1", "svc1"));
  await clock.advance(2_000);
  assertEquals(p.familyView().timing("ns1/svc1"), undefined);
  await stop();
});
