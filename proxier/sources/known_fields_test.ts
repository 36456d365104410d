import * as k8s from "@kubernetes/client-node";
import { assertEquals } from "../../tests/support/assert.ts";
import { KIND_SHAPES, type Shape, unknownFields } from "./known_fields.ts";

type Model = { getAttributeTypeMap(): Array<{ baseName: string; type: string }> };
const MODELS = k8s as unknown as Record<string, Model | undefined>;

/** The field names client-node's generated model `type` declares, as a Shape (maps and scalars: any). */
function generatedShape(type: string): Shape {
  const list = /^Array<(.+)>$/.exec(type);
  if (list) return [generatedShape(list[1])];
  const model = MODELS[type];
  if (model?.getAttributeTypeMap === undefined) return true;
  return Object.fromEntries(model.getAttributeTypeMap().map((a) => [a.baseName, generatedShape(a.type)]));
}

/** Paths where `a` knows a field name that `b` does not (where `b` allows anything, nothing is missing). */
function missingFrom(a: Shape, b: Shape, path = ""): string[] {
  if (a === true || b === true) return [];
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) ? missingFrom(a[0], b[0], `${path}[]`) : [path];
  }
  const bb = b as Record<string, Shape>;
  return Object.entries(a as Record<string, Shape>).flatMap(([k, v]) => {
    const at = path === "" ? k : `${path}.${k}`;
    return Object.hasOwn(bb, k) ? missingFrom(v, bb[k], at) : [at];
  });
}

Deno.test("known fields: every field of client-node's generated models, and no name they lack", () => {
  for (const kind of Object.keys(KIND_SHAPES)) {
    const generated = generatedShape(`V1${kind}`);
    assertEquals(typeof generated, "object", `client-node has a V1${kind} model`);
    assertEquals(missingFrom(generated, KIND_SHAPES[kind]), [], `${kind}: fields we would call unknown`);
    assertEquals(missingFrom(KIND_SHAPES[kind], generated), [], `${kind}: names the API does not have`);
  }
});

Deno.test("known fields: misspelt names are named by their path, in order; known ones and maps are not", () => {
  const service = {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", labels: { anything: "goes" }, annotations: { "a/b": "c" } },
    spec: {
      sessionAfinity: "ClientIP",
      selector: { app: "web" },
      ports: [{ port: 80, targetPort: 8080 }, { port: 81, targetport: 8081 }],
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 10, timeout: 5 } },
    },
  };
  assertEquals(unknownFields(service, KIND_SHAPES.Service), [
    "spec.sessionAfinity",
    "spec.ports[1].targetport",
    "spec.sessionAffinityConfig.clientIP.timeout",
  ]);
  const slice = {
    kind: "EndpointSlice",
    endpoints: [{ addresses: ["10.0.0.1"], conditions: { ready: true, healthy: true }, nodename: "a" }],
    ports: "not a list",
  };
  assertEquals(unknownFields(slice, KIND_SHAPES.EndpointSlice), [
    "endpoints[0].conditions.healthy",
    "endpoints[0].nodename",
  ]);
  assertEquals(unknownFields({ kind: "Node", spec: { anything: 1 }, extra: 2 }, KIND_SHAPES.Node), ["extra"]);
});
