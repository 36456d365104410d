import { assertEquals } from "../../tests/support/assert.ts";
import { onAbort } from "./abort.ts";

Deno.test("onAbort: calls back once on abort, at once for a signal aborted before, never after removal", () => {
  const calls: string[] = [];
  const ac = new AbortController();
  onAbort(ac.signal, () => calls.push("later"));
  const undo = onAbort(ac.signal, () => calls.push("removed"));
  undo();
  ac.abort();
  ac.abort();
  onAbort(ac.signal, () => calls.push("already"));
  assertEquals(calls, ["later", "already"]);
});
