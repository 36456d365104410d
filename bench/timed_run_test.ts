import { assert, assertEquals, assertRejects } from "../tests/support/assert.ts";
import { timedRun } from "./timed_run.ts";

Deno.test("timedRun times the tool alone: a sleep takes its time and no CPU", async () => {
  const r = await timedRun(undefined, "sleep", ["0.3"]);
  assertEquals([r.code, r.err], [0, ""]);
  assert(r.wallMs >= 300 && r.wallMs < 10_000, `wall ${r.wallMs}`);
  assert(r.cpuMs < 100, `cpu ${r.cpuMs}`);
});

Deno.test("timedRun counts the CPU a tool spends, given its stdin, and keeps its exit code and stderr", async () => {
  // The tool spends a fixed amount of CPU by its own count, however long the machine takes to give it.
  const burn = "let u; while ((u = Deno.cpuUsage()).user + u.system < 300000); " +
    "console.error(await new Response(Deno.stdin.readable).text()); Deno.exit(3);";
  const r = await timedRun(undefined, Deno.execPath(), ["eval", burn], "fed on stdin");
  assertEquals([r.code, r.err], [3, "fed on stdin\n"]);
  assert(r.cpuMs >= 290, `cpu ${r.cpuMs}`);
  assert(r.wallMs >= r.cpuMs / 2, `wall ${r.wallMs} against cpu ${r.cpuMs}`);
});

Deno.test("timedRun names the command when there are no times to read", async () => {
  const e = await assertRejects(() => timedRun("kpd-no-such-namespace", "nft", ["-f", "-"]), Error);
  assert(e.message.startsWith("no times for nft -f -"), e.message);
});
