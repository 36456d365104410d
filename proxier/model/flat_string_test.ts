import { Session } from "node:inspector";
import { assertEquals } from "../../tests/support/assert.ts";
import { flat } from "./flat_string.ts";

/** Counts the heap's flat strings starting "10." that hold `marker`, by a heap snapshot. */
async function flatHolding(marker: string): Promise<number> {
  const s = new Session();
  s.connect();
  const chunks: string[] = [];
  s.on("HeapProfiler.addHeapSnapshotChunk", (m) => chunks.push(m.params.chunk));
  await new Promise<void>((resolve) => s.post("HeapProfiler.takeHeapSnapshot", {}, () => resolve()));
  s.disconnect();
  const snap = JSON.parse(chunks.join(""));
  const fields = snap.snapshot.meta.node_fields.length;
  const types: string[] = snap.snapshot.meta.node_types[0];
  let n = 0;
  for (let i = 0; i < snap.nodes.length; i += fields) {
    const name = String(snap.strings[snap.nodes[i + 1]]);
    if (types[snap.nodes[i]] === "string" && name.startsWith("10.") && name.includes(marker)) n++;
  }
  return n;
}

Deno.test("flat: same characters, and kept strings built by concatenation stop being trees", async () => {
  const marker = `m${Math.random().toString(36).slice(2, 10)}`;
  const build = (i: number) => `10.${i >> 8}.${i & 255}.7 . tcp . 80 : goto ${marker}-${i}`;
  const kept = Array.from({ length: 500 }, (_, i) => build(i));
  const flattened = Array.from({ length: 500 }, (_, i) => flat(build(i + 500)));
  assertEquals(flattened[3], build(503));
  assertEquals(flat("a"), "a");
  // The flattened half are flat strings; the other half are still trees of their parts.
  const flatOnes = await flatHolding(marker);
  assertEquals(flatOnes >= 500 && flatOnes < 510, true, `flat strings holding the marker: ${flatOnes}`);
  assertEquals(kept.length + flattened.length, 1000);
});
