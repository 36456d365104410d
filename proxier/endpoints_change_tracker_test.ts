import { assertEquals } from "../tests/assert.ts";
import { ep, makeEndpointSlice, MemoryLogger, NODE } from "../tests/fixtures.ts";
import { EndpointsChangeTracker } from "./endpoints_change_tracker.ts";
import type { EndpointsMap } from "./types.ts";

function tracker() {
  const log = new MemoryLogger();
  return {
    t: new EndpointsChangeTracker({ family: "IPv4", nodeName: NODE, log }),
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
  assertEquals([...t.apply(map).updatedServices], ["ns1/svc1"]);
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
      s.endpoints = [ep("10.180.0.2;rm")];
    }),
    false,
  );
  t.apply(map);
  assertEquals(keys(map), ["10.180.0.1:80"]);
  assertEquals(log.messages("warn").length, 1);
  assertEquals(log.messages("warn")[0].includes('EndpointSlice "ns1"/"svc1-b"'), true);
});

Deno.test("EndpointsChangeTracker reports lost UDP endpoints and trigger times", () => {
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
  assertEquals([...first.newlyActiveUDPServices], ["ns1/dns:dns/UDP"]);
  assertEquals(first.lastChangeTriggerTimes, [Date.parse("2026-01-01T00:00:00Z")]);
  t.update(mk(["10.180.0.2"]), false);
  const r = t.apply(map);
  assertEquals([...r.deletedUDPEndpoints].map(([k, v]) => [k, v.map((e) => e.key)]), [["ns1/dns:dns/UDP", [
    "10.180.0.1:53",
  ]]]);
});
