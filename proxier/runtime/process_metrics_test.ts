import { Registry } from "./prometheus.ts";
import { assert, assertEquals } from "../../tests/support/assert.ts";
import { registerProcessMetrics } from "./process_metrics.ts";

const value = (page: string, series: string) =>
  Number(new RegExp(`^${series.replace(/[{}]/g, "\\$&")} (\\S+)$`, "m").exec(page)?.[1] ?? NaN);

Deno.test("process metrics: the V8 heap, and the timers held (a leak shows as a count that grows)", async () => {
  const registry = new Registry();
  registerProcessMetrics(registry);
  const timers = async () => value(await registry.metrics(), 'nodejs_active_resources{type="Timeout"}') || 0;
  const before = await timers();
  const held = [setTimeout(() => {}, 60_000), setInterval(() => {}, 60_000)];
  try {
    assertEquals(await timers(), before + 2);
  } finally {
    clearTimeout(held[0]);
    clearInterval(held[1]);
  }
  assertEquals(await timers(), before);
  const page = await registry.metrics();
  assert(value(page, "nodejs_heap_size_used_bytes") > 0, page);
  assert(value(page, "nodejs_heap_size_total_bytes") >= value(page, "nodejs_heap_size_used_bytes"), page);
  assertEquals(value(page, "nodejs_active_resources_total") >= 0, true);
});

Deno.test("process metrics: memory outside the V8 heap (buffers) is its own series", async () => {
  const registry = new Registry();
  registerProcessMetrics(registry);
  const external = async () => value(await registry.metrics(), "nodejs_external_memory_bytes");
  const before = await external();
  const held = new Uint8Array(64 * 2 ** 20).fill(1);
  const during = await external();
  assert(during - before >= 60 * 2 ** 20, `external ${before} -> ${during} holding 64 MiB`);
  assertEquals(held.length, 64 * 2 ** 20);
});

Deno.test("process metrics: CPU time advances with work, user and system adding up to the total", async () => {
  const registry = new Registry();
  registerProcessMetrics(registry);
  const read = async () => {
    const page = await registry.metrics();
    return ["", "_user", "_system"].map((k) => value(page, `process_cpu${k}_seconds_total`));
  };
  // The kernel's own count of this process's user time, in clock ticks (100 a second): the work is
  // 150 ms of CPU by that count, however long a busy machine takes to give it.
  const ticks = () => Number(Deno.readTextFileSync("/proc/self/stat").split(") ")[1].split(" ")[11]);
  const [total0, user0] = await read();
  const start = ticks(), gaveUp = performance.now() + 60_000;
  let spin = 0;
  while (ticks() - start < 15 && performance.now() < gaveUp) spin++;
  const [total1, user1, system1] = await read();
  assert(spin > 0 && user1 - user0 >= 0.1, `user CPU ${user0} -> ${user1} after 150 ms of work`);
  assert(Math.abs(total1 - (user1 + system1)) < 1e-6, `total ${total1}, user ${user1}, system ${system1}`);
  assert(total1 > total0);
});
