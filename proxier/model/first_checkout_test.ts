import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { assert, assertEquals } from "../../tests/support/assert.ts";
import { ep, makeEndpointSlice, makeService, MemoryLogger, NODE } from "../../tests/support/fixtures.ts";
import { LAST_CHANGE_TRIGGER_TIME } from "./endpoint.ts";
import { EndpointsChangeTracker } from "./endpoints_change_tracker.ts";
import { type FirstCheckout, firstCheckout, type HeldEvent } from "./first_checkout.ts";
import { ObjectWarnings } from "./object_warnings.ts";
import { ServiceChangeTracker } from "./service_change_tracker.ts";
import type { EndpointsMap, IPFamily, ServicePortMap } from "./types.ts";

const START = 1_700_000_000_000;

/** What the trackers' first apply gives for `held`, each event taken as of its arrival. */
function byTrackers(held: readonly HeldEvent[], family: IPFamily) {
  let at = 0;
  const warnings = new ObjectWarnings(new MemoryLogger());
  const svc = new ServiceChangeTracker({ family, warnings, now: () => at });
  const eps = new EndpointsChangeTracker({ family, nodeName: NODE, warnings, startMs: START, now: () => at });
  for (const e of held) {
    at = e.at;
    if ("slice" in e) eps.update(e.slice, e.removed);
    else svc.update(e.old, e.service);
  }
  const services: ServicePortMap = new Map();
  const endpoints: EndpointsMap = new Map();
  return { serviceChanges: svc.apply(services), endpointChanges: eps.apply(endpoints), services, endpoints };
}

/** The first checkout of `held`, with its maps. */
function byFirstCheckout(held: readonly HeldEvent[], family: IPFamily) {
  const services: ServicePortMap = new Map();
  const endpoints: EndpointsMap = new Map();
  const out = firstCheckout(held, { family, nodeName: NODE, startMs: START }, services, endpoints);
  return { out, services, endpoints };
}

/** Everything a sync reads of a checkout, in a form that compares by value. */
function readable(r: FirstCheckout & { services: ServicePortMap; endpoints: EndpointsMap }) {
  const sorted = <T>(m: ReadonlyMap<string, T>) => [...m].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0);
  return {
    services: sorted(r.services),
    endpoints: sorted(r.endpoints),
    changed: sorted(new Map([...r.serviceChanges.changed].map(([k, v]) => [k, v.since]))),
    removedPorts: r.serviceChanges.removedPorts,
    portKeys: [...r.serviceChanges.portKeys].sort(),
    changedSince: sorted(r.endpointChanges.changedSince),
    triggerTimes: sorted(r.endpointChanges.triggerTimes),
    lastChangeTriggerTimes: [...r.endpointChanges.lastChangeTriggerTimes].sort(),
  };
}

/** Asserts the first checkout of `held` reads as the trackers' first apply, in `family`. */
function assertSameAsTrackers(held: readonly HeldEvent[], family: IPFamily): void {
  const first = byFirstCheckout(held, family);
  assert(first.out !== undefined, "a list of first sights is read");
  assertEquals(readable({ ...first.out, ...first }), readable(byTrackers(held, family)));
}

/** A deterministic generator (mulberry32), so a failure names its seed and replays. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A first list as a source hands it over, from `seed`: Services of both families, dual-stack,
 * headless, without ports or malformed; each with zero to three slices of either family, some
 * without ports or malformed, endpoints unsorted, repeated, not ready, terminating or on this
 * node; trigger times before and after the start; Services and slices interleaved in any order.
 */
function firstList(seed: number): HeldEvent[] {
  const r = random(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
  const services: HeldEvent[] = [];
  const slices: HeldEvent[] = [];
  const count = 40;
  for (let i = 0; i < count; i++) {
    const ns = pick(["ns1", "ns2"]);
    const name = `svc${i}`;
    const kind = pick(["v4", "v4", "v6", "dual", "headless", "noports", "malformed"]);
    services.push({
      service: makeService(ns, name, (s) => {
        const v4 = `172.30.${i >> 8}.${i & 255}`;
        const v6 = `fd00::${i.toString(16)}`;
        s.spec!.clusterIP = kind === "v6" ? v6 : kind === "headless" ? "None" : v4;
        s.spec!.clusterIPs = kind === "dual" ? [v4, v6] : [s.spec!.clusterIP];
        s.spec!.ports = kind === "noports" ? [] : [
          { name: "p80", port: 80, protocol: "TCP" },
          ...(r() < 0.3 ? [{ name: "dns", port: 53, protocol: "UDP" }] : []),
        ];
        if (kind === "malformed") s.spec!.ports![0].port = 70_000;
      }),
      old: undefined,
      at: START + Math.floor(r() * 1000),
    });
    const sliceCount = pick([0, 1, 1, 1, 2, 3]);
    for (let j = 0; j < sliceCount; j++) {
      const v6 = kind === "v6" || (kind === "dual" && r() < 0.5);
      slices.push({
        slice: makeEndpointSlice(ns, name, (s) => {
          s.metadata!.name = `${name}-${j}`;
          s.addressType = v6 ? "IPv6" : "IPv4";
          const shape = r();
          if (shape < 0.1) s.ports = [];
          else if (shape < 0.2) s.ports = [{ name: "p80", port: 80, protocol: "SCTP;bad" }];
          else if (shape < 0.5) s.ports!.push({ name: "dns", port: 53, protocol: "UDP" });
          const n = Math.floor(r() * 5);
          s.endpoints = Array.from({ length: n }, () => {
            const host = Math.floor(r() * 6) + 1;
            return ep(v6 ? `fd00:1::${host}` : `10.180.0.${host}`, {
              ready: r() < 0.8,
              serving: r() < 0.9,
              terminating: r() < 0.2,
              node: r() < 0.3 ? NODE : "node-b",
            });
          });
          const when = r();
          if (when < 0.3) {
            s.metadata!.annotations = {
              [LAST_CHANGE_TRIGGER_TIME]: new Date(START + Math.floor((r() - 0.5) * 20_000)).toISOString(),
            };
          }
        }),
        removed: false,
        update: false,
        at: START + 1000 + Math.floor(r() * 1000),
      });
    }
  }
  // The source's own order: a list of Services and a list of slices, or one watch's mix.
  const all = r() < 0.5 ? [...services, ...slices] : [...services, ...slices].sort(() => r() - 0.5);
  return all;
}

Deno.test("first checkout: reads a first list as the trackers' first apply does, in each family, over many shapes", () => {
  for (let seed = 1; seed <= 200; seed++) {
    const held = firstList(seed);
    for (const family of ["IPv4", "IPv6"] as const) {
      try {
        assertSameAsTrackers(held, family);
      } catch (e) {
        throw new Error(`seed ${seed}, ${family}`, { cause: e });
      }
    }
  }
});

Deno.test("first checkout: a Service's slices merged, sorted and unique; its ports and trigger times as the trackers give them", () => {
  const trigger = (ms: number) => ({ [LAST_CHANGE_TRIGGER_TIME]: new Date(ms).toISOString() });
  const held: HeldEvent[] = [
    {
      slice: makeEndpointSlice("ns1", "svc1", (s) => {
        s.metadata!.name = "svc1-b";
        s.endpoints = [ep("10.180.0.3"), ep("10.180.0.1")];
        s.metadata!.annotations = trigger(START + 5);
      }),
      removed: false,
      update: false,
      at: START + 1,
    },
    {
      slice: makeEndpointSlice("ns1", "svc1", (s) => {
        s.metadata!.name = "svc1-a";
        s.endpoints = [ep("10.180.0.2"), ep("10.180.0.1")];
        s.metadata!.annotations = trigger(START + 9);
      }),
      removed: false,
      update: false,
      at: START + 2,
    },
    // Before the start: not reported, as upstream.
    {
      slice: makeEndpointSlice("ns1", "svc2", (s) => {
        s.endpoints = [ep("10.180.0.7")];
        s.metadata!.annotations = trigger(START - 1);
      }),
      removed: false,
      update: false,
      at: START + 3,
    },
    { service: makeService("ns1", "svc1"), old: undefined, at: START + 4 },
  ];
  const first = byFirstCheckout(held, "IPv4");
  assertEquals(
    first.endpoints.get("ns1/svc1:p80/TCP")?.map((e) => e.key),
    ["10.180.0.1:80", "10.180.0.2:80", "10.180.0.3:80"],
  );
  assertEquals(first.out?.endpointChanges.triggerTimes, new Map([["ns1/svc1", START + 9]]));
  assertEquals(
    first.out?.endpointChanges.changedSince,
    new Map([["ns1/svc1", START + 1], ["ns1/svc2", START + 3]]),
  );
  assertEquals([...first.services.keys()], ["ns1/svc1:p80/TCP"]);
  assertSameAsTrackers(held, "IPv4");
});

Deno.test("first checkout: anything but a first sight leaves the maps empty, for the trackers to take", () => {
  const svc = makeService("ns1", "svc1");
  const slice = makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]);
  const add = (s: V1Service): HeldEvent => ({ service: s, old: undefined, at: START });
  const sliceEvent = (s: V1EndpointSlice, o: { removed?: boolean; update?: boolean } = {}): HeldEvent => ({
    slice: s,
    removed: o.removed ?? false,
    update: o.update ?? false,
    at: START,
  });
  const cases: Record<string, HeldEvent[]> = {
    "a Service's update": [add(svc), sliceEvent(slice), { service: svc, old: svc, at: START }],
    "a Service's deletion": [add(svc), sliceEvent(slice), { service: undefined, old: svc, at: START }],
    "a Service added twice": [
      add(svc),
      sliceEvent(slice),
      add(makeService("ns1", "svc1", (s) => s.spec!.ports![0].port = 81)),
    ],
    "a slice's update": [add(svc), sliceEvent(slice), sliceEvent(slice, { update: true })],
    "a slice's deletion": [add(svc), sliceEvent(slice), sliceEvent(slice, { removed: true })],
    "a slice added twice": [add(svc), sliceEvent(slice), sliceEvent(slice)],
  };
  for (const [what, held] of Object.entries(cases)) {
    const first = byFirstCheckout(held, "IPv4");
    assertEquals(first.out, undefined, what);
    assertEquals([first.services.size, first.endpoints.size], [0, 0], what);
  }
  // A Service seen first without ports (another family's, say), then with them: the last sight is
  // what the tracker keeps too, so it is still a first list.
  assertSameAsTrackers(
    [add(makeService("ns1", "svc1", (s) => s.spec!.clusterIP = "None")), add(svc), sliceEvent(slice)],
    "IPv4",
  );
});
