import { assertEquals } from "../support/assert.ts";
import { answers } from "./answers.ts";

const BOTH = new Set(["pod-a", "pod-b"]);

/** An asker that answers from `script`, in order, and counts what it was asked. */
function scripted(script: (i: number) => string) {
  let asked = 0;
  return { ask: () => Promise.resolve(script(asked++)), asked: () => asked };
}

Deno.test("answers: a random pick that showed one endpoint for the first n tries goes on until the other answers", async () => {
  const s = scripted((i) => i < 12 ? "pod-a" : "pod-b");
  assertEquals(await answers(12, s.ask, BOTH), BOTH);
  assertEquals(s.asked(), 13);
});

Deno.test("answers: an endpoint that never answers is missing after four times n tries", async () => {
  const s = scripted(() => "pod-a");
  assertEquals(await answers(12, s.ask, BOTH), new Set(["pod-a"]));
  assertEquals(s.asked(), 48);
});

Deno.test("answers: n tries when every wanted answer came early, or nothing is wanted", async () => {
  const both = scripted((i) => i % 2 ? "pod-b" : "pod-a");
  assertEquals(await answers(12, both.ask, BOTH), BOTH);
  assertEquals(both.asked(), 12);
  // An answer outside what is wanted still shows: the comparison after it fails.
  const stray = scripted((i) => ["pod-a", "pod-b", "ERR timeout"][i % 3]);
  assertEquals(await answers(6, stray.ask, BOTH), new Set([...BOTH, "ERR timeout"]));
  const pinned = scripted(() => "pod-a");
  assertEquals(await answers(8, pinned.ask), new Set(["pod-a"]));
  assertEquals(pinned.asked(), 8);
});
