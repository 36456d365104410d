import { ObjectWarnings } from "./object_warnings.ts";
import { MODES } from "../modes.ts";
import { parseCommandLine } from "../cli/command_line.ts";
import type { ProxyMode } from "../options/config.ts";
import type { EventSpec } from "../runtime/events.ts";
import { assertEquals } from "../../tests/support/assert.ts";
import { makeService, MemoryLogger } from "../../tests/support/fixtures.ts";
import { ServiceChangeTracker } from "./service_change_tracker.ts";
import { serviceStub } from "../sources/handlers.ts";
import type { ServicePortMap } from "./types.ts";

function tracker() {
  const log = new MemoryLogger();
  return {
    t: new ServiceChangeTracker({ family: "IPv4", warnings: new ObjectWarnings(log) }),
    log,
    map: new Map() as ServicePortMap,
  };
}

Deno.test("ServiceChangeTracker: add, update and delete reach the map at apply", () => {
  const { t, map } = tracker();
  const s1 = makeService("ns1", "svc1");
  assertEquals(t.update(undefined, s1), true);
  assertEquals(map.size, 0, "nothing applied before apply()");
  assertEquals([...t.apply(map).changed.keys()], ["ns1/svc1"]);
  assertEquals([...map.keys()], ["ns1/svc1:p80/TCP"]);
  const s2 = makeService("ns1", "svc1", (s) => s.spec!.ports![0].port = 8080);
  t.update(s1, s2);
  t.apply(map);
  assertEquals(map.get("ns1/svc1:p80/TCP")!.port, 8080);
  t.update(s2, undefined);
  assertEquals([...t.apply(map).changed.keys()], ["ns1/svc1"]);
  assertEquals(map.size, 0);
});

Deno.test("ServiceChangeTracker: the old object may be a stub (what the API source keeps): the ports before come from the last apply", () => {
  const { t, map } = tracker();
  const s1 = makeService(
    "ns1",
    "svc1",
    (s) => s.spec!.ports!.push({ name: "dns", port: 53, protocol: "UDP" }),
  );
  t.update(undefined, s1);
  t.apply(map);
  const s2 = makeService("ns1", "svc1");
  assertEquals(t.update(serviceStub(s1), s2), true);
  const r = t.apply(map);
  // The UDP port went away and the Service changed: its ports as they were, for the conntrack reconciler.
  assertEquals(r.removedPorts.map((p) => `${p.port}/${p.protocol}`), ["80/TCP", "53/UDP"]);
  assertEquals([...map.keys()], ["ns1/svc1:p80/TCP"]);
  // An update to the same ports is no change, whatever the stub lacks.
  assertEquals(t.update(serviceStub(s2), makeService("ns1", "svc1")), false);
  // A delete known only from a stub (a relist no longer holding it) removes every port.
  t.update(serviceStub(s2), undefined);
  assertEquals(t.apply(map).removedPorts.map((p) => p.port), [80]);
  assertEquals(map.size, 0);
});

Deno.test("ServiceChangeTracker: changes that cancel out leave nothing pending", () => {
  const { t, map } = tracker();
  const s1 = makeService("ns1", "svc1");
  t.update(undefined, s1);
  t.update(s1, undefined);
  assertEquals(t.pending, 0);
  assertEquals(t.apply(map).changed.size, 0);
  // An update that changes only metadata is no change.
  t.update(undefined, s1);
  t.apply(map);
  assertEquals(t.update(s1, makeService("ns1", "svc1", (s) => s.metadata!.resourceVersion = "2")), false);
});

Deno.test("ServiceChangeTracker: the other family's Services leave nothing pending; a change waits from its first event", () => {
  let now = 1_000;
  const v6 = new ServiceChangeTracker({
    family: "IPv6",
    warnings: new ObjectWarnings(new MemoryLogger()),
    now: () => now,
  });
  const s1 = makeService("ns1", "svc1");
  assertEquals(v6.update(undefined, s1), false);
  assertEquals(v6.pending, 0);
  const map = new Map() as ServicePortMap;
  assertEquals(v6.apply(map).changed.size, 0);
  const dual = (port: number) =>
    makeService("ns1", "svc1", (s) => {
      s.spec!.clusterIPs = ["10.0.0.1", "fd00::1"];
      s.spec!.ports![0].port = port;
    });
  assertEquals(v6.update(s1, dual(80)), true);
  now = 2_000;
  assertEquals(v6.update(dual(80), dual(81)), true);
  assertEquals(v6.pending, 1);
  const { changed } = v6.apply(map);
  assertEquals(changed.get("ns1/svc1")?.since, 1_000);
  assertEquals([...map.values()].map((p) => [p.clusterIP, p.port]), [["fd00::1", 81]]);
});

Deno.test("ServiceChangeTracker: a malformed service is skipped with a warning, others keep working", () => {
  const { t, map, log } = tracker();
  t.update(undefined, makeService("ns1", "good"));
  const good = makeService("ns1", "bad");
  t.update(undefined, good);
  t.apply(map);
  const bad = makeService("ns1", "bad", (s) => s.spec!.ports![0].port = 99999);
  t.update(good, bad);
  t.apply(map);
  assertEquals([...map.keys()], ["ns1/good:p80/TCP"]);
  assertEquals(log.messages("warn"), [
    'Skipping malformed Service "ns1/bad": invalid spec.ports[0].port: 99999',
  ]);
});

Deno.test("ServiceChangeTracker: one warning per Service version, whichever family's tracker sees it", () => {
  const log = new MemoryLogger();
  const warnings = new ObjectWarnings(log);
  const v4 = new ServiceChangeTracker({ family: "IPv4", warnings });
  const v6 = new ServiceChangeTracker({ family: "IPv6", warnings });
  const bad = (rv: string) =>
    makeService("evil", "badip", (s) => {
      s.metadata!.resourceVersion = rv;
      s.spec!.clusterIP = "10.0.0.1 -j ACCEPT";
      s.spec!.clusterIPs = ["10.0.0.1 -j ACCEPT"];
    });
  v4.update(undefined, bad("1"));
  v6.update(undefined, bad("1"));
  v4.update(bad("1"), bad("1")); // a resync re-delivers it unchanged
  const want =
    'Skipping malformed Service "evil/badip": invalid spec.clusterIPs[0]: "10.0.0.1 -j ACCEPT" is not an IP address';
  assertEquals(log.messages("warn"), [want]);
  v4.update(bad("1"), bad("2"));
  assertEquals(log.messages("warn"), [want, want]);
  // Deleted and created again broken: said again.
  v4.update(bad("2"), undefined);
  v4.update(undefined, bad("2"));
  assertEquals(log.messages("warn").length, 3);
});

Deno.test("ServiceChangeTracker: with AllowServiceExternalIPs=false externalIPs are left out, said once per Service", () => {
  const log = new MemoryLogger();
  const warnings = new ObjectWarnings(log);
  const v4 = new ServiceChangeTracker({ family: "IPv4", warnings, allowExternalIPs: false });
  const v6 = new ServiceChangeTracker({ family: "IPv6", warnings, allowExternalIPs: false });
  const svc = makeService("ns1", "web", (s) => {
    s.metadata!.resourceVersion = "7";
    s.spec!.externalIPs = ["192.168.99.2"];
    s.spec!.externalTrafficPolicy = "Local";
  });
  const plain = makeService("ns1", "plain");
  for (const t of [v4, v6]) {
    t.update(undefined, svc);
    t.update(undefined, plain);
  }
  const map = new Map();
  v4.apply(map);
  assertEquals([...map.values()].map((p) => [p.name.name, p.externalIPs, p.externalPolicyLocal]), [
    ["web", [], false],
    ["plain", [], false],
  ]);
  assertEquals(log.messages("warn"), [
    'Service "ns1/web": spec.externalIPs are not served: feature gate AllowServiceExternalIPs is false ' +
    "(externalIPs are deprecated, KEP-5707)",
  ]);
});

Deno.test("ServiceChangeTracker: removed ports are reported as they were (the conntrack reconciler's input)", () => {
  const { t, map } = tracker();
  const s = makeService("ns1", "dns", (s) => {
    s.spec!.ports = [{ name: "dns", port: 53, protocol: "UDP" }];
    s.spec!.externalIPs = ["192.168.99.53"];
  });
  t.update(undefined, s);
  assertEquals(t.apply(map).removedPorts, []);
  t.update(s, undefined);
  assertEquals(
    t.apply(map).removedPorts.map((p) => [p.clusterIP, p.externalIPs, p.port, p.protocol]),
    [["172.30.0.41", ["192.168.99.53"], 53, "UDP"]],
  );
});

Deno.test("ServiceChangeTracker: a scheduler annotation the mode does not honour is one warning and one Event per Service", () => {
  const withScheduler = (name: string, scheduler: string) =>
    makeService("ns1", name, (s) => {
      s.metadata!.resourceVersion = "3";
      s.metadata!.annotations = { "kube-router.io/service.scheduler": scheduler };
    });
  const config = parseCommandLine([], () => "").config;
  const said = (mode: string, scheduler: string) => {
    const policy = MODES.get(mode as ProxyMode)!.schedulers(config);
    const log = new MemoryLogger();
    const events: EventSpec[] = [];
    const warnings = new ObjectWarnings(log, { record: (e) => events.push(e) });
    const svc = withScheduler("web", scheduler);
    for (const family of ["IPv4", "IPv6"] as const) {
      const t = new ServiceChangeTracker({
        family,
        warnings,
        schedulerNotice: (s) => policy.notice(s),
      });
      t.update(undefined, svc);
      t.update(svc, svc);
    }
    return { warnings: log.messages("warn"), events };
  };
  const iptables = said("iptables", "sh");
  assertEquals(iptables.warnings, [
    'Service "ns1/web": kube-router.io/service.scheduler "sh" is not honoured in iptables mode, which balances ' +
    "at random; nftables mode honours rr, sh, dh and mh",
  ]);
  assertEquals(iptables.events.map((e) => [e.regarding, e.type, e.reason, e.note]), [[
    { kind: "Service", namespace: "ns1", name: "web" },
    "Warning",
    "UnsupportedScheduler",
    iptables.warnings[0],
  ]]);
  const lc = said("nftables", "lc");
  assertEquals(lc.warnings, [
    'Service "ns1/web": kube-router.io/service.scheduler "lc" needs the connection counts only IPVS keeps; ' +
    "nftables mode balances this Service at random (the default)",
  ]);
  assertEquals(lc.events.length, 1);
  assertEquals(said("userspace", "mh").events.length, 1);
  // Honoured: nothing said.
  for (
    const [mode, scheduler] of [["nftables", "mh"], ["nftables", "sh"], ["nftables", "wrr"], ["ipvs", "lc"], [
      "userspace",
      "rr",
    ]]
  ) {
    assertEquals(said(mode, scheduler), { warnings: [], events: [] }, `${mode} ${scheduler}`);
  }
});
