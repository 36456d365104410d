import type { V1EndpointSlice } from "@kubernetes/client-node";
import { assert, assertEquals, assertThrows } from "../../tests/support/assert.ts";
import { ep, makeEndpointSlice, NODE } from "../../tests/support/fixtures.ts";
import { sliceEndpoints } from "../model/endpoint.ts";
import type { IPFamily } from "../model/types.ts";
import { endpointSliceStub, objectKey } from "./handlers.ts";
import { sliceFromRow, sliceRow } from "./slice_rows.ts";

/** Slices of every shape the trackers tell apart, well-formed and not. */
function shapes(): Array<[string, V1EndpointSlice]> {
  const s = (name: string, mutate: (s: V1EndpointSlice) => void = () => {}) =>
    [name, makeEndpointSlice("ns1", name, mutate)] as [string, V1EndpointSlice];
  return [
    s("plain", (x) => x.endpoints = [ep("10.0.0.1", { node: NODE }), ep("10.0.0.2")]),
    s("conditions", (x) => {
      x.endpoints = [ep("10.0.0.3", { ready: false, serving: true, terminating: true }), {
        addresses: ["10.0.0.4"],
      }];
    }),
    s("hints", (x) => x.endpoints = [ep("10.0.0.5", { forZones: ["zone-a"], forNodes: [NODE] })]),
    s("two-ports", (x) => {
      x.ports = [{ name: "a", port: 80, protocol: "TCP" }, { name: "b", port: 53, protocol: "UDP" }];
      x.endpoints = [ep("10.0.0.6")];
    }),
    s("all-ports", (x) => {
      x.ports = [{ name: "a", protocol: "TCP" }];
      x.endpoints = [ep("10.0.0.7")];
    }),
    s("no-endpoints"),
    s("trigger", (x) => {
      x.metadata!.annotations = {
        "endpoints.kubernetes.io/last-change-trigger-time": "2026-01-02T03:04:05Z",
      };
      x.endpoints = [ep("10.0.0.8")];
    }),
    s("ipv6", (x) => {
      x.addressType = "IPv6";
      x.endpoints = [ep("fd00::1", { node: NODE })];
    }),
    s("bad-endpoint", (x) => x.endpoints = [ep("10.0.0.9"), { addresses: ["not-an-ip"] }, ep("fd00::2")]),
    s("bad-port", (x) => x.ports = [{ name: "a", port: 70000, protocol: "TCP" }]),
    s("bad-name", (x) => x.metadata!.name = "Not_A_Name"),
    s("unlabelled", (x) => delete x.metadata!.labels),
    s("fqdn", (x) => x.addressType = "FQDN"),
    s("bad-type", (x) => x.addressType = "IPv5"),
  ];
}

/** What `sliceEndpoints` says of `s`: its reading, or its error's name and message. */
function reading(s: V1EndpointSlice, family: IPFamily, node = NODE): unknown {
  try {
    return sliceEndpoints(s, family, node);
  } catch (e) {
    return { thrown: (e as Error).name, message: (e as Error).message };
  }
}

Deno.test("slice rows: a slice rebuilt from its row reads as the slice itself in both families, malformed ones with the same error", () => {
  for (const [name, slice] of shapes()) {
    // Through a structured clone, as a worker posts it.
    const rebuilt = sliceFromRow(structuredClone(sliceRow(structuredClone(slice), NODE)), NODE);
    for (const family of ["IPv4", "IPv6"] as const) {
      assertEquals(reading(rebuilt, family), reading(slice, family), `${name}, ${family}`);
    }
    assertEquals(rebuilt.endpoints, [], `${name}: the rebuilt slice keeps no endpoints of its own`);
    assertEquals(objectKey(rebuilt), objectKey(slice), name);
    assertEquals(endpointSliceStub(rebuilt), endpointSliceStub(slice), `${name}: what the store keeps of it`);
  }
});

Deno.test("slice rows: the rebuilt readings share their empty lists, as the slices' own do", () => {
  const [, slice] = shapes()[0];
  const a = sliceEndpoints(sliceFromRow(sliceRow(slice, NODE), NODE), "IPv4", NODE)!;
  const b = sliceEndpoints(sliceFromRow(sliceRow(slice, NODE), NODE), "IPv4", NODE)!;
  const [x, y] = [a.ports[0].endpoints[0], b.ports[0].endpoints[1]];
  assert(
    x.zoneHints === y.nodeHints && a.skipped === b.skipped,
    "one shared empty list, not one per endpoint",
  );
});

Deno.test("slice rows: a reading made for one node is never read again for another (it would have no endpoints)", () => {
  const [, slice] = shapes()[0];
  const rebuilt = sliceFromRow(sliceRow(slice, NODE), NODE);
  const e = assertThrows(() => sliceEndpoints(rebuilt, "IPv4", "node-z"), Error);
  assert(e.message.includes("read again for node node-z"), e.message);
  assertEquals(
    sliceEndpoints(rebuilt, "IPv6", "node-z"),
    undefined,
    "the other family's tracker skips it as before",
  );
});
