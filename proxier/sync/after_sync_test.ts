import { assertEquals } from "../../tests/support/assert.ts";
import { FakeConntrack } from "../../iptables/testing/fake_conntrack.ts";
import { AfterSync } from "./after_sync.ts";
import type { ServiceHealth, ServiceHealthServer } from "../healthcheck/service_health.ts";
import type { FamilyMetrics } from "../metrics.ts";
import type { EndpointInfo, EndpointsMap, ServicePortInfo, ServicePortMap } from "../model/types.ts";
import { nullLogger } from "../runtime/logger.ts";
import { Registry } from "../runtime/prometheus.ts";

const port = (name: string, over: Partial<ServicePortInfo> = {}): ServicePortInfo =>
  ({
    name: { namespace: "ns", name, port: "http" },
    service: `ns/${name}`,
    clusterIP: "172.30.0.1",
    port: 80,
    protocol: "TCP",
    nodePort: 0,
    externalIPs: [],
    loadBalancerIPs: [],
    healthCheckNodePort: 0,
    internalPolicyLocal: false,
    externalPolicyLocal: false,
    ...over,
  }) as unknown as ServicePortInfo;

/** A service map whose every walk throws: only `get` of named keys is allowed. */
function unwalkable(m: ServicePortMap): ServicePortMap {
  return new Proxy(m, {
    get(target, key) {
      if (key === "get") return (k: string) => target.get(k);
      if (key === "has") return (k: string) => target.has(k);
      if (key === "size") return target.size;
      throw new Error(`the whole map was read (${String(key)})`);
    },
  });
}

Deno.test("after a sync: the reconciler, the health check ports and the no-local metric read their few ports, never the whole map", async () => {
  const services: ServicePortMap = new Map();
  const endpoints: EndpointsMap = new Map();
  for (let i = 0; i < 1000; i++) services.set(`ns/tcp${i}:http`, port(`tcp${i}`));
  services.set("ns/dns:dns", port("dns", { protocol: "UDP", clusterIP: "172.30.0.53", port: 53 }));
  services.set(
    "ns/lb:http",
    port("lb", {
      nodePort: 30080,
      healthCheckNodePort: 32000,
      externalPolicyLocal: true,
      loadBalancerIPs: ["1.2.3.4"],
    }),
  );
  const local = { ip: "10.0.0.9", port: 8080, ready: true, serving: true, terminating: false, isLocal: true };
  endpoints.set("ns/lb:http", [local as unknown as EndpointInfo]);
  const synced: ServiceHealth[][] = [];
  const noLocal: number[][] = [];
  const ct = new FakeConntrack();
  ct.flows = [{
    protocol: "udp",
    origSrc: "10.0.0.1",
    origDst: "172.30.0.53",
    origSport: 40000,
    origDport: 53,
    replySrc: "10.0.0.77",
    replySport: 53,
  } as never];
  const after = new AfterSync({
    family: "IPv4",
    log: nullLogger,
    registry: new Registry(),
    metrics: { noLocalEndpoints: (i: number, e: number) => noLocal.push([i, e]) } as unknown as FamilyMetrics,
    conntrack: ct.forFamily("IPv4"),
    healthServer: {
      sync: (s: readonly ServiceHealth[]) => synced.push([...s]),
    } as unknown as ServiceHealthServer,
  });
  // The first sync names every port; later ones only what changed.
  after.changed(services, services.keys());
  const guarded = unwalkable(services);
  await after.run(endpoints, [], () => "all");
  assertEquals(synced.at(-1), [{ namespace: "ns", name: "lb", port: 32000, localEndpoints: 1 }]);
  assertEquals(noLocal.at(-1), [0, 0]);
  assertEquals(ct.batches.length, 1, "the UDP flow to an endpoint the service lacks is deleted");
  // The LB's local endpoint goes: the health port says 0, the metric counts it; nothing else is read.
  endpoints.set("ns/lb:http", []);
  after.changed(guarded, ["ns/lb:http"]);
  await after.run(endpoints, [], () => "all");
  assertEquals(synced.at(-1), [{ namespace: "ns", name: "lb", port: 32000, localEndpoints: 0 }]);
  assertEquals(noLocal.at(-1), [0, 1]);
  // The LB Service goes: its health port and its count go with it.
  services.delete("ns/lb:http");
  after.changed(guarded, ["ns/lb:http"]);
  await after.run(endpoints, [], () => "all");
  assertEquals([synced.at(-1), noLocal.at(-1)], [[], [0, 0]]);
});
