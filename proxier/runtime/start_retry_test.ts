import { ExecError } from "../../iptables/executor.ts";
import { assertEquals } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { ModeUnavailableError } from "./errors.ts";
import { realClock } from "./clock.ts";
import { retryStart, START_ATTEMPTS } from "./start_retry.ts";

const failing = (cause: Error) =>
  new ModeUnavailableError(`nftables mode needs the nft tool: ${cause.message}`, { cause });

Deno.test("retryStart: a tool that ran and failed once is tried again, and the start goes on", async () => {
  const log = new MemoryLogger();
  let calls = 0;
  const r = await retryStart("nftables", () => {
    calls++;
    if (calls === 1) return Promise.reject(failing(new ExecError("nft --version exited 1: busy", 1)));
    return Promise.resolve("started");
  }, { log, clock: realClock });
  assertEquals([r, calls], ["started", 2]);
  assertEquals(log.records.map((x) => [x.msg, x.fields?.attempt]), [[
    "A start step failed; trying again",
    1,
  ]]);
});

Deno.test("retryStart: a missing tool or a refused platform ends the start at once; a failing tool after the last try", async () => {
  const log = new MemoryLogger();
  let calls = 0;
  const missing = failing(new ExecError("nft: cannot start: No such file or directory", -1));
  const e1 = await retryStart("nftables", () => (calls++, Promise.reject(missing)), { log, clock: realClock })
    .catch((e) => e);
  assertEquals([e1, calls], [missing, 1]);
  calls = 0;
  const root = new ModeUnavailableError("nftables mode needs root");
  const e2 = await retryStart("nftables", () => (calls++, Promise.reject(root)), { log, clock: realClock })
    .catch((e) => e);
  assertEquals([e2, calls], [root, 1]);
  calls = 0;
  const broken = failing(new ExecError("nft --version exited 1", 1));
  const e3 = await retryStart("nftables", () => (calls++, Promise.reject(broken)), { log, clock: realClock })
    .catch((e) => e);
  assertEquals([e3, calls], [broken, START_ATTEMPTS]);
});
