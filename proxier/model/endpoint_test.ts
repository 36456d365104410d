import { assert, assertEquals, assertThrows } from "../../tests/support/assert.ts";
import type { V1EndpointSlice } from "@kubernetes/client-node";
import { ep, makeEndpointSlice, NODE } from "../../tests/support/fixtures.ts";
import { mergeSlices, sliceEndpoints } from "./endpoint.ts";
import { ValidationError } from "../runtime/errors.ts";

Deno.test("sliceEndpoints reads conditions with upstream defaults and marks local endpoints", () => {
  const slice = makeEndpointSlice("ns1", "svc1", (s) => {
    s.endpoints = [
      ep("10.180.0.1", { node: NODE }),
      { addresses: ["10.180.0.2"] },
      ep("10.180.0.3", { ready: false, serving: true, terminating: true }),
    ];
  });
  const r = sliceEndpoints(slice, "IPv4", NODE)!;
  assertEquals(r.service, "ns1/svc1");
  const eps = r.ports.find((p) => p.key === "ns1/svc1:p80/TCP")!.endpoints;
  assertEquals(eps.map((e) => [e.key, e.ready, e.serving, e.terminating, e.isLocal]), [
    ["10.180.0.1:80", true, true, false, true],
    ["10.180.0.2:80", true, true, false, false],
    ["10.180.0.3:80", false, true, true, false],
  ]);
});

Deno.test("sliceEndpoints ignores FQDN, other-family and unlabelled slices", () => {
  assertEquals(
    sliceEndpoints(makeEndpointSlice("a", "b", (s) => s.addressType = "FQDN"), "IPv4", NODE),
    undefined,
  );
  assertEquals(
    sliceEndpoints(makeEndpointSlice("a", "b", (s) => s.addressType = "IPv6"), "IPv4", NODE),
    undefined,
  );
  assertEquals(
    sliceEndpoints(makeEndpointSlice("a", "b", (s) => s.metadata!.labels = {}), "IPv4", NODE),
    undefined,
  );
});

Deno.test("sliceEndpoints leaves out each malformed endpoint, naming the field, and keeps the others", () => {
  const good = ep("10.180.0.7");
  const cases: Array<[string, unknown]> = [
    ["endpoints[0].addresses[0]", ep("10.180.0.300")],
    ["endpoints[0].addresses[0]", ep("fd00::1")],
    ["endpoints[0].addresses[0]", ep("10.180.0.1 -j ACCEPT")],
    ["endpoints[0].addresses", { addresses: [] }],
    ["endpoints[0].conditions.ready", { addresses: ["10.180.0.1"], conditions: { ready: "yes" } }],
  ];
  for (const [field, bad] of cases) {
    const r = sliceEndpoints(
      makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [bad as never, good]),
      "IPv4",
      NODE,
    )!;
    assertEquals(r.skipped.map((e) => e.field), [field]);
    assertEquals(r.ports.find((p) => p.key === "ns1/svc1:p80/TCP")!.endpoints.map((e) => e.key), [
      "10.180.0.7:80",
    ]);
  }
});

Deno.test("sliceEndpoints rejects a slice whose own fields are malformed", () => {
  const cases: Array<[string, (s: V1EndpointSlice) => void]> = [
    ["ports[0].port", (s) => s.ports = [{ name: "p80", port: 0, protocol: "TCP" }]],
    ["ports[0].protocol", (s) => s.ports = [{ name: "p80", port: 80, protocol: "tcp" }]],
    ["ports[0].name", (s) => s.ports = [{ name: "P 80", port: 80, protocol: "TCP" }]],
    ["addressType", (s) => s.addressType = "IPv5"],
    [
      "metadata.labels[kubernetes.io/service-name]",
      (s) => s.metadata!.labels!["kubernetes.io/service-name"] = "x\ny",
    ],
    ["metadata.name", (s) => s.metadata!.name = "a".repeat(254)],
  ];
  for (const [field, mutate] of cases) {
    const err = assertThrows(
      () => sliceEndpoints(makeEndpointSlice("ns1", "svc1", mutate), "IPv4", NODE),
      ValidationError,
    );
    assertEquals((err as ValidationError).field, field);
  }
});

Deno.test("mergeSlices drops duplicates across slices, preferring a ready copy, and sorts", () => {
  const a = sliceEndpoints(
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.metadata!.name = "svc1-a";
      s.endpoints = [ep("10.180.0.2", { ready: false }), ep("10.180.0.9")];
    }),
    "IPv4",
    NODE,
  )!;
  const b = sliceEndpoints(
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.metadata!.name = "svc1-b";
      s.endpoints = [ep("10.180.0.2"), ep("10.180.0.1")];
    }),
    "IPv4",
    NODE,
  )!;
  const eps = mergeSlices([a, b]).get("ns1/svc1:p80/TCP")!;
  assertEquals(eps.map((e) => [e.key, e.ready]), [
    ["10.180.0.1:80", true],
    ["10.180.0.2:80", true],
    ["10.180.0.9:80", true],
  ]);
});

Deno.test("mergeSlices: of copies of one endpoint the first stands unless a later one is ready and it is not; the slices themselves are left as they were", () => {
  const slice = (name: string, eps: ReturnType<typeof ep>[]) =>
    sliceEndpoints(
      makeEndpointSlice("ns1", "svc1", (s) => {
        s.metadata!.name = name;
        s.endpoints = eps;
      }),
      "IPv4",
      NODE,
    )!;
  // Within one slice and across two: .5 not ready (serving differs), then ready twice; .3 twice not ready.
  const a = slice("svc1-a", [
    ep("10.180.0.5", { ready: false, serving: true }),
    ep("10.180.0.3", { ready: false, serving: true }),
    ep("10.180.0.5", { ready: true, terminating: false }),
  ]);
  const b = slice("svc1-b", [
    ep("10.180.0.5", { ready: true, terminating: true }),
    ep("10.180.0.3", { ready: false, serving: false }),
  ]);
  const before = a.ports[0].endpoints.map((e) => e.key);
  const eps = mergeSlices([a, b]).get("ns1/svc1:p80/TCP")!;
  assertEquals(eps.map((e) => [e.key, e.ready, e.serving, e.terminating]), [
    ["10.180.0.3:80", false, true, false],
    ["10.180.0.5:80", true, true, false],
  ]);
  assertEquals(a.ports[0].endpoints.map((e) => e.key), before);
});

Deno.test("mergeSlices of one slice: a list sorted once is the slice's own; one out of order or with a copy is merged into a copy", () => {
  const one = (eps: ReturnType<typeof ep>[]) =>
    sliceEndpoints(makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = eps), "IPv4", NODE)!;
  const sorted = one([ep("10.180.0.1"), ep("10.180.0.2")]);
  assert(mergeSlices([sorted]).get("ns1/svc1:p80/TCP") === sorted.ports[0].endpoints);
  for (
    const eps of [[ep("10.180.0.2"), ep("10.180.0.1")], [
      ep("10.180.0.1", { ready: false }),
      ep("10.180.0.1"),
    ]]
  ) {
    const s = one(eps);
    const before = s.ports[0].endpoints.map((e) => [e.key, e.ready]);
    const merged = mergeSlices([s]).get("ns1/svc1:p80/TCP")!;
    assert(merged !== s.ports[0].endpoints);
    assertEquals(merged.map((e) => [e.key, e.ready]), [...new Map(before as [string, boolean][])].sort());
    assertEquals(s.ports[0].endpoints.map((e) => [e.key, e.ready]), before);
  }
});

Deno.test("IPv6 endpoint keys are bracketed", () => {
  const r = sliceEndpoints(
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.addressType = "IPv6";
      s.endpoints = [ep("fd00:180::1")];
    }),
    "IPv6",
    NODE,
  )!;
  assertEquals(r.ports.find((p) => p.key === "ns1/svc1:p80/TCP")!.endpoints[0].key, "[fd00:180::1]:80");
});

Deno.test("sliceEndpoints reads zone and node hints; an endpoint with malformed ones is left out, naming the field", () => {
  const slice = makeEndpointSlice("ns1", "svc1", (s) => {
    s.endpoints = [ep("10.180.0.1", { forZones: ["zone-a"], forNodes: [NODE] }), ep("10.180.0.2")];
  });
  const eps = sliceEndpoints(slice, "IPv4", NODE)!.ports.find((p) => p.key === "ns1/svc1:p80/TCP")!.endpoints;
  assertEquals(eps.map((e) => [e.key, e.zoneHints, e.nodeHints]), [
    ["10.180.0.1:80", ["zone-a"], [NODE]],
    ["10.180.0.2:80", [], []],
  ]);
  for (
    const [hints, field] of [
      [{ forZones: "zone-a" }, "endpoints[0].hints.forZones"],
      [{ forZones: [{ name: "bad zone" }] }, "endpoints[0].hints.forZones[0].name"],
      [{ forZones: [{}] }, "endpoints[0].hints.forZones[0].name"],
      [{ forNodes: [{ name: "Node_A" }] }, "endpoints[0].hints.forNodes[0].name"],
    ] as const
  ) {
    const bad = makeEndpointSlice("ns1", "svc1", (s) => {
      s.endpoints = [{ addresses: ["10.180.0.1"], hints: hints as never }];
    });
    assertEquals(sliceEndpoints(bad, "IPv4", NODE)!.skipped.map((e) => e.field), [field]);
  }
});
