import { assert, assertEquals, assertMatch } from "../tests/support/assert.ts";
import {
  DenoExecutor,
  type ExecOptions,
  type ExecResult,
  type Executor,
  inputText,
  TIMED_OUT_CODE,
} from "./executor.ts";
import { IptablesRunner, RestoreError } from "./iptables.ts";

Deno.test("DenoExecutor writes chunked stdin in order, multi-byte characters across buffer edges intact", async () => {
  const chunks = ["a", "é".repeat(40_000), "", "ü€".repeat(30_001), "\nend\n", "x".repeat(65_536)];
  const r = await new DenoExecutor().run("cat", { args: [], stdin: chunks });
  assertEquals(r.code, 0);
  assertEquals(r.stdout, chunks.join(""));
});

/** Fails every restore the way iptables-restore names a bad line. */
class FailingAt implements Executor {
  constructor(readonly line: number) {}
  run(_cmd: string, _opts: ExecOptions): Promise<ExecResult> {
    return Promise.resolve({ code: 2, stdout: "", stderr: `iptables-restore: line ${this.line} failed` });
  }
}

Deno.test("a failed chunked restore names the input line, found across chunk boundaries", async () => {
  const chunks = ["*nat\n:A - [0:0]\n-A A -j ", "DROP\n-A A -j RE", "TURN\nCOMMIT\n"];
  for (const [n, want] of [[3, "-A A -j DROP"], [4, "-A A -j RETURN"], [5, "COMMIT"]] as const) {
    const ipt = new IptablesRunner({ exec: new FailingAt(n), family: "IPv4" });
    const e = await ipt.restoreAll(chunks, { flush: false, counters: false }).catch((e) => e);
    assertEquals(e instanceof RestoreError && e.line, want, `line ${n}`);
    assertEquals(inputText(chunks).split("\n")[n - 1], want);
  }
});

Deno.test("DenoExecutor: a tool still running at its deadline is killed and reported as exit 124, saying why", async () => {
  const started = performance.now();
  const r = await new DenoExecutor({ timeoutMs: 200 }).run("sleep", { args: ["30"] });
  assertEquals(r.code, TIMED_OUT_CODE);
  assertMatch(r.stderr, /^sleep: no exit within 0\.2 s \(--kernel-tool-timeout\); killed$/m);
  assert(performance.now() - started < 5000, "killed, not waited for");
  // A quick tool is untouched by the deadline.
  assertEquals((await new DenoExecutor({ timeoutMs: 5000 }).run("true", { args: [] })).code, 0);
});

Deno.test("DenoExecutor: the deadline grows with the input (10 s per MiB), so a big restore is not killed", async () => {
  const input = "x".repeat(2 ** 20);
  const r = await new DenoExecutor({ timeoutMs: 300 }).run("sh", {
    args: ["-c", "cat >/dev/null; sleep 1"],
    stdin: input,
  });
  assertEquals([r.code, r.stderr], [0, ""]);
});
