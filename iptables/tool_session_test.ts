import { assert, assertEquals, assertRejects, assertThrows } from "../tests/support/assert.ts";
import { DenoExecutor, ExecError, TIMED_OUT_CODE } from "./executor.ts";
import { DenoSessionExecutor, ProcessSession, sessionsOf } from "./tool_session.ts";

/** A tool that echoes each line it reads to stderr, and `stdout:` lines to stdout. */
const ECHO = [
  "-c",
  'while IFS= read -r l; do case "$l" in stdout:*) printf "%s\\n" "$l";; *) printf "%s\\n" "$l" >&2;; esac; done',
];
const upTo = (marker: string) => (stderr: string) => {
  const i = stderr.indexOf(`${marker}\n`);
  return i < 0 ? -1 : i + marker.length + 1;
};

Deno.test("ProcessSession answers request after request from one process, each up to where its end says", async () => {
  const s = new ProcessSession("sh", { args: ECHO });
  try {
    assertEquals(await s.request("a\nstdout:b\nEND1\n", upTo("END1")), {
      stdout: "stdout:b\n",
      stderr: "a\nEND1\n",
    });
    // What followed an answer's end is the next one's.
    assertEquals(await s.request("c\nEND2\nd\n", upTo("END2")), { stdout: "", stderr: "c\nEND2\n" });
    assertEquals(await s.request("END3\n", upTo("END3")), { stdout: "", stderr: "d\nEND3\n" });
    assert(!s.closed);
  } finally {
    await s.close();
  }
  assert(s.closed);
});

Deno.test("ProcessSession passes its environment on: HOME as the session asks", async () => {
  const s = new ProcessSession("sh", {
    args: ["-c", 'read -r l; echo "$HOME" >&2'],
    env: { HOME: "/dev/null" },
  });
  try {
    assertEquals((await s.request("go\n", upTo("/dev/null"))).stderr, "/dev/null\n");
  } finally {
    await s.close();
  }
});

Deno.test("ProcessSession rejects a request its tool exits before answering, and is closed", async () => {
  const s = new ProcessSession("sh", { args: ["-c", "read -r l; echo dying >&2; exit 3"] });
  const e = await assertRejects(() => s.request("x\n", upTo("END")), ExecError);
  assertEquals(e.message, "sh: exited before it answered: dying");
  assert(s.closed);
  await assertRejects(() => s.request("x\n", upTo("END")), ExecError);
  await s.close();
});

Deno.test("ProcessSession kills a tool that does not answer within its deadline, or when stopped", async () => {
  const late = new ProcessSession("sleep", { args: ["30"], timeoutMs: 200 });
  const e = await assertRejects(() => late.request("x\n", upTo("END")), ExecError);
  assertEquals(e.code, TIMED_OUT_CODE);
  assertEquals(e.message, "sleep: no answer within 0.2 s (--kernel-tool-timeout); killed");
  assert(late.closed);
  const stopped = new ProcessSession("sleep", { args: ["30"] });
  const ac = new AbortController();
  const pending = stopped.request("x\n", upTo("END"), ac.signal);
  ac.abort();
  assertEquals((await assertRejects(() => pending, ExecError)).message, "sleep: stopped; killed");
  assert(stopped.closed);
});

Deno.test("ProcessSession takes one request at a time", async () => {
  const s = new ProcessSession("sh", { args: ECHO });
  try {
    const first = s.request("a\n", upTo("END"));
    assert(s.busy);
    const second = await assertRejects(() => s.request("b\n", upTo("END")), ExecError);
    assertEquals(second.message, "sh: a request is in flight");
    await s.close();
    await assertRejects(() => first, ExecError);
  } finally {
    await s.close();
  }
});

Deno.test("sessionsOf: the real executor with sessions has them; the plain one does not", () => {
  assert(sessionsOf(new DenoSessionExecutor()) !== undefined);
  assertEquals(sessionsOf(new DenoExecutor()), undefined);
});

Deno.test("ProcessSession of a tool that cannot start throws, naming it", () => {
  const e = assertThrows(() => new ProcessSession("/nonexistent/tool", { args: [] }), ExecError);
  assert(e.message.startsWith("/nonexistent/tool: cannot start"), e.message);
});
