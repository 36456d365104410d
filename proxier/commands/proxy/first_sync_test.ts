import { assert, assertEquals } from "../../../tests/support/assert.ts";
import { MemoryLogger } from "../../../tests/support/fixtures.ts";
import type { FamilyView } from "../../family_view.ts";
import { sayFirstSync } from "./first_sync.ts";

/** A view of `services` Services whose walk takes `walkMs` (as a walk over tens of thousands does). */
function slowView(services: number, walkMs: number): FamilyView {
  const names = Array.from({ length: services }, (_, i) => ({ service: `ns/svc-${i}` }));
  const values = function* () {
    const until = performance.now() + walkMs;
    while (performance.now() < until) { /* the walk's cost */ }
    yield* names;
  };
  return {
    services: { values },
    endpoints: new Map([["k", [{ key: "10.0.0.1:80" }]]]),
  } as unknown as FamilyView;
}

Deno.test("first sync line: says when the sync was in, not when the Services were counted after it", () => {
  const log = new MemoryLogger();
  const before = performance.now();
  sayFirstSync(log, [slowView(3, 150)], 0);
  const line = log.records.find((r) => r.msg === "First sync in the kernel");
  assert(line !== undefined);
  assertEquals([line.fields?.services, line.fields?.endpoints], [3, 1]);
  const said = line.fields?.sinceStartMs as number;
  assert(said <= Math.round(before) + 50, `said ${said} ms, the call began at ${Math.round(before)} ms`);
});

Deno.test("first sync line: the sync that ended agoMs before the call is dated then", () => {
  const log = new MemoryLogger();
  const before = performance.now();
  sayFirstSync(log, [slowView(1, 0)], 250);
  const said = log.records[0].fields?.sinceStartMs as number;
  assert(said <= Math.round(before - 250) + 50 && said >= Math.round(before - 250) - 1, `said ${said}`);
});
