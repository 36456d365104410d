import { assert, assertEquals, assertNotEquals } from "../tests/support/assert.ts";
import { FakeClock } from "../proxier/runtime/clock.ts";
import { RoundRobinBalancer } from "./round_robin.ts";

const EPS = ["10.180.0.1:80", "10.180.0.2:80", "10.180.0.3:80"];

Deno.test("RoundRobinBalancer rotates over every endpoint", () => {
  const lb = new RoundRobinBalancer({ clock: new FakeClock() });
  lb.update("s", EPS, 0);
  const picks = Array.from({ length: 6 }, () => lb.next("s", "10.0.0.1"));
  assertEquals(new Set(picks.slice(0, 3)).size, 3);
  assertEquals(picks.slice(3), picks.slice(0, 3));
  assertEquals(lb.next("other", "10.0.0.1"), undefined);
});

Deno.test("RoundRobinBalancer shuffles a new endpoint set and keeps the same set's order", () => {
  const lb = new RoundRobinBalancer({ clock: new FakeClock(), random: () => 0 });
  lb.update("s", EPS, 0);
  assertEquals(lb.endpoints("s"), ["10.180.0.2:80", "10.180.0.3:80", "10.180.0.1:80"]);
  lb.next("s", "c");
  lb.update("s", [...EPS].reverse(), 0);
  assertEquals(lb.next("s", "c"), "10.180.0.3:80", "same set: rotation continues");
});

Deno.test("RoundRobinBalancer: ClientIP affinity pins a client until it idles past the timeout", async () => {
  const clock = new FakeClock();
  const lb = new RoundRobinBalancer({ clock });
  lb.update("s", EPS, 10);
  const first = lb.next("s", "10.0.0.1");
  for (let i = 0; i < 5; i++) {
    await clock.advance(9000);
    assertEquals(lb.next("s", "10.0.0.1"), first);
  }
  assert(EPS.includes(lb.next("s", "10.0.0.2")!), "another client gets an endpoint");
  await clock.advance(10_000);
  const after = lb.next("s", "10.0.0.1");
  assertNotEquals(after, first, "expired affinity takes the next endpoint");
});

Deno.test("RoundRobinBalancer: a failed dial resets affinity to another endpoint", () => {
  const lb = new RoundRobinBalancer({ clock: new FakeClock() });
  lb.update("s", EPS, 100);
  const first = lb.next("s", "10.0.0.1")!;
  const second = lb.next("s", "10.0.0.1", { resetAffinity: true })!;
  assertNotEquals(second, first);
  assertEquals(lb.next("s", "10.0.0.1"), second, "the new choice sticks");
});

Deno.test("RoundRobinBalancer drops affinity to removed endpoints", () => {
  const lb = new RoundRobinBalancer({ clock: new FakeClock() });
  lb.update("s", EPS, 100);
  const first = lb.next("s", "10.0.0.1")!;
  lb.update("s", EPS.filter((e) => e !== first), 100);
  assertNotEquals(lb.next("s", "10.0.0.1"), first);
});

Deno.test("RoundRobinBalancer: a connection's retries never repeat an endpoint; a marked-down one is passed over, then back", () => {
  const clock = {
    t: 0,
    now() {
      return this.t;
    },
  };
  const lb = new RoundRobinBalancer({ clock, random: () => 0 });
  lb.update("s", ["a:1", "b:1", "c:1"], 0);
  const tried = new Set<string>();
  for (let i = 0; i < 3; i++) tried.add(lb.next("s", "x", { exclude: tried })!);
  assertEquals(tried.size, 3);
  assertEquals(lb.next("s", "x", { exclude: tried }), undefined, "nothing left to try");
  lb.markDown("b:1", 5000);
  const picks = Array.from({ length: 6 }, () => lb.next("s", "y"));
  assertEquals(picks.includes("b:1"), false, picks.join(","));
  clock.t = 5000;
  assertEquals(Array.from({ length: 3 }, () => lb.next("s", "y")).includes("b:1"), true, "back by itself");
  // All down: still served (a guess is better than nothing).
  for (const ep of ["a:1", "b:1", "c:1"]) lb.markDown(ep, 5000);
  assertEquals(lb.next("s", "z") !== undefined, true);
});
