import { assertEquals } from "../../tests/support/assert.ts";
import type { SliceEndpoints } from "./endpoint.ts";
import { holdsSlice, type ServiceSlices, slicesOf, withoutSlice, withSlice } from "./service_slices.ts";

const slice = (name: string, tag: string): SliceEndpoints => ({
  name,
  service: `ns/${tag}`,
  ports: [],
  skipped: [],
});
const held = (s: ServiceSlices | undefined) => [...slicesOf(s)].map((x) => x.service);

Deno.test("service slices: one slice, then several, then one again; each name held once, the latest kept", () => {
  let s: ServiceSlices | undefined = withSlice(undefined, slice("a", "a1"));
  assertEquals([held(s), s instanceof Map], [["ns/a1"], false]);
  s = withSlice(s, slice("a", "a2"));
  assertEquals([held(s), s instanceof Map], [["ns/a2"], false]);
  s = withSlice(s, slice("b", "b1"));
  s = withSlice(s, slice("c", "c1"));
  assertEquals([held(s), s instanceof Map], [["ns/a2", "ns/b1", "ns/c1"], true]);
  assertEquals([holdsSlice(s, "b"), holdsSlice(s, "d")], [true, false]);
  s = withoutSlice(s, "a");
  s = withoutSlice(s, "d");
  assertEquals(held(s), ["ns/b1", "ns/c1"]);
  s = withoutSlice(s, "b");
  assertEquals([held(s), s instanceof Map, holdsSlice(s, "c"), holdsSlice(s, "b")], [
    ["ns/c1"],
    false,
    true,
    false,
  ]);
  assertEquals(withoutSlice(s, "b"), s);
  assertEquals(withoutSlice(s, "c"), undefined);
  assertEquals([held(undefined), holdsSlice(undefined, "c"), withoutSlice(undefined, "c")], [
    [],
    false,
    undefined,
  ]);
});
