import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { FakeNft } from "../iptables/testing/fake_nft.ts";
import { ELEMENT_CONTAINERS, TABLE } from "../proxier/nftables/layout.ts";
import { assert, assertEquals } from "../tests/support/assert.ts";
import { ep, makeEndpointSlice, makeService } from "../tests/support/fixtures.ts";
import { directMaps, directProxier } from "./direct_start.ts";
import { generate } from "./objects.ts";

/** Every element container of the table `fake` holds, as nft lists it. */
function elementsOf(fake: FakeNft): Record<string, string[]> {
  return Object.fromEntries(
    ELEMENT_CONTAINERS.map((
      c,
    ) => [c, fake.listElements("IPv4", TABLE, c).map((e) => JSON.stringify(e)).sort()]),
  );
}

/** The generated objects, a Service whose endpoints span two slices, and another family's slice. */
function objects(): { services: V1Service[]; slices: V1EndpointSlice[] } {
  const { services, slices } = generate(40, 3);
  services.push(makeService("ns", "split"));
  slices.push(
    makeEndpointSlice(
      "ns",
      "split",
      (s) => s.endpoints = [ep("10.1.0.1"), ep("10.1.0.2", { node: "node-a" })],
    ),
    makeEndpointSlice("ns", "split", (s) => {
      s.metadata!.name = "split-fghij";
      s.endpoints = [ep("10.1.0.3")];
    }),
    makeEndpointSlice("ns", "split", (s) => {
      s.metadata!.name = "split-v6";
      s.addressType = "IPv6";
      s.endpoints = [ep("fd00::1")];
    }),
  );
  return { services, slices };
}

Deno.test("a direct start loads the table a start through the handlers and change trackers loads", async () => {
  const { services, slices } = objects();
  const direct = new FakeNft();
  const p = directProxier(direct.forFamily("IPv4"));
  await p.syncDirect(directMaps(services, slices, "IPv4", "node-a"));
  p.close();
  const handled = new FakeNft();
  const q = directProxier(handled.forFamily("IPv4"));
  await q.syncHandled(services, slices);
  q.close();
  const loaded = elementsOf(direct);
  assertEquals(loaded, elementsOf(handled));
  // Not two empty tables: the split Service's three IPv4 endpoints are in, its IPv6 one is not.
  const backends = JSON.stringify(loaded);
  for (const ip of ["10.1.0.1", "10.1.0.2", "10.1.0.3"]) assert(backends.includes(ip), ip);
  assert(!backends.includes("fd00::1"));
  assertEquals(direct.listChains("IPv4", TABLE), handled.listChains("IPv4", TABLE));
});
