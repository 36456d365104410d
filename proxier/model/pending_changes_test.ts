import { assert, assertEquals } from "../../tests/support/assert.ts";
import { ep, makeEndpointSlice, makeService, MemoryLogger, NODE } from "../../tests/support/fixtures.ts";
import { ObjectWarnings } from "./object_warnings.ts";
import { type ChangeCounters, PendingChanges } from "./pending_changes.ts";
import type { EndpointsMap, ServicePortMap } from "./types.ts";

/** A family's changes with a task queue standing for the syncs in flight, and its gauges' last values. */
function changes() {
  const log = new MemoryLogger();
  const gauges = { services: -1, slices: -1 };
  const metrics: ChangeCounters = {
    serviceChangesTotal: { inc: () => {} },
    endpointChangesTotal: { inc: () => {} },
    serviceChangesPending: { set: (v) => gauges.services = v },
    endpointChangesPending: { set: (v) => gauges.slices = v },
  };
  const tasks: Array<() => void> = [];
  let ms = 1_700_000_000_000;
  const c = new PendingChanges({
    family: "IPv4",
    nodeName: NODE,
    warnings: new ObjectWarnings(log),
    metrics,
    clock: { now: () => ms },
    afterSyncs: (task) => tasks.push(task),
  });
  const services: ServicePortMap = new Map();
  const endpoints: EndpointsMap = new Map();
  return {
    c,
    log,
    gauges,
    services,
    endpoints,
    tick: () => ms++,
    /** Ends the syncs in flight: their tasks run. */
    syncsEnd: () => tasks.splice(0).forEach((t) => t()),
    apply: () => c.apply(services, endpoints),
    addresses: (port = "ns1/svc1:p80/TCP") => endpoints.get(port)?.map((e) => e.key) ?? [],
  };
}

/** Service `svc<i>` in ns1 at its own cluster IP, with a slice of one endpoint. */
function addService(c: PendingChanges, i: number, host = 1): void {
  c.service(
    undefined,
    makeService("ns1", `svc${i}`, (s) => s.spec!.clusterIPs = [s.spec!.clusterIP = `172.30.0.${i}`]),
  );
  c.slice(makeEndpointSlice("ns1", `svc${i}`, (s) => s.endpoints = [ep(`10.180.${i}.${host}`)]), false);
}

Deno.test("pending changes: after the first sync, one Service's change recomputes that Service's ports only, and the maps are the trackers' own", () => {
  const t = changes();
  for (let i = 1; i <= 50; i++) addService(t.c, i);
  const first = t.apply();
  assertEquals(first.changedPorts.size, 50);
  assertEquals(t.services.size, 50);
  assert(t.c.hasService("ns1/svc7"), "a Service the first sync read has ports before the trackers take it");
  t.syncsEnd();
  assert(t.c.hasService("ns1/svc7"));
  assertEquals(t.gauges, { services: 0, slices: 0 });

  t.c.slice(
    makeEndpointSlice("ns1", "svc7", (s) => s.endpoints = [ep("10.180.7.1"), ep("10.180.7.2")]),
    false,
    true,
  );
  const next = t.apply();
  assertEquals([...next.changedPorts], ["ns1/svc7:p80/TCP"]);
  assertEquals([...next.changedServices], ["ns1/svc7"]);
  assertEquals(t.addresses("ns1/svc7:p80/TCP"), ["10.180.7.1:80", "10.180.7.2:80"]);
  // A Service's deletion takes its port and endpoints, as the trackers hold them.
  t.c.service(makeService("ns1", "svc9"), undefined);
  t.c.slice(makeEndpointSlice("ns1", "svc9"), true);
  const gone = t.apply();
  assertEquals([...gone.changedPorts], ["ns1/svc9:p80/TCP"]);
  assertEquals(gone.serviceChanges.removedPorts.map((p) => p.clusterIP), ["172.30.0.9"]);
  assertEquals([t.services.has("ns1/svc9:p80/TCP"), t.endpoints.has("ns1/svc9:p80/TCP")], [false, false]);
  assertEquals(t.services.size, 49);
});

Deno.test("pending changes: what arrives between the first sync and the trackers taking its events waits for the next sync", () => {
  const t = changes();
  addService(t.c, 1);
  t.apply();
  t.tick();
  // The slice changes while the first sync still runs.
  t.c.slice(makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.1.5")]), false, true);
  assertEquals(t.gauges.slices, 1, "the change is counted as pending");
  assertEquals(t.addresses(), ["10.180.1.1:80"], "the first sync's maps hold what it read");
  t.syncsEnd();
  assertEquals(t.addresses(), ["10.180.1.1:80"], "taken by the trackers, the change is still pending");
  assertEquals(t.gauges.slices, 1);
  const next = t.apply();
  assertEquals([...next.changedPorts], ["ns1/svc1:p80/TCP"]);
  assertEquals([...next.endpointChanges.changedSince.values()], [1_700_000_000_001]);
  assertEquals(t.addresses(), ["10.180.1.5:80"]);
});

Deno.test("pending changes: a next sync before the syncs in flight end has the trackers take the events first", () => {
  const t = changes();
  addService(t.c, 1);
  t.apply();
  t.c.slice(makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.1.5")]), false, true);
  const next = t.apply();
  assertEquals([...next.changedPorts], ["ns1/svc1:p80/TCP"]);
  assertEquals(t.addresses(), ["10.180.1.5:80"]);
  t.syncsEnd();
  assertEquals(t.addresses(), ["10.180.1.5:80"], "the task that was left does nothing twice");
  assertEquals(t.apply().changedPorts.size, 0);
});

Deno.test("pending changes: a malformed object of the first list is left out of the first sync and named once the trackers take it", () => {
  const t = changes();
  addService(t.c, 1);
  t.c.service(undefined, makeService("ns1", "bad", (s) => s.spec!.ports![0].port = 70_000));
  t.apply();
  assertEquals([...t.services.keys()], ["ns1/svc1:p80/TCP"]);
  t.syncsEnd();
  const warned = t.log.records.filter((r) => r.level === "warn");
  assertEquals(warned.length, 1);
  assert(warned[0].msg.includes("Skipping malformed"), warned[0].msg);
  assertEquals(warned[0].fields?.field, "spec.ports[0].port");
  t.syncsEnd();
  t.apply();
  assertEquals(t.log.records.filter((r) => r.level === "warn").length, 1, "said once");
});

Deno.test("pending changes: a first list that is not first sights only (a deletion before the first sync) is applied by the trackers", () => {
  const t = changes();
  addService(t.c, 1);
  addService(t.c, 2);
  t.c.service(makeService("ns1", "svc2"), undefined);
  const first = t.apply();
  assertEquals([...t.services.keys()], ["ns1/svc1:p80/TCP"]);
  assertEquals([...first.changedServices].sort(), ["ns1/svc1", "ns1/svc2"]);
  assertEquals(t.addresses(), ["10.180.1.1:80"]);
  t.syncsEnd();
  assertEquals(t.apply().changedPorts.size, 0);
});
