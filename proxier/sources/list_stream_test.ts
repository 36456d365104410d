import { assert, assertEquals, assertMatch, assertThrows } from "../../tests/support/assert.ts";
import { ListSplitter, MAX_ITEM_BYTES } from "./list_stream.ts";

const encoder = new TextEncoder();

/** Feeds `text` in chunks cut at `cuts`; returns the items handed on, the envelope, and the batches. */
function split(text: string, cuts: readonly number[], batchBytes?: number) {
  const bytes = encoder.encode(text);
  const items: unknown[] = [];
  let batches = 0;
  const s = new ListSplitter<unknown>((batch) => {
    batches++;
    items.push(...batch);
  }, batchBytes);
  let at = 0;
  for (const cut of [...cuts, bytes.length]) {
    s.push(bytes.slice(at, cut));
    at = cut;
  }
  return { items, envelope: s.finish(), batches };
}

/** What `res.json()` makes of `text`, its items taken out. */
function whole(text: string) {
  const list = JSON.parse(text);
  const items = list.items ?? [];
  if (Array.isArray(list.items)) list.items = [];
  return { items, envelope: list };
}

// Strings with every character the scanner must not take for structure, a multi-byte character, an
// "items" key inside an item and in the metadata, nested arrays, and whitespace between tokens.
const TRICKY = `{
  "kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1",
  "metadata": {"resourceVersion": "42", "annotations": {"items": "[{\\"x\\"}]", "b": "\\\\"}, "items": [1, 2]},
  "items" : [
    {"metadata": {"name": "a}]", "labels": {"q": "\\"{[", "é": "Grüße ✓"}}, "endpoints": [{"addresses": ["10.0.0.1"]}], "items": []},
    {"metadata": {"name": "b"}, "ports": [[[]]], "x": "\\\\\\""} ,{"metadata": {"name": "c\\\\"}}
  ] ,
  "trailer": {"items": [ {"not": "an item"} ]}
}`;

Deno.test("list stream: cut at every byte, the items and the envelope are what JSON.parse makes of the whole", () => {
  const want = whole(TRICKY);
  const length = encoder.encode(TRICKY).length;
  for (let cut = 0; cut <= length; cut++) {
    // Parsed at the end, as soon as an item completes, and held then scanned once over half.
    for (const batchBytes of [undefined, 1, Math.ceil(length / 2)]) {
      const got = split(TRICKY, [cut], batchBytes);
      assertEquals(got.items, want.items, `cut at ${cut}`);
      assertEquals(got.envelope, want.envelope, `cut at ${cut}`);
    }
  }
  // Every byte its own chunk: each item is carried across hundreds of chunks.
  const bytewise = split(TRICKY, Array.from({ length }, (_, i) => i), 1);
  assertEquals(bytewise.items, want.items);
  assertEquals(bytewise.envelope, want.envelope);
});

Deno.test("list stream: a large list in uneven chunks arrives in batches, in order, with nothing lost", () => {
  const items = Array.from({ length: 3000 }, (_, i) => ({
    metadata: { name: `svc-${i}`, annotations: { note: "}".repeat(i % 7) + '"]' } },
    endpoints: Array.from({ length: i % 8 }, (_, j) => ({ addresses: [`10.${i >> 8}.${i & 255}.${j}`] })),
  }));
  const text = JSON.stringify({ kind: "ServiceList", metadata: { resourceVersion: "7" }, items });
  const cuts: number[] = [];
  for (let at = 0, step = 1; at < text.length; step = (step * 7 + 3) % 9000 + 1) cuts.push(at += step);
  const got = split(text, cuts.filter((c) => c < text.length), 64 * 1024);
  assertEquals(got.items, items);
  assertEquals(got.envelope, { kind: "ServiceList", metadata: { resourceVersion: "7" }, items: [] });
  // Parsed in batches of 64 KiB and more, not one per chunk (there are hundreds).
  const batches = Math.ceil(text.length / (64 * 1024));
  assert(got.batches >= 2 && got.batches <= batches, `${got.batches} batches, not 2-${batches}`);
});

Deno.test("list stream: an item and an envelope spread over more chunks than a call takes arguments", () => {
  // 300,000 one-byte chunks: an item carried across them all, then an envelope after it as long.
  const pad = "x".repeat(300_000);
  const text =
    `{"kind": "ServiceList", "items": [{"metadata": {"name": "a"}, "pad": "${pad}"}], "pad": "${pad}"}`;
  const length = encoder.encode(text).length;
  const got = split(text, Array.from({ length: length - 1 }, (_, i) => i + 1));
  assertEquals(got.items, [{ metadata: { name: "a" }, pad }]);
  assertEquals(got.envelope, { kind: "ServiceList", items: [], pad });
});

Deno.test("list stream: no items, null items and an empty array keep the envelope as it was", () => {
  for (
    const text of [
      '{"kind":"List","metadata":{}}',
      '{"kind":"List","items":null}',
      '{"items":[],"kind":"List"}',
    ]
  ) {
    const got = split(text, [5]);
    assertEquals(got.items, []);
    assertEquals(got.envelope, JSON.parse(text));
  }
});

Deno.test("list stream: a body that is not a list of objects, or that ends early, is a SyntaxError", () => {
  const bad: [string, RegExp][] = [
    ['{"items":[{"a":1},', /ended inside its items/],
    ['{"items":[{"a":1}', /ended inside its items/],
    ['{"items":[{"a":"}', /ended inside its items/],
    ['{"items":[1,2]}', /items must be objects/],
    ['{"items":["a"]}', /items must be objects/],
    ['{"items":[{"a":1},,{"b":2}]}', /JSON/],
    ['{"items":[{"a":1 "b":2}]}', /JSON/],
    ['{"kind":"List",', /JSON/],
    ["[]", /must be a JSON object/],
    ["", /JSON/],
  ];
  for (const [text, message] of bad) {
    for (const cut of [0, 3, text.length]) {
      const e = assertThrows(() => split(text, cut < text.length ? [cut] : []), SyntaxError);
      assertMatch(e.message, message, `${text} cut at ${cut}`);
    }
  }
});

Deno.test("list stream: an item or an envelope over the limit is refused, before the rest is read", () => {
  const big = "x".repeat(MAX_ITEM_BYTES);
  const chunks = (text: string) => {
    const bytes = encoder.encode(text);
    return Array.from({ length: Math.ceil(bytes.length / 2 ** 20) }, (_, i) => (i + 1) * 2 ** 20)
      .filter((c) => c < bytes.length);
  };
  const item = `{"items":[{"a":1},{"note":"${big}"}]}`;
  for (const cuts of [chunks(item), []]) {
    assertMatch(assertThrows(() => split(item, cuts), SyntaxError).message, /an item of the list is over/);
  }
  const envelope = `{"metadata":{"note":"${big}"},"items":[]}`;
  assertMatch(
    assertThrows(() => split(envelope, chunks(envelope)), SyntaxError).message,
    /besides its items are over/,
  );
  // Just under the limit, spread over 16 chunks: one item.
  const under = `{"items":[{"note":"${big.slice(64)}"}]}`;
  assertEquals((split(under, chunks(under)).items[0] as { note: string }).note.length, MAX_ITEM_BYTES - 64);
});

Deno.test("list stream: a body that fits in a batch is parsed whole at its end; one over the limit is scanned from then on", () => {
  const items = Array.from({ length: 200 }, (_, i) => ({ metadata: { name: `svc-${i}` } }));
  const text = JSON.stringify({ kind: "ServiceList", metadata: { resourceVersion: "9" }, items });
  const bytes = encoder.encode(text);
  for (const batchBytes of [bytes.length, bytes.length - 1]) {
    const batches: unknown[][] = [];
    const s = new ListSplitter<unknown>((batch) => batches.push(batch), batchBytes);
    for (let at = 0; at < bytes.length; at += 1000) s.push(bytes.slice(at, at + 1000));
    const fits = batchBytes >= bytes.length;
    // Scanned, the items go on as the array closes; held whole, at the end.
    assertEquals(batches.length, fits ? 0 : 1, `batches before the end, at ${batchBytes} bytes a batch`);
    const envelope = s.finish();
    assertEquals(batches, [items]);
    assertEquals(envelope, { kind: "ServiceList", metadata: { resourceVersion: "9" }, items: [] });
  }
});
