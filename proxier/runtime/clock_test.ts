import { assertEquals } from "../../tests/support/assert.ts";
import { longTimer, MAX_TIMER_MS } from "./clock.ts";

/** Platform timers as a list the test fires by hand; a delay over the platform's limit is refused. */
function fakeTimers() {
  const armed = new Map<number, { fn: () => void; ms: number }>();
  let next = 1;
  return {
    armed,
    set(fn: () => void, ms: number): number {
      if (ms > MAX_TIMER_MS) throw new Error(`timer of ${ms} ms overflows`);
      armed.set(next, { fn, ms });
      return next++;
    },
    clear(id: unknown) {
      if (typeof id !== "number") throw new Error("not a timer id");
      armed.delete(id);
    },
    fire(): number {
      const [[id, t]] = armed;
      armed.delete(id);
      t.fn();
      return t.ms;
    },
  };
}

Deno.test("longTimer splits a 1000h delay into platform-sized timers and fires once, at the end", () => {
  const t = fakeTimers();
  let fired = 0;
  const total = 1000 * 3_600_000;
  longTimer(() => fired++, total, t.set, t.clear);
  let waited = 0;
  while (t.armed.size > 0) {
    assertEquals(fired, 0);
    waited += t.fire();
  }
  assertEquals([fired, waited], [1, total]);
});

Deno.test("longTimer: cancelling between steps stops the chain", () => {
  const t = fakeTimers();
  let fired = 0;
  const cancel = longTimer(() => fired++, 3 * MAX_TIMER_MS, t.set, t.clear);
  t.fire();
  cancel();
  assertEquals([t.armed.size, fired], [0, 0]);
});
