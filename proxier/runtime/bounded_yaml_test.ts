import { assertEquals, assertThrows } from "../../tests/support/assert.ts";
import { documentLines, loadAllBounded, loadBounded, YAML_LIMITS, YamlInputError } from "./bounded_yaml.ts";

Deno.test("documentLines: where js-yaml's documents start", () => {
  assertEquals(documentLines("# c\n---\n\na: 1\n---\n---\n# b\nb: 2\n", 3), [4, 5, 8]);
  assertEquals(documentLines("a: 1\n...\n%YAML 1.2\n--- {b: 1}\n", 2), [1, 4]);
  assertEquals(documentLines("---\nb: |\n  ---\n  x\n", 1), [2]);
  assertEquals(documentLines("a: 1\n", 2), undefined);
});

const small = { ...YAML_LIMITS, maxAliases: 20, maxExpandedNodes: 500, maxDepth: 8, maxScalarChars: 10 };

Deno.test("loadAllBounded: each limit is refused by name, with the line of the document that breaks it", () => {
  const refused = (text: string, limit: string, line?: number) => {
    const e = assertThrows(() => loadAllBounded(text, small), YamlInputError);
    assertEquals([e.limit, e.line], [limit, line], e.message);
  };
  // Few aliases, but 8^4 nodes once expanded: refused in the second document, at its line.
  const fan =
    "a: &a [1, 2, 3, 4, 5, 6, 7, 8]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\n";
  refused(`x: 1\n---\n${fan}`, "maxExpandedNodes", 3);
  refused(`a: &a [1]\nb: [${Array(30).fill("*a").join(", ")}]\n`, "maxAliases", 2);
  refused(`a: ${"[".repeat(9)}${"]".repeat(9)}\n`, "maxDepth", 1);
  // Within the written depth, deeper once an alias is expanded.
  refused("a: &a [[[[1]]]]\nb: [[[[*a]]]]\n", "maxDepth", 1);
  refused('a: "01234567890"\n', "maxScalarChars", 1);
  assertEquals(
    assertThrows(() => loadAllBounded("---\n".repeat(3), { ...small, maxDocuments: 2 }), YamlInputError)
      .limit,
    "maxDocuments",
  );
  assertEquals(
    assertThrows(() => loadAllBounded("x".repeat(11), { ...small, maxBytes: 10 }), YamlInputError).limit,
    "maxBytes",
  );
});

Deno.test("loadAllBounded: what real manifests use passes: shared anchors, merge keys (as kubectl), Lists, JSON", () => {
  const docs = loadAllBounded(
    'base: &b {k: 1}\nx:\n  <<: *b\n  j: 2\n---\n{"kind": "List", "items": []}\n',
    small,
  );
  assertEquals(docs, [{ base: { k: 1 }, x: { k: 1, j: 2 } }, { kind: "List", items: [] }]);
  assertEquals(loadBounded(""), null);
  assertEquals(
    assertThrows(() => loadBounded("a: 1\n---\nb: 2\n"), YamlInputError).message,
    "2 documents where one is expected",
  );
});
