/**
 * nft transactions of up to {@linkcode SESSION_TX_BYTES} (every change's) through one `nft -i` kept
 * running, so that a change costs nft's own work and not a process start as well: on a paravirtualized node a
 * start alone is 3-4 ms of CPU, and one element's `nft -f` 15 ms, where the session's answer takes
 * under a millisecond. nft reads each line of its interactive input as one transaction, all of it or
 * nothing, as `nft -f` reads a file. The line is `include "FILE"`, FILE holding the transaction as
 * `nft -f` would read it: nft -i reads its input a byte at a time (2 µs a byte on that node; a
 * one-endpoint change of a Service of 50 endpoints is 4.4 KiB), and a file it reads whole. After
 * the line goes a marker line that nft can only refuse: its error, which echoes the marker, ends
 * the answer. Whatever nft printed before is the transaction's: an `Error:` there, located as
 * `FILE:LINE:COLUMN` as `nft -f` locates it, means none of it was applied.
 *
 * What goes by `nft -f` instead: a transaction longer than {@linkcode SESSION_TX_BYTES} (a new
 * table; nft would keep the memory it took), one sent while another is in flight, one whose file
 * cannot be written, and every one once a session failed to answer its first marker (an nft that
 * does not echo a refused line). Each transaction's file is its own, in the process's directory in
 * the temporary directory (`TMPDIR`, else `/tmp`; the runtime opens nothing under `/dev` to a program
 * without every permission; `transaction_files.ts` says how a killed process's is found), and
 * removed once nft answered: it lives as long as nft takes to read it. A session
 * is replaced after {@linkcode SESSION_INPUT_BYTES} of input, since nft keeps every line it read in
 * its history, and runs with `HOME=/dev/null`, so that history is never written to a file on the
 * node.
 * @module
 */
import type { SessionExecutor, ToolSession } from "./tool_session.ts";
import { removeFile, TransactionFiles } from "./transaction_files.ts";

/** The process's one transaction directory, shared by its sessions (`transaction_files.ts`). */
export const processTransactionFiles: TransactionFiles = new TransactionFiles();

/** The longest transaction sent to a session; a longer one (a new table) goes by `nft -f`. */
export const SESSION_TX_BYTES = 256 * 1024;

/** Input after which a session is replaced by a new one (nft keeps each line read in memory). */
export const SESSION_INPUT_BYTES = 2 ** 20;

/** How long a new session may take to answer its first marker before sessions are given up. */
export const SESSION_PROBE_MS = 5000;

/**
 * Returns `script` as the text of a session's file, or undefined when it must go by `nft -f`:
 * longer than `maxBytes` (counted in UTF-16 units, a statement being ASCII but for comments).
 */
export function sessionText(
  script: string | readonly string[],
  maxBytes = SESSION_TX_BYTES,
): string | undefined {
  if (typeof script === "string") return script.length > maxBytes ? undefined : script;
  let length = 0;
  for (const l of script) if ((length += l.length + 1) > maxBytes) return undefined;
  return script.length === 0 ? "" : script.join("\n") + "\n";
}

/** Returns the end (past the caret line) of the error nft printed for marker `marker`, or -1. */
export function markerEnd(stderr: string, marker: string): number {
  const echo = stderr.indexOf(`\n${marker}\n`);
  if (echo < 0) return -1;
  const caretEnd = stderr.indexOf("\n", echo + marker.length + 2);
  return caretEnd < 0 ? -1 : caretEnd + 1;
}

/** Returns what precedes the marker's error block in `stderr`: the transaction's answer. */
function beforeMarker(stderr: string, marker: string): string {
  const echo = stderr.indexOf(`\n${marker}\n`);
  return stderr.slice(0, stderr.lastIndexOf("\n", echo - 1) + 1);
}

/** What nft said of one transaction: `file`, the name its errors are located by. */
export interface NftSessionAnswer {
  readonly file: string;
  readonly stderr: string;
  /** Whether nft refused it (an `Error:` line): then none of it was applied. */
  readonly refused: boolean;
}

/** One family's runner's `nft -i`; see the module doc. Construction starts nothing. */
export class NftSession {
  readonly #exec: SessionExecutor;
  readonly #files: TransactionFiles;
  #session: ToolSession | undefined;
  #sent = 0;
  #seq = 0;
  /** A transaction is in flight (or its session starting): the next goes by `nft -f`. */
  #busy = false;
  /** A session did not answer its first marker: every transaction goes by `nft -f`. */
  #givenUp = false;
  /** The session being started, until it answered its first marker (or was given up). */
  #starting: Promise<ToolSession | undefined> | undefined;

  /** Starts no session until a transaction asks for one; `files`: where its transactions are written. */
  constructor(exec: SessionExecutor, files: TransactionFiles = processTransactionFiles) {
    this.#exec = exec;
    this.#files = files;
  }

  /** Whether a transaction could go to a session now (none given up on, none in flight). */
  get ready(): boolean {
    return !this.#givenUp && !this.#busy;
  }

  /**
   * Applies `text` (a whole transaction) through the session, started or replaced first when
   * needed; resolves with nft's answer. Resolves undefined, having applied nothing, when no session
   * can take it (one in flight, sessions given up, its file not written): `nft -f` must.
   * @throws {ExecError} when the session did not answer (nft exited, timed out or was stopped): the
   * transaction's fate is unknown.
   */
  async apply(text: string, signal?: AbortSignal): Promise<NftSessionAnswer | undefined> {
    if (!this.ready) return undefined;
    this.#busy = true;
    try {
      const session = await this.#current();
      if (session === undefined) return undefined;
      const file = this.#files.write(text);
      if (file === undefined) return undefined;
      try {
        const marker = `%kpd-${++this.#seq}`;
        const input = `include "${file}"\n${marker}\n`;
        this.#sent += input.length;
        const answer = await session.request(input, (e) => markerEnd(e, marker), signal);
        const stderr = beforeMarker(answer.stderr, marker);
        return { file, stderr, refused: /^(?:.*: )?Error: /m.test(stderr) };
      } finally {
        removeFile(file);
      }
    } finally {
      this.#busy = false;
    }
  }

  /**
   * Starts the session now when none runs (nor is given up on), so that the next transaction finds
   * it past its start: nft -i's start (about 45 ms of its own, more on a loaded node) and its first
   * marker's answer then overlap the caller's work, not the transaction's wait.
   */
  warm(): void {
    if (!this.#givenUp && !this.#alive()) void this.#current();
  }

  /** Closes the session, if one runs or is starting; the next transaction starts another. */
  async close(): Promise<void> {
    await this.#starting;
    await this.#closeCurrent();
  }

  async #closeCurrent(): Promise<void> {
    const s = this.#session;
    this.#session = undefined;
    if (s === undefined) return;
    this.#files.close();
    await s.close();
  }

  /** The running session, replaced when spent or exited; undefined once sessions are given up. */
  #current(): Promise<ToolSession | undefined> {
    if (this.#alive()) return Promise.resolve(this.#session);
    this.#starting ??= this.#start().finally(() => this.#starting = undefined);
    return this.#starting;
  }

  /** Whether the running session can take another transaction. */
  #alive(): boolean {
    return this.#session !== undefined && !this.#session.closed && this.#sent < SESSION_INPUT_BYTES;
  }

  /** Starts a session in place of the spent or exited one; undefined once sessions are given up. */
  async #start(): Promise<ToolSession | undefined> {
    // Counted before the spent one ends: a replacement keeps the directory it shares.
    this.#files.open();
    await this.#closeCurrent();
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
      this.#files.close();
      await session?.close();
      return undefined;
    }
    this.#session = session;
    this.#sent = 0;
    return session;
  }
}
