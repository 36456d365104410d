import { assertEquals } from "../../tests/support/assert.ts";
import { documentLines } from "./bounded_yaml.ts";

Deno.test("documentLines: where js-yaml's documents start", () => {
  assertEquals(documentLines("# c\n---\n\na: 1\n---\n---\n# b\nb: 2\n", 3), [4, 5, 8]);
  assertEquals(documentLines("a: 1\n...\n%YAML 1.2\n--- {b: 1}\n", 2), [1, 4]);
  assertEquals(documentLines("---\nb: |\n  ---\n  x\n", 1), [2]);
  assertEquals(documentLines("a: 1\n", 2), undefined);
});
