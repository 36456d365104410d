/**
 * Small nft transactions through one `nft -i` kept running, so that a change (a partial sync, a
 * few elements) costs nft's own work and not a process start as well: on a paravirtualized node a
 * start alone is 3-4 ms of CPU, and one element's `nft -f` 15 ms, where the session's answer takes
 * under a millisecond. nft reads each line of its interactive input as one transaction, all of it or
 * nothing, as `nft -f` reads a file; so a transaction goes as its statements joined by `;` on one
 * line. After it goes a marker line that nft can only refuse: its error, which echoes the marker,
 * ends the answer. Whatever nft printed before is the transaction's: an `Error:` there means none of
 * it was applied.
 *
 * What goes by `nft -f` instead: a transaction longer than {@linkcode SESSION_LINE_BYTES} (nft -i
 * reads its input a byte at a time), one with a comment after a statement (on one line it would
 * hide what follows; comment lines are left out), one sent while another is in flight, and every one once a session failed to answer its
 * first marker (an nft that does not echo a refused line). A session is replaced after
 * {@linkcode SESSION_INPUT_BYTES} of input, since nft keeps every line it read in its history, and
 * runs with `HOME=/dev/null`, so that history is never written to a file on the node.
 * @module
 */
import type { SessionExecutor, ToolSession } from "./tool_session.ts";

/**
 * The longest transaction line sent to a session. nft -i reads its input a byte at a time (2 µs a
 * byte on a paravirtualized node, against a process start of 15 ms for `nft -f`): at 8 KiB the two
 * cost about the same. A one-endpoint change of a Service of 50 endpoints is 4.4 KiB.
 */
export const SESSION_LINE_BYTES = 8192;

/** Input after which a session is replaced by a new one (nft keeps each line read in memory). */
export const SESSION_INPUT_BYTES = 2 ** 20;

/** How long a new session may take to answer its first marker before sessions are given up. */
export const SESSION_PROBE_MS = 5000;

/** A transaction as one line, with where each of its statements begins in it. */
export interface SessionLine {
  readonly text: string;
  readonly statements: readonly string[];
  readonly starts: readonly number[];
}

/**
 * Returns `script` as one line for a session, its comment lines left out, or undefined when it
 * must go by `nft -f`: longer than `maxBytes`, empty, or with a `#` after a statement (a comment
 * there would hide the statements after it).
 */
export function sessionLine(
  script: string | readonly string[],
  maxBytes = SESSION_LINE_BYTES,
): SessionLine | undefined {
  // Whole transactions of a new table are megabytes: given up on before they are split.
  if (typeof script === "string" && script.length > maxBytes) return undefined;
  const statements: string[] = [];
  const starts: number[] = [];
  let length = 0;
  for (const l of typeof script === "string" ? script.split("\n") : script) {
    // A comment line says nothing to nft; a `#` after a statement would hide the ones after it.
    if (l.trim() === "" || l.trimStart().startsWith("#")) continue;
    if (l.includes("#") || l.includes("\n")) return undefined;
    const start = statements.length === 0 ? 0 : length + 2;
    length = start + l.length;
    if (length > maxBytes) return undefined;
    starts.push(start);
    statements.push(l);
  }
  if (statements.length === 0) return undefined;
  const text = statements.join("; ");
  // Bytes, not UTF-16 units: a statement is ASCII but for a comment's text.
  if (new TextEncoder().encode(text).length > maxBytes) return undefined;
  return { text, statements, starts };
}

/** What a session answered a transaction with: nothing, or nft's first error and the statement it named. */
export interface SessionRefusal {
  /** nft's message (`Error: ...`). */
  readonly message: string;
  /** The statement the caret pointed into, and its 1-based number among the statements. */
  readonly statement?: string;
  readonly statementNumber?: number;
}

/**
 * Reads nft's answer to `line` (what it printed before the marker's error): undefined when it holds
 * no error, else the first error and the statement its caret line points into.
 */
export function readRefusal(line: SessionLine, answer: string): SessionRefusal | undefined {
  const lines = answer.split("\n");
  const at = lines.findIndex((l) => /^(?:[^:\n]*: )?Error: /.test(l));
  if (at < 0) return undefined;
  const message = lines[at].trim();
  const caret = lines[at + 2]?.indexOf("^") ?? -1;
  if (lines[at + 1] !== line.text || caret < 0) return { message };
  let i = line.starts.length - 1;
  while (i > 0 && line.starts[i] > caret) i--;
  return { message, statement: line.statements[i], statementNumber: i + 1 };
}

/** Returns the end (past the caret line) of the error nft printed for marker `marker`, or -1. */
export function markerEnd(stderr: string, marker: string): number {
  const echo = stderr.indexOf(`\n${marker}\n`);
  if (echo < 0) return -1;
  const caretEnd = stderr.indexOf("\n", echo + marker.length + 2);
  return caretEnd < 0 ? -1 : caretEnd + 1;
}

/** Returns what precedes the error block that ends at `end` (the marker's): the transaction's answer. */
function beforeMarker(stderr: string, marker: string): string {
  const echo = stderr.indexOf(`\n${marker}\n`);
  return stderr.slice(0, stderr.lastIndexOf("\n", echo - 1) + 1);
}

/** One family's runner's `nft -i`; see the module doc. Construction starts nothing. */
export class NftSession {
  readonly #exec: SessionExecutor;
  #session: ToolSession | undefined;
  #sent = 0;
  #seq = 0;
  /** A transaction is in flight (or its session starting): the next goes by `nft -f`. */
  #busy = false;
  /** A session did not answer its first marker: every transaction goes by `nft -f`. */
  #givenUp = false;

  /** Starts no session until a transaction asks for one. */
  constructor(exec: SessionExecutor) {
    this.#exec = exec;
  }

  /** Whether a transaction could go to a session now (none given up on, none in flight). */
  get ready(): boolean {
    return !this.#givenUp && !this.#busy;
  }

  /**
   * Applies `line` through the session (started, or replaced, first when needed); resolves with
   * nft's answer: `refusal` undefined when the transaction is in. Resolves undefined, having sent
   * nothing, when no session can take it (one in flight, or sessions given up): `nft -f` must.
   * @throws {ExecError} when the session did not answer (nft exited, timed out or was stopped): the
   * transaction's fate is unknown.
   */
  async apply(line: SessionLine, signal?: AbortSignal): Promise<{ refusal?: SessionRefusal } | undefined> {
    if (!this.ready) return undefined;
    this.#busy = true;
    try {
      const session = await this.#current();
      if (session === undefined) return undefined;
      const marker = `%kpd-${++this.#seq}`;
      const input = `${line.text}\n${marker}\n`;
      this.#sent += input.length;
      const answer = await session.request(input, (e) => markerEnd(e, marker), signal);
      return { refusal: readRefusal(line, beforeMarker(answer.stderr, marker)) };
    } finally {
      this.#busy = false;
    }
  }

  /** Closes the session, if one runs; the next transaction starts another. */
  async close(): Promise<void> {
    const s = this.#session;
    this.#session = undefined;
    await s?.close();
  }

  /** The running session, replaced when spent or exited; undefined once sessions are given up. */
  async #current(): Promise<ToolSession | undefined> {
    if (this.#session !== undefined && !this.#session.closed && this.#sent < SESSION_INPUT_BYTES) {
      return this.#session;
    }
    await this.close();
    const marker = `%kpd-${++this.#seq}`;
    let session: ToolSession | undefined;
    try {
      session = this.#exec.start("nft", { args: ["-i"], env: { HOME: "/dev/null" } });
      await session.request(
        `${marker}\n`,
        (e) => markerEnd(e, marker),
        AbortSignal.timeout(SESSION_PROBE_MS),
      );
    } catch {
      this.#givenUp = true;
      await session?.close();
      return undefined;
    }
    this.#session = session;
    this.#sent = 0;
    return session;
  }
}
