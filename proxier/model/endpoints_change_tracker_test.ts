import { ObjectWarnings } from "./object_warnings.ts";
import { assertEquals } from "../../tests/support/assert.ts";
import { ep, makeEndpointSlice, MemoryLogger, NODE } from "../../tests/support/fixtures.ts";
import { EndpointsChangeTracker } from "./endpoints_change_tracker.ts";
import type { EndpointsMap } from "./types.ts";
import type { V1EndpointSlice } from "@kubernetes/client-node";

function tracker() {
  const log = new MemoryLogger();
  return {
    t: new EndpointsChangeTracker({ family: "IPv4", nodeName: NODE, warnings: new ObjectWarnings(log) }),
    log,
    map: new Map() as EndpointsMap,
  };
}
const keys = (map: EndpointsMap, k = "ns1/svc1:p80/TCP") => (map.get(k) ?? []).map((e) => e.key);

Deno.test("EndpointsChangeTracker merges slices of one service and applies at checkout", () => {
  const { t, map } = tracker();
  t.update(
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.metadata!.name = "svc1-a";
      s.endpoints = [ep("10.180.0.1")];
    }),
    false,
  );
  t.update(
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.metadata!.name = "svc1-b";
      s.endpoints = [ep("10.180.0.2")];
    }),
    false,
  );
  assertEquals(map.size, 0);
  assertEquals([...t.apply(map).changedSince.keys()], ["ns1/svc1"]);
  assertEquals(keys(map), ["10.180.0.1:80", "10.180.0.2:80"]);
  t.update(makeEndpointSlice("ns1", "svc1", (s) => s.metadata!.name = "svc1-a"), true);
  t.apply(map);
  assertEquals(keys(map), ["10.180.0.2:80"]);
});

Deno.test("EndpointsChangeTracker: a no-op update is not a change", () => {
  const { t, map } = tracker();
  const s = makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]);
  t.update(s, false);
  t.apply(map);
  assertEquals(
    t.update(
      makeEndpointSlice("ns1", "svc1", (x) => {
        x.endpoints = [ep("10.180.0.1")];
        x.metadata!.resourceVersion = "9";
      }),
      false,
    ),
    false,
  );
});

Deno.test("EndpointsChangeTracker: a malformed slice is dropped with a warning; the others stay", () => {
  const { t, map, log } = tracker();
  t.update(
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.metadata!.name = "svc1-a";
      s.endpoints = [ep("10.180.0.1")];
    }),
    false,
  );
  t.update(
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.metadata!.name = "svc1-b";
      s.endpoints = [ep("10.180.0.2")];
    }),
    false,
  );
  t.apply(map);
  t.update(
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.metadata!.name = "svc1-b";
      s.ports = [{ name: "p80", port: 80, protocol: "tcp;rm" }];
    }),
    false,
  );
  t.apply(map);
  assertEquals(keys(map), ["10.180.0.1:80"]);
  assertEquals(log.messages("warn"), [
    'Skipping malformed EndpointSlice "ns1/svc1-b": invalid ports[0].protocol: "tcp;rm"',
  ]);
});

Deno.test("EndpointsChangeTracker: a malformed endpoint is left out with one warning per slice version", () => {
  const log = new MemoryLogger();
  const warnings = new ObjectWarnings(log);
  // Both families' trackers see every slice; the problem is logged once.
  const v4 = new EndpointsChangeTracker({ family: "IPv4", nodeName: NODE, warnings });
  const v6 = new EndpointsChangeTracker({ family: "IPv6", nodeName: NODE, warnings });
  const map = new Map() as EndpointsMap;
  const slice = (bad: string, rv: string) =>
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.metadata!.resourceVersion = rv;
      s.endpoints = [ep("10.180.0.1"), ep(bad), ep("10.180.0.3")];
    });
  for (const t of [v4, v6, v4]) t.update(slice("10.180.0.999", "1"), false);
  v4.apply(map);
  assertEquals(keys(map), ["10.180.0.1:80", "10.180.0.3:80"]);
  const warned = [
    'Skipping malformed endpoint of EndpointSlice "ns1/svc1-abcde": invalid endpoints[1].addresses[0]: "10.180.0.999" is not an IPv4 address',
  ];
  assertEquals(log.messages("warn"), warned);
  // A new version with the same problem says it again; a fixed one keeps quiet.
  v4.update(slice("10.180.0.998", "2"), false);
  v4.update(slice("10.180.0.2", "3"), false);
  v4.apply(map);
  assertEquals(log.messages("warn").length, 2);
  assertEquals(keys(map), ["10.180.0.1:80", "10.180.0.2:80", "10.180.0.3:80"]);
});

Deno.test("EndpointsChangeTracker reports trigger times", () => {
  const { t, map } = tracker();
  const mk = (ips: string[]) =>
    makeEndpointSlice("ns1", "dns", (s) => {
      s.ports = [{ name: "dns", port: 53, protocol: "UDP" }];
      s.endpoints = ips.map((ip) => ep(ip));
      s.metadata!.annotations = {
        "endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z",
      };
    });
  t.update(mk(["10.180.0.1", "10.180.0.2"]), false);
  const first = t.apply(map);
  assertEquals(first.lastChangeTriggerTimes, [Date.parse("2026-01-01T00:00:00Z")]);
  t.update(mk(["10.180.0.2"]), false);
  t.apply(map);
  assertEquals(keys(map, "ns1/dns:dns/UDP"), ["10.180.0.2:53"]);
});

Deno.test("EndpointsChangeTracker skips trigger times from before the proxy started, as upstream", () => {
  const start = Date.parse("2026-11-24T10:00:00Z");
  const t = new EndpointsChangeTracker({
    family: "IPv4",
    nodeName: NODE,
    warnings: new ObjectWarnings(new MemoryLogger()),
    startMs: start,
  });
  const map: EndpointsMap = new Map();
  const at = (when: string, ips: string[]) =>
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.endpoints = ips.map((ip) => ep(ip));
      s.metadata!.annotations = { "endpoints.kubernetes.io/last-change-trigger-time": when };
    });
  // As `kubectl get -o yaml` prints a slice changed long ago.
  t.update(at("2025-01-10T10:00:01Z", ["10.180.0.1"]), false);
  assertEquals(t.apply(map).lastChangeTriggerTimes, []);
  t.update(at("2026-11-24T10:00:05Z", ["10.180.0.2"]), false);
  assertEquals(t.apply(map).lastChangeTriggerTimes, [start + 5000]);
});

Deno.test("EndpointsChangeTracker: a slice that no longer names its Service of this family takes its endpoints away", () => {
  const { t, map } = tracker();
  for (const name of ["svc1", "svc2"]) {
    t.update(makeEndpointSlice("ns1", name, (s) => s.endpoints = [ep("10.180.0.1")]), false);
  }
  // The same slice names in another namespace are other slices.
  t.update(makeEndpointSlice("ns2", "svc1", (s) => s.endpoints = [ep("10.180.0.2")]), false);
  t.apply(map);
  // svc1's slice loses its label; svc2's turns IPv6 (a file source may say so; the API may not).
  t.update(
    makeEndpointSlice("ns1", "svc1", (s) => {
      delete s.metadata!.labels;
      s.endpoints = [ep("10.180.0.1")];
    }),
    false,
  );
  t.update(
    makeEndpointSlice("ns1", "svc2", (s) => {
      s.addressType = "IPv6";
      s.endpoints = [ep("fd00::1")];
    }),
    false,
  );
  assertEquals([...t.apply(map).changedSince.keys()].sort(), ["ns1/svc1", "ns1/svc2"]);
  assertEquals([...map.keys()], ["ns2/svc1:p80/TCP"]);
  // Gone from the tracker too: their deletes change nothing more.
  assertEquals(t.update(makeEndpointSlice("ns1", "svc1", (s) => delete s.metadata!.labels), true), false);
});

Deno.test("EndpointsChangeTracker: a slice relabelled for another Service moves its endpoints there, both Services changed", () => {
  const { t, map } = tracker();
  t.update(makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]), false);
  t.update(makeEndpointSlice("ns1", "svc2", (s) => s.endpoints = [ep("10.180.0.2")]), false);
  t.apply(map);
  const toSvc2 = (s: V1EndpointSlice) => {
    s.metadata!.labels = { "kubernetes.io/service-name": "svc2" };
    s.endpoints = [ep("10.180.0.1")];
  };
  assertEquals(t.update(makeEndpointSlice("ns1", "svc1", toSvc2), false), true);
  assertEquals([...t.apply(map).changedSince.keys()].sort(), ["ns1/svc1", "ns1/svc2"]);
  assertEquals(keys(map), []);
  assertEquals(keys(map, "ns1/svc2:p80/TCP"), ["10.180.0.1:80", "10.180.0.2:80"]);
  // Its delete takes it from the Service it names now; the one it named before has nothing left of it.
  assertEquals(t.update(makeEndpointSlice("ns1", "svc1", toSvc2), true), true);
  assertEquals([...t.apply(map).changedSince.keys()], ["ns1/svc2"]);
  assertEquals([...map.keys()], ["ns1/svc2:p80/TCP"]);
  assertEquals(keys(map, "ns1/svc2:p80/TCP"), ["10.180.0.2:80"]);
});

/** Runs `fn`; returns how many times it walked a map of `size` entries or more. */
function mapWalks(size: number, fn: () => void): number {
  const proto = Map.prototype as unknown as Record<string | symbol, (...a: unknown[]) => unknown>;
  const names = [Symbol.iterator, "entries", "keys", "values", "forEach"] as const;
  const saved = names.map((n) => proto[n]);
  let walks = 0;
  names.forEach((n, i) => {
    proto[n] = function (this: Map<unknown, unknown>, ...a: unknown[]) {
      if (this.size >= size) walks++;
      return saved[i].apply(this, a);
    };
  });
  try {
    fn();
  } finally {
    names.forEach((n, i) => proto[n] = saved[i]);
  }
  return walks;
}

Deno.test("EndpointsChangeTracker: a slice of the other family walks none of the slices held", () => {
  // In a dual-stack cluster every other slice is the other family's: a walk of every Service's
  // slices for each made a first list's handling quadratic (one tracker took 24 s over the other
  // family's 32,000 slices, in-process).
  const { t } = tracker();
  const held = 500;
  for (let i = 0; i < held; i++) {
    t.update(makeEndpointSlice("ns1", `svc${i}`, (s) => s.endpoints = [ep("10.180.0.1")]), false);
  }
  const walks = mapWalks(held, () => {
    for (let i = 0; i < held; i++) {
      const v6 = makeEndpointSlice("ns1", `svc${i}`, (s) => {
        s.metadata!.name = `svc${i}-v6`;
        s.addressType = "IPv6";
        s.endpoints = [ep("fd00::1")];
      });
      assertEquals(t.update(v6, false), false);
      assertEquals(t.update(v6, true), false);
    }
  });
  assertEquals(walks, 0);
});
