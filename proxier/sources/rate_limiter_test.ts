import { assertEquals } from "../../tests/support/assert.ts";
import { FakeClock } from "../runtime/clock.ts";
import { RateLimiter } from "./rate_limiter.ts";

Deno.test("rate limiter: burst at once, then qps a second, in order (client-go's token bucket)", async () => {
  const clock = new FakeClock();
  const l = new RateLimiter({ qps: 5, burst: 10, clock });
  const waits = Array.from({ length: 13 }, () => l.reserve());
  assertEquals(waits.slice(0, 10), Array(10).fill(0));
  assertEquals(waits.slice(10), [200, 400, 600]);
  await clock.advance(2000); // ten tokens come back over two seconds, less the three owed
  assertEquals(Array.from({ length: 8 }, () => l.reserve()).filter((w) => w === 0).length, 7);
});

Deno.test("rate limiter: a non-positive qps is no limit", () => {
  const l = new RateLimiter({ qps: -1, burst: 1, clock: new FakeClock() });
  assertEquals(Array.from({ length: 100 }, () => l.reserve()).every((w) => w === 0), true);
});
