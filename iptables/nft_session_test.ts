import { assert, assertEquals, assertRejects } from "../tests/support/assert.ts";
import { ExecError, type ExecOptions, type ExecResult } from "./executor.ts";
import { NftError, NftRunner } from "./nft.ts";
import {
  markerEnd,
  readRefusal,
  SESSION_INPUT_BYTES,
  SESSION_LINE_BYTES,
  sessionLine,
} from "./nft_session.ts";
import type {
  AnswerEnd,
  SessionAnswer,
  SessionExecutor,
  SessionOptions,
  ToolSession,
} from "./tool_session.ts";

Deno.test("sessionLine joins a transaction's statements with semicolons, noting where each begins", () => {
  const line = sessionLine("add element ip t s { 1 }\n\ndelete element ip t s { 2 }\n")!;
  assertEquals(line.text, "add element ip t s { 1 }; delete element ip t s { 2 }");
  assertEquals(line.starts, [0, 26]);
  assertEquals(line.text.slice(line.starts[1]), line.statements[1]);
  assertEquals(
    sessionLine(["flush chain ip t c", "add rule ip t c accept"])!.text,
    "flush chain ip t c; add rule ip t c accept",
  );
});

Deno.test("sessionLine leaves to nft -f what one line cannot carry: comments, long or empty transactions", () => {
  assertEquals(sessionLine("add rule ip t c accept # why\nadd rule ip t c drop"), undefined);
  assertEquals(sessionLine("\n\n"), undefined);
  const long = Array.from({ length: 400 }, (_, i) => `add element ip t s { ${i} }`);
  assert(long.join("; ").length > SESSION_LINE_BYTES);
  assertEquals(sessionLine(long), undefined);
  assertEquals(sessionLine(long.join("\n")), undefined);
  // Bytes count, not characters: a comment's text may be UTF-8 of several bytes a character.
  const wide = `add element ip t s { 1 comment "${"é".repeat(SESSION_LINE_BYTES / 2)}" }`;
  assert(wide.length <= SESSION_LINE_BYTES);
  assertEquals(sessionLine(wide), undefined);
});

Deno.test("markerEnd finds the end of nft's error about the marker line, past its caret line", () => {
  const block = "Error: syntax error, unexpected junk\n%kpd-1\n^\n";
  assertEquals(markerEnd("", "%kpd-1"), -1);
  assertEquals(markerEnd("Error: syntax error, unexpected junk\n%kpd-1\n", "%kpd-1"), -1);
  assertEquals(markerEnd(block, "%kpd-1"), block.length);
  assertEquals(markerEnd(block + "Error: x\n", "%kpd-1"), block.length);
  // Another marker's error (an earlier one, or a prefix of this one's number) is not this one's end.
  assertEquals(markerEnd(block, "%kpd-11"), -1);
  assertEquals(markerEnd(block.replace("%kpd-1", "%kpd-12"), "%kpd-1"), -1);
});

Deno.test("readRefusal names the statement nft's caret points into", () => {
  const line = sessionLine("add element ip t g { 7 }\ndelete element ip t g { 99 }")!;
  assertEquals(readRefusal(line, ""), undefined);
  const answer = `Error: Could not process rule: No such file or directory\n${line.text}\n${
    " ".repeat(line.text.indexOf("99"))
  }^^\n`;
  assertEquals(readRefusal(line, answer), {
    message: "Error: Could not process rule: No such file or directory",
    statement: "delete element ip t g { 99 }",
    statementNumber: 2,
  });
  // An error without the line echoed still fails the transaction, naming no statement.
  assertEquals(readRefusal(line, "netlink: Error: Could not process rule\n"), {
    message: "netlink: Error: Could not process rule",
  });
});

/** A scripted `nft -i`: answers each line as `respond` says, echoing a marker as nft refuses it. */
class ScriptedSession implements ToolSession {
  closed = false;
  busy = false;
  readonly received: string[] = [];
  constructor(readonly respond: (line: string) => string | undefined) {}
  async request(input: string, end: AnswerEnd, signal?: AbortSignal): Promise<SessionAnswer> {
    if (this.closed) throw new ExecError("nft: exited");
    this.busy = true;
    try {
      let stderr = "";
      for (const line of input.split("\n").filter((l) => l !== "")) {
        this.received.push(line);
        const said = this.respond(line) === undefined
          ? undefined
          : line.startsWith("%kpd-")
          ? `Error: syntax error, unexpected junk\n${line}\n^\n`
          : this.respond(line);
        if (said === undefined) {
          // Never answers: waits until stopped, then is killed.
          await new Promise((r) => signal?.addEventListener("abort", r));
          this.closed = true;
          throw new ExecError("nft: stopped; killed");
        }
        stderr += said;
      }
      const at = end(stderr);
      if (at < 0) throw new Error("the scripted answer is incomplete");
      return { stdout: "", stderr: stderr.slice(0, at) };
    } finally {
      this.busy = false;
    }
  }
  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}

/** An executor whose `nft -i` sessions are scripted, counting what it starts and runs. */
class ScriptedExecutor implements SessionExecutor {
  readonly sessions: ScriptedSession[] = [];
  readonly runs: string[][] = [];
  constructor(readonly respond: (line: string) => string | undefined = () => "") {}
  run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    this.runs.push([cmd, ...opts.args]);
    return Promise.resolve({ code: 0, stdout: "", stderr: "" });
  }
  start(cmd: string, o: SessionOptions): ToolSession {
    assertEquals([cmd, ...o.args], ["nft", "-i"]);
    // nft's history file must never be written on the node.
    assertEquals(o.env?.HOME, "/dev/null");
    const s = new ScriptedSession(this.respond);
    this.sessions.push(s);
    return s;
  }
}

Deno.test("NftRunner sends small transactions to one nft -i and starts no process for them", async () => {
  const exec = new ScriptedExecutor();
  const nft = new NftRunner({ exec, family: "IPv4" });
  for (let i = 0; i < 50; i++) {
    await nft.apply(`delete element ip t s { ${i} }\nadd element ip t s { ${i + 1} }\n`);
  }
  assertEquals(exec.runs, []);
  assertEquals(exec.sessions.length, 1);
  assertEquals(exec.sessions[0].received[1], "delete element ip t s { 0 }; add element ip t s { 1 }");
  // A transaction too long for one line goes by nft -f.
  await nft.apply(Array.from({ length: 1000 }, (_, i) => `add element ip t s { ${i} }`));
  assertEquals(exec.runs, [["nft", "-f", "-"]]);
  await nft.close();
  assert(exec.sessions[0].closed);
});

Deno.test("NftRunner throws nft's refusal from a session as nft -f's, naming the statement, and keeps the session", async () => {
  const exec = new ScriptedExecutor((line) =>
    line.includes("{ 99 }")
      ? `Error: Could not process rule: No such file or directory\n${line}\n${
        " ".repeat(line.indexOf("99"))
      }^^\n`
      : ""
  );
  const nft = new NftRunner({ exec, family: "IPv4" });
  const e = await assertRejects(
    () => nft.apply("add element ip t g { 7 }\ndelete element ip t g { 99 }\n"),
    NftError,
  );
  assertEquals(
    e.message,
    "nft -i: Error: Could not process rule: No such file or directory (line 2: delete element ip t g { 99 })",
  );
  assertEquals([e.line, e.lineNumber, e.code], ["delete element ip t g { 99 }", 2, 1]);
  await nft.apply("add element ip t g { 8 }");
  assertEquals([exec.sessions.length, exec.runs.length], [1, 0]);
});

Deno.test("NftRunner gives sessions up for nft -f when a new one does not answer its marker", async () => {
  // An nft that never answers: the probe gives it SESSION_PROBE_MS, then kills it.
  const exec = new ScriptedExecutor(() => undefined);
  const nft = new NftRunner({ exec, family: "IPv4" });
  await nft.apply("add element ip t g { 1 }");
  await nft.apply("add element ip t g { 2 }");
  assertEquals(exec.sessions.length, 1);
  assert(exec.sessions[0].closed);
  assertEquals(exec.runs, [["nft", "-f", "-"], ["nft", "-f", "-"]]);
});

Deno.test("NftRunner replaces a session once it has read its input budget (nft keeps every line)", async () => {
  const exec = new ScriptedExecutor();
  const nft = new NftRunner({ exec, family: "IPv4" });
  const statement = `add element ip t s { 1 comment "${"x".repeat(3000)}" }`;
  const each = statement.length + 10;
  for (let i = 0; i <= Math.ceil(SESSION_INPUT_BYTES / each); i++) await nft.apply(statement);
  assertEquals(exec.sessions.length, 2);
  assert(exec.sessions[0].closed);
  assertEquals(exec.runs, []);
  await nft.close();
});

Deno.test("NftRunner fails a transaction whose session died before answering: its fate is unknown", async () => {
  const exec = new ScriptedExecutor();
  const nft = new NftRunner({ exec, family: "IPv4" });
  await nft.apply("add element ip t g { 1 }");
  exec.sessions[0].request = () => Promise.reject(new ExecError("nft: exited before it answered"));
  const e = await assertRejects(() => nft.apply("add element ip t g { 2 }"), NftError);
  assertEquals(e.message, "nft -i: nft: exited before it answered");
  // The next transaction starts a new session.
  exec.sessions[0].closed = true;
  await nft.apply("add element ip t g { 3 }");
  assertEquals([exec.sessions.length, exec.runs.length], [2, 0]);
});
