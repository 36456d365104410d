import { assertEquals, assertNotEquals, assertThrows } from "../tests/support/assert.ts";
import { FakeClock } from "../proxier/runtime/clock.ts";
import { type Rotation, RoundRobinBalancer } from "./round_robin.ts";
import { RotationSlots, sharedRotation } from "./shared_rotation.ts";

const EPS = ["10.180.0.1:80", "10.180.0.2:80", "10.180.0.3:80"];

Deno.test("sharedRotation: balancers sharing a slot rotate as one, in the order given", () => {
  const slots = new RotationSlots();
  const slot = slots.slot("s");
  const lbs = [0, 1].map(() => {
    const lb = new RoundRobinBalancer({ clock: new FakeClock() });
    lb.update("s", EPS, 0, { rotation: sharedRotation(slots.buffer, slot), ordered: true });
    return lb;
  });
  const picks = [0, 0, 1, 0, 1, 1, 1].map((k) => lbs[k].next("s", "c"));
  assertEquals(picks, [...EPS, ...EPS, EPS[0]]);
});

Deno.test("RoundRobinBalancer: a position moved by another thread mid-pick is read again", () => {
  let at = 0;
  let raced = false;
  const rotation: Rotation = {
    get: () => at,
    move(from, to) {
      // Another thread takes endpoint 0 between our read and our move, once.
      if (!raced) {
        raced = true;
        at = 1;
      }
      if (at !== from) return false;
      at = to;
      return true;
    },
  };
  const lb = new RoundRobinBalancer({ clock: new FakeClock() });
  lb.update("s", EPS, 0, { rotation, ordered: true });
  assertEquals(lb.next("s", "c"), EPS[1]);
  assertEquals(at, 2);
});

Deno.test("RotationSlots: one slot per key while retained; freed slots are reused", () => {
  const slots = new RotationSlots();
  const a = slots.slot("a");
  const b = slots.slot("b");
  assertEquals(slots.slot("a"), a);
  assertNotEquals(a, b);
  slots.retain(new Set(["b"]));
  assertEquals(slots.slot("c"), a);
  assertEquals(slots.slot("b"), b);
  assertThrows(() => {
    for (let i = 0; i < 70_000; i++) slots.slot(`k${i}`);
  }, RangeError);
});
