import { assert, assertEquals, assertMatch, assertRejects } from "../tests/support/assert.ts";
import { ExecError, type ExecOptions, type ExecResult } from "./executor.ts";
import { NftError, NftRunner } from "./nft.ts";
import { commandWorks, netnsAvailable, withNftRunner } from "../tests/support/namespace.ts";
import { markerEnd, SESSION_INPUT_BYTES, SESSION_TX_BYTES, sessionText } from "./nft_session.ts";
import type {
  AnswerEnd,
  SessionAnswer,
  SessionExecutor,
  SessionOptions,
  ToolSession,
} from "./tool_session.ts";

Deno.test("sessionText is the transaction as nft -f reads it, or nothing past the session's bound", () => {
  assertEquals(sessionText("add element ip t s { 1 }\n"), "add element ip t s { 1 }\n");
  assertEquals(
    sessionText(["# why", "flush chain ip t c", "add rule ip t c accept"]),
    "# why\nflush chain ip t c\nadd rule ip t c accept\n",
  );
  const long = Array.from({ length: 20 }, (_, i) => `add element ip t s { ${i} }`);
  assertEquals(sessionText(long, 200), undefined);
  assertEquals(sessionText(long.join("\n"), 200), undefined);
  assertEquals(sessionText(long.slice(0, 5), 200), long.slice(0, 5).join("\n") + "\n");
  assert(
    SESSION_TX_BYTES >= 64 * 1024,
    "a Service of hundreds of endpoints changes in one session transaction",
  );
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

/** The directory temporary files go to. */
function tempDir(): string {
  const file = Deno.makeTempFileSync();
  Deno.removeSync(file);
  return file.slice(0, file.lastIndexOf("/"));
}

/** What a scripted nft prints for a transaction it read from `file` (undefined: it never answers). */
type Respond = (transaction: string, file: string) => string | undefined;

/**
 * A scripted `nft -i`: reads each `include "FILE"` line's file and answers as `respond` says, and
 * refuses a marker as nft does (echoing it), unless it never answers at all.
 */
class ScriptedSession implements ToolSession {
  closed = false;
  busy = false;
  /** The transactions it read, in order, and the files it read them from. */
  readonly transactions: string[] = [];
  readonly files: string[] = [];
  constructor(readonly respond: Respond) {}
  async request(input: string, end: AnswerEnd, signal?: AbortSignal): Promise<SessionAnswer> {
    if (this.closed) throw new ExecError("nft: exited");
    this.busy = true;
    try {
      let stderr = "";
      for (const line of input.split("\n").filter((l) => l !== "")) {
        const file = /^include "(.*)"$/.exec(line)?.[1];
        const text = file === undefined ? "" : Deno.readTextFileSync(file);
        if (file !== undefined) this.transactions.push(text), this.files.push(file);
        const said = this.respond(text, file ?? "");
        if (said === undefined) {
          // Never answers: waits until stopped, then is killed.
          await new Promise((r) => signal?.addEventListener("abort", r));
          this.closed = true;
          throw new ExecError("nft: stopped; killed");
        }
        stderr += file === undefined ? `Error: syntax error, unexpected junk\n${line}\n^\n` : said;
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
  constructor(readonly respond: Respond = () => "") {}
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
  await nft.apply(["# a comment", "add element ip t s { 51 }"]);
  assertEquals(exec.runs, []);
  assertEquals(exec.sessions.length, 1);
  assertEquals(exec.sessions[0].transactions[0], "delete element ip t s { 0 }\nadd element ip t s { 1 }\n");
  assertEquals(exec.sessions[0].transactions[50], "# a comment\nadd element ip t s { 51 }\n");
  // A new table's transaction goes by nft -f.
  await nft.apply(Array.from({ length: SESSION_TX_BYTES / 20 }, (_, i) => `add element ip t s { ${i} }`));
  assertEquals(exec.runs, [["nft", "-f", "-"]]);
  // Each transaction's file is its own, in the process's directory in the temporary directory,
  // gone once nft answered; the directory goes with the last session.
  const files = exec.sessions[0].files;
  assertEquals(new Set(files).size, 51);
  const dir = files[0].slice(0, files[0].lastIndexOf("/"));
  assertEquals(dir.slice(0, dir.lastIndexOf("/")), tempDir());
  assertMatch(files[0], /\/kube-proxy-deno-nft-\w+\/\d+\.nft$/);
  for (const f of files) assertEquals(await Deno.stat(f).catch((e) => e.name), "NotFound");
  assert((await Deno.stat(`${dir}/owner`)).isFile);
  await nft.close();
  assert(exec.sessions[0].closed);
  assertEquals(await Deno.stat(dir).catch((e) => e.name), "NotFound");
});

Deno.test("NftRunner throws nft's refusal from a session as nft -f's, naming the statement, and keeps the session", async () => {
  const exec = new ScriptedExecutor((tx, file) =>
    tx.includes("{ 99 }")
      ? `In file included from <cmdline>:1:1-50:\n${file}:2:25-26: Error: Could not process rule: No such file or directory\n` +
        `delete element ip t g { 99 }\n                        ^^\n`
      : ""
  );
  const nft = new NftRunner({ exec, family: "IPv4" });
  const e = await assertRejects(
    () => nft.apply("add element ip t g { 7 }\ndelete element ip t g { 99 }\n"),
    NftError,
  );
  assertMatch(
    e.message,
    /^nft -i: \/\S+\.nft:2:25-26: Error: Could not process rule: No such file or directory \(line 2: delete element ip t g \{ 99 \}\)$/,
  );
  assertEquals([e.line, e.lineNumber, e.code], ["delete element ip t g { 99 }", 2, 1]);
  await nft.apply("add element ip t g { 8 }");
  assertEquals([exec.sessions.length, exec.runs.length], [1, 0]);
  await nft.close();
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
  const statement = "add element ip t s { 1 }";
  const each = `include "${tempDir()}/kube-proxy-deno-nft-XXXXXXXXXXXXXXXX/XXX.nft"`.length + 10;
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
  await nft.close();
});

Deno.test("NftRunner's lane takes transactions of any size through an nft -i of its own, apart from the runner's, until it closes", async () => {
  const exec = new ScriptedExecutor((tx, file) =>
    tx.includes("{ bad }")
      ? `${file}:2:20-22: Error: syntax error, unexpected junk\nadd element ip t s { bad }\n                   ^^^\n`
      : ""
  );
  const nft = new NftRunner({ exec, family: "IPv4" });
  await nft.apply("add element ip t s { 1 }");
  const big = (from: number) =>
    Array.from({ length: SESSION_TX_BYTES / 20 }, (_, i) => `add element ip t s { ${from + i} }`);
  const lane = nft.lane()!;
  await lane.apply(big(0));
  await lane.apply(big(100_000));
  // No process per part: both went to one nft -i, the lane's, and the runner's kept its own.
  assertEquals(exec.runs, []);
  assertEquals(exec.sessions.map((s) => s.transactions.length), [1, 2]);
  assertEquals(exec.sessions[1].transactions[1], big(100_000).join("\n") + "\n");
  const e = await assertRejects(
    () => lane.apply("add element ip t s { 2 }\nadd element ip t s { bad }\n"),
    NftError,
  );
  assertEquals([e.line, e.lineNumber], ["add element ip t s { bad }", 2]);
  await lane.close();
  assertEquals(exec.sessions.map((s) => s.closed), [false, true]);
  await nft.close();
});

Deno.test("NftRunner.warm starts its nft -i before any transaction, which then waits for no start; a lane's nft starts with the lane; a close ends one still starting", async () => {
  const exec = new ScriptedExecutor();
  const nft = new NftRunner({ exec, family: "IPv4" });
  nft.warm();
  nft.warm();
  await new Promise((r) => setTimeout(r, 0));
  assertEquals(exec.sessions.length, 1, "one nft -i, started and past its marker");
  await nft.apply("add element ip t s { 1 }");
  assertEquals([exec.sessions.length, exec.runs.length], [1, 0]);
  assertEquals(exec.sessions[0].transactions, ["add element ip t s { 1 }"]);
  nft.warm();
  await new Promise((r) => setTimeout(r, 0));
  assertEquals(exec.sessions.length, 1, "a running session is kept");
  const lane = nft.lane()!;
  await new Promise((r) => setTimeout(r, 0));
  assertEquals(exec.sessions.length, 2, "the lane's nft runs before its first part");
  await lane.close();
  await nft.close();
  const other = new NftRunner({ exec, family: "IPv4" });
  other.warm();
  await other.close();
  assertEquals(exec.sessions.map((s) => s.closed), [true, true, true]);
});

Deno.test("NftRunner offers no lane when its executor keeps no session: a new table's parts stay whole, each one nft -f", () => {
  const exec = { run: (): Promise<ExecResult> => Promise.resolve({ code: 0, stdout: "", stderr: "" }) };
  assertEquals(new NftRunner({ exec, family: "IPv4" }).lane(), undefined);
});

Deno.test({
  name:
    "a real nft -i: a refused transaction applies nothing and names its statement; the session goes on, and sees another writer's change",
  ignore: !(await netnsAvailable()) || !(await commandWorks("nft")),
  async fn() {
    await withNftRunner(async (exec, nft) => {
      const byFile = exec.fileRuns;
      await nft.apply("add table ip t\nadd set ip t g { type inet_service; }\nadd chain ip t c\n");
      const e = await assertRejects(
        () => nft.apply("add element ip t g { 7 }\n# a comment\ndelete element ip t g { 99 }\n"),
        NftError,
      );
      assertEquals([e.line, e.lineNumber], ["delete element ip t g { 99 }", 3]);
      assertMatch(e.message, /Error: Could not process rule: No such file or directory \(line 3: /);
      await nft.apply("add element ip t g { 8 }\nadd rule ip t c tcp dport 80 counter\n");
      const listed = await exec.run("nft", { args: ["list", "table", "ip", "t"] });
      assertMatch(listed.stdout, /elements = \{ 8 \}/);
      assertMatch(listed.stdout, /tcp dport 80 counter/);
      // Another writer deletes the set behind the session: its next transaction is refused, not
      // taken against what nft -i read before; once the set is back, it goes in.
      assertEquals((await exec.run("nft", { args: ["delete", "set", "ip", "t", "g"] })).code, 0);
      await assertRejects(() => nft.apply("add element ip t g { 9 }\n"), NftError);
      assertEquals(
        (await exec.run("nft", { args: ["add", "set", "ip", "t", "g", "{ type inet_service; }"] })).code,
        0,
      );
      await nft.apply("add element ip t g { 9 }\n");
      assertMatch(
        (await exec.run("nft", { args: ["list", "set", "ip", "t", "g"] })).stdout,
        /elements = \{ 9 \}/,
      );
      // Every transaction went to the one nft -i; no nft -f ran.
      assertEquals([exec.sessions.length, byFile], [1, []]);
      await nft.close();
      assert(exec.sessions[0].closed);
    });
  },
});
