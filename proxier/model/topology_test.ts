import { assertEquals } from "../../tests/support/assert.ts";
import { ep, makeEndpointSlice, makeService, NODE } from "../../tests/support/fixtures.ts";
import { sliceEndpoints } from "./endpoint.ts";
import { servicePorts } from "./service_port.ts";
import { categorizeEndpoints, internalEndpoints, type NodeTopology } from "./topology.ts";
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { MemoryLogger } from "../../tests/support/fixtures.ts";

const ZONE_A: NodeTopology = { nodeName: NODE, zone: "zone-a" };

/** Categorizes the one port of `svc` over `eps`, returning endpoint IPs per set. */
function categorize(
  svc: V1Service,
  eps: V1EndpointSlice["endpoints"],
  topo: NodeTopology = ZONE_A,
  log?: MemoryLogger,
) {
  const port = servicePorts(svc, "IPv4").ports[0];
  const slice = makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = eps);
  const all = sliceEndpoints(slice, "IPv4", NODE)!.ports.find((p) => p.key === "ns1/svc1:p80/TCP")!.endpoints;
  const c = categorizeEndpoints(port, all, topo, log);
  const ips = (l: { ip: string }[]) => l.map((e) => e.ip);
  return {
    cluster: ips(c.cluster),
    local: ips(c.local),
    all: ips(c.all),
    internal: ips(internalEndpoints(port, c)),
    hasAny: c.hasAny,
  };
}

Deno.test("topology: zone hints narrow cluster endpoints only when every ready endpoint has one", () => {
  const hinted = [
    ep("10.180.0.1", { forZones: ["zone-a"] }),
    ep("10.180.0.2", { forZones: ["zone-b"] }),
    // Not ready: its missing hint does not matter.
    ep("10.180.0.3", { ready: false }),
  ];
  assertEquals(categorize(makeService("ns1", "svc1"), hinted).cluster, ["10.180.0.1"]);
  const log = new MemoryLogger();
  assertEquals(categorize(makeService("ns1", "svc1"), hinted, { nodeName: NODE, zone: "" }, log).cluster, [
    "10.180.0.1",
    "10.180.0.2",
  ]);
  assertEquals(log.records.map((r) => [r.level, r.msg]), [
    ["debug", "Ignoring same-zone topology hints for service since node is missing label"],
  ]);
});

Deno.test("topology: internalTrafficPolicy Local ignores hints; hasAny still sees remote endpoints", () => {
  const svc = makeService("ns1", "svc1", (s) => s.spec!.internalTrafficPolicy = "Local");
  const eps = [
    ep("10.180.0.1", { node: NODE, forZones: ["zone-b"] }),
    ep("10.180.0.2", { forZones: ["zone-a"] }),
  ];
  assertEquals(categorize(svc, eps), {
    cluster: [],
    local: ["10.180.0.1"],
    all: ["10.180.0.1"],
    internal: ["10.180.0.1"],
    hasAny: true,
  });
  assertEquals(categorize(svc, [ep("10.180.0.2")]).hasAny, true, "remote endpoints exist: DROP, not REJECT");
  assertEquals(categorize(svc, []).hasAny, false);
});

Deno.test("topology: ETP Local keeps local endpoints outside the hinted cluster set reachable", () => {
  const svc = makeService("ns1", "svc1", (s) => {
    s.spec!.type = "NodePort";
    s.spec!.ports![0].nodePort = 30001;
    s.spec!.externalTrafficPolicy = "Local";
  });
  const r = categorize(svc, [
    ep("10.180.0.1", { node: NODE, forZones: ["zone-b"] }),
    ep("10.180.0.2", { forZones: ["zone-a"] }),
  ]);
  assertEquals([r.cluster, r.local, r.all], [["10.180.0.2"], ["10.180.0.1"], ["10.180.0.2", "10.180.0.1"]]);
});

Deno.test("topology: node hints without one for this node fall back to zone hints", () => {
  const r = categorize(makeService("ns1", "svc1"), [
    ep("10.180.0.1", { forNodes: ["node-b"], forZones: ["zone-a"] }),
    ep("10.180.0.2", { forNodes: ["node-c"], forZones: ["zone-b"] }),
  ]);
  assertEquals(r.cluster, ["10.180.0.1"]);
});
