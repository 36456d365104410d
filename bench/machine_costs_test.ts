import { assert, assertEquals } from "../tests/support/assert.ts";
import { machineCosts, machineCostsLine } from "./machine_costs.ts";

Deno.test("machineCosts reads a process's start and a page's first touch off this machine", async () => {
  const c = await machineCosts(3);
  // A process start costs some CPU, and less than the wall time around it allows for.
  assert(c.spawnCpuMs > 0 && c.spawnCpuMs <= c.spawnWallMs + 1, JSON.stringify(c));
  // A page costs more than nothing and less than a millisecond on any machine this runs on.
  assert(c.faultUs > 0.01 && c.faultUs < 1000, JSON.stringify(c));
});

Deno.test("machineCostsLine prints each figure with its unit", () => {
  assertEquals(
    machineCostsLine({ spawnCpuMs: 2.345, spawnWallMs: 3.4, faultUs: 11.04 }),
    "This machine: a process spawned and waited for (`true`) 3.40 ms, 2.35 ms of CPU; a page of fresh memory first touched 11.0 µs.",
  );
});
