import { assertEquals } from "../../tests/support/assert.ts";
import { FakeConntrack } from "../../iptables/testing/fake_conntrack.ts";
import { ep, makeEndpointSlice, makeService, NODE } from "../../tests/support/fixtures.ts";
import { sliceEndpoints } from "../model/endpoint.ts";
import { servicePorts } from "../model/service_port.ts";
import type { EndpointsMap, ServicePortMap } from "../model/types.ts";
import { servicePortKey } from "../model/types.ts";
import { reconcileConntrack } from "./reconciler.ts";

/** A UDP Service with a cluster IP, an external IP, a LB IP and a node port, and its endpoints. */
function model(eps: ReturnType<typeof ep>[]): { services: ServicePortMap; endpoints: EndpointsMap } {
  const svc = makeService("ns1", "dns", (s) => {
    s.spec!.type = "LoadBalancer";
    s.spec!.ports = [{ name: "dns", port: 53, protocol: "UDP", nodePort: 30053 }];
    s.spec!.externalIPs = ["192.168.99.53"];
    s.status = { loadBalancer: { ingress: [{ ip: "192.168.99.54" }] } };
  });
  const services: ServicePortMap = new Map(
    servicePorts(svc, "IPv4").ports.map((p) => [servicePortKey(p.name), p]),
  );
  const slice = sliceEndpoints(
    makeEndpointSlice("ns1", "dns", (s) => {
      s.ports = [{ name: "dns", port: 53, protocol: "UDP" }];
      s.endpoints = eps;
    }),
    "IPv4",
    NODE,
  )!;
  const endpoints: EndpointsMap = new Map(slice.ports.map((p) => [p.key, p.endpoints]));
  return { services, endpoints };
}

const flows = (ct: FakeConntrack) =>
  ct.flows.map((f) => `${f.origDst}:${f.origDport} <- ${f.replySrc}`).sort();

Deno.test("conntrack reconciler: flows DNATed to endpoints no longer serving go, on every service address", async () => {
  const ct = new FakeConntrack();
  for (const dst of ["172.30.0.41:53", "192.168.99.53:53", "192.168.99.54:53", "192.168.0.2:30053"]) {
    ct.add("udp", "10.180.5.5:4000", dst, "10.180.0.1:53");
    ct.add("udp", "10.180.5.5:4001", dst, "10.180.0.2:53");
    ct.add("udp", "10.180.5.5:4002", dst, "10.180.0.3:53");
  }
  ct.add("udp", "10.180.5.5:4003", "172.30.0.41:53", "10.180.0.1:53"); // a second flow to the same endpoint
  ct.add("udp", "10.180.5.5:5000", "8.8.8.8:53"); // not ours
  // .1 gone; .2 terminating but serving (kept); .3 listed but not serving (its flows go).
  const r = await reconcileConntrack(ct, {
    ...model([
      ep("10.180.0.2", { ready: false, serving: true, terminating: true }),
      ep("10.180.0.3", { ready: false, serving: false, terminating: true }),
    ]),
    removed: [],
  });
  assertEquals(flows(ct), [
    "172.30.0.41:53 <- 10.180.0.2",
    "192.168.0.2:30053 <- 10.180.0.2",
    "192.168.99.53:53 <- 10.180.0.2",
    "192.168.99.54:53 <- 10.180.0.2",
    "8.8.8.8:53 <- 8.8.8.8",
  ]);
  assertEquals(r, { deleted: 9, flows: 14 });
  // One batch; one deletion per endpoint no destination may reach any more, whatever the number of
  // its flows and destinations (.1 is gone, .3 does not serve).
  assertEquals(ct.batches, [["*:* <- 10.180.0.1:53", "*:* <- 10.180.0.3:53"]]);
});

Deno.test("conntrack reconciler: flows rejected before a service had endpoints go once it has one", async () => {
  const ct = new FakeConntrack();
  ct.add("udp", "10.180.5.5:4000", "172.30.0.41:53"); // not DNATed: the REJECT era
  await reconcileConntrack(ct, { ...model([]), removed: [] });
  assertEquals(flows(ct), ["172.30.0.41:53 <- 172.30.0.41"], "no serving endpoint yet: it stays");
  await reconcileConntrack(ct, { ...model([ep("10.180.0.2")]), removed: [] });
  assertEquals(flows(ct), []);
});

Deno.test("conntrack reconciler: a removed Service's flows go from every address it had, its node port too", async () => {
  const ct = new FakeConntrack();
  for (const dst of ["172.30.0.41:53", "192.168.99.53:53", "192.168.99.54:53", "192.168.0.2:30053"]) {
    ct.add("udp", "10.180.5.5:4000", dst, "10.180.0.1:53");
  }
  const before = model([ep("10.180.0.1")]);
  const r = await reconcileConntrack(ct, {
    services: new Map(),
    endpoints: new Map(),
    removed: [...before.services.values()],
  });
  assertEquals([flows(ct), r.deleted], [[], 4]);
  // Nothing to look at: nothing listed.
  assertEquals(await reconcileConntrack(ct, { services: new Map(), endpoints: new Map(), removed: [] }), {
    deleted: 0,
    flows: 0,
  });
});
