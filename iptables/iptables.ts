/**
 * iptables through `iptables-save` / `iptables-restore` and single-rule commands, one instance
 * per IP family.
 * @module
 */
import { ExecError, type Executor } from "./executor.ts";
import type { IPFamily } from "./ip.ts";
import { linesStartingWith } from "./rule_args.ts";

/** A netfilter table kube-proxy uses. */
export type Table = "nat" | "filter" | "mangle";

/** A chain name. Kernel names are declared as typed constants. */
export type Chain = string;

/** Seconds to wait for the xtables lock, as upstream's `-w 5`. */
const LOCK_WAIT = ["-w", "5"];

/**
 * A restore input: one text, or chunks written in order (never joined on the live path). An
 * iterable must be re-iterable: a failed restore reads it again to quote the failing line.
 */
export type RestoreInput = string | Iterable<string>;

/** Options of a restore. */
export interface RestoreOptions {
  /** False adds `--noflush`: chains not named in the input are kept. */
  readonly flush: boolean;
  readonly counters: boolean;
  /**
   * Aborting kills the restore: a table whose COMMIT it had not reached keeps its previous rules
   * (each table commits atomically).
   */
  readonly signal?: AbortSignal;
}

/** The operations the proxiers need, for one family. */
export interface IPTables {
  readonly family: IPFamily;
  /** Returns `iptables-save -t table` output. */
  save(table: Table): Promise<string>;
  /**
   * The tables this backend holds now, from a save of all of them: naming a table to the legacy
   * backend creates it, so cleanups ask this first and touch only what exists.
   */
  tables(): Promise<ReadonlySet<Table>>;
  /**
   * Applies a whole restore input (one text, or chunks that form it) atomically.
   * @throws {RestoreError} on failure.
   */
  restoreAll(input: RestoreInput, opts: RestoreOptions): Promise<void>;
  /** Creates the chain; returns true when it already existed. */
  ensureChain(table: Table, chain: Chain): Promise<boolean>;
  /** Adds the rule unless present; returns true when it already existed. */
  ensureRule(
    pos: "append" | "prepend",
    table: Table,
    chain: Chain,
    args: readonly string[],
  ): Promise<boolean>;
  /** Deletes the rule; succeeds when it is already gone. */
  deleteRule(table: Table, chain: Chain, args: readonly string[]): Promise<void>;
  /** Returns true when the chain exists. */
  chainExists(table: Table, chain: Chain): Promise<boolean>;
  /**
   * Which of `chains` the table declares, each asked for alone (a whole table's save is megabytes
   * at scale), and naming the table only where that creates nothing: always on nf_tables, on the
   * legacy backend once {@linkcode tables} shows the kernel holds it.
   */
  existingChains(table: Table, chains: readonly Chain[]): Promise<Chain[]>;
  /**
   * Returns the chain's rules as `iptables -S` prints them (`-A CHAIN ...`), or undefined when the
   * chain does not exist. Reads that chain only: cheap beside a whole table's save. `signal` stops it.
   */
  listRules(table: Table, chain: Chain, signal?: AbortSignal): Promise<string[] | undefined>;
  /** Flushes and deletes the chain; succeeds when it does not exist. */
  deleteChain(table: Table, chain: Chain): Promise<void>;
}

/** A restore failed; `line` is the input line iptables-restore named, when it named one. */
export class RestoreError extends ExecError {
  /** @param line the offending input line, if known. */
  constructor(message: string, code: number, readonly line?: string, options?: ErrorOptions) {
    super(message, code, options);
    this.name = "RestoreError";
  }
}

/** An iptables backend: nf_tables (`iptables-nft`) or the legacy x_tables (`iptables-legacy`). */
export type IptablesBackendName = "nft" | "legacy";

/** The real implementation, running `iptables`/`ip6tables` and their save/restore tools. */
export class IptablesRunner implements IPTables {
  readonly family: IPFamily;
  readonly #exec: Executor;
  readonly #cmd: string;
  /** Naming a table to this backend creates nothing (nf_tables); the legacy backend loads it. */
  readonly #readsCreateNothing: boolean;

  /**
   * Uses `iptables*` for IPv4 and `ip6tables*` for IPv6, or their `-nft`/`-legacy` variants when
   * `backend` names one; runs nothing yet.
   */
  constructor(opts: { exec: Executor; family: IPFamily; backend?: IptablesBackendName }) {
    this.family = opts.family;
    this.#exec = opts.exec;
    const base = opts.family === "IPv4" ? "iptables" : "ip6tables";
    this.#cmd = opts.backend === undefined ? base : `${base}-${opts.backend}`;
    this.#readsCreateNothing = opts.backend === "nft";
  }

  /** The command this runner runs (`iptables`, `ip6tables-legacy`, ...). */
  get command(): string {
    return this.#cmd;
  }

  /** Returns the version line (e.g. `iptables v1.8.9 (nf_tables)`), naming the backend. */
  async version(): Promise<string> {
    const r = await this.#exec.run(this.#cmd, { args: ["--version"] });
    if (r.code !== 0) {
      throw new ExecError(`${this.#cmd} --version exited ${r.code}: ${r.stderr.trim()}`, r.code);
    }
    return r.stdout.trim();
  }

  /** @inheritdoc */
  async tables(): Promise<ReadonlySet<Table>> {
    const r = await this.#exec.run(`${this.#cmd}-save`, { args: [] });
    if (r.code !== 0) throw new ExecError(`${this.#cmd}-save exited ${r.code}: ${r.stderr.trim()}`, r.code);
    return new Set(linesStartingWith(r.stdout, "*").map((l) => l.slice(1).trim() as Table));
  }

  /** @inheritdoc */
  async save(table: Table): Promise<string> {
    const r = await this.#exec.run(`${this.#cmd}-save`, { args: ["-t", table] });
    if (r.code !== 0) {
      throw new ExecError(`${this.#cmd}-save -t ${table} exited ${r.code}: ${r.stderr.trim()}`, r.code);
    }
    return r.stdout;
  }

  /** @inheritdoc */
  async restoreAll(input: RestoreInput, opts: RestoreOptions): Promise<void> {
    const args = [...LOCK_WAIT];
    if (!opts.flush) args.push("--noflush");
    if (opts.counters) args.push("--counters");
    const r = await this.#exec.run(`${this.#cmd}-restore`, { args, stdin: input, signal: opts.signal });
    if (r.code === 0) return;
    const stderr = r.stderr.trim();
    const m = /line (\d+) failed/.exec(stderr);
    const line = m ? lineOf(input, Number(m[1])) : undefined;
    throw new RestoreError(
      `${this.#cmd}-restore exited ${r.code}: ${stderr}${line === undefined ? "" : ` (line: ${line})`}`,
      r.code,
      line,
    );
  }

  async #iptables(
    args: readonly string[],
    signal?: AbortSignal,
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    return await this.#exec.run(this.#cmd, { args: [...LOCK_WAIT, ...args], signal });
  }

  async #must(args: readonly string[]): Promise<void> {
    const r = await this.#iptables(args);
    if (r.code !== 0) throw this.#failed(args, r);
  }

  /**
   * Runs a query (`-C`, `-S`): its output when the rule or chain is there, undefined when iptables
   * says it is not ({@linkcode saysAbsent}).
   * @throws {ExecError} on any other failure: the xtables lock still held after `-w`, a killed
   * tool. Read as "absent", such a failure would skip a cleanup silently or report drift that is
   * not there.
   */
  async #query(args: readonly string[], signal?: AbortSignal): Promise<string | undefined> {
    const r = await this.#iptables(args, signal);
    if (r.code === 0) return r.stdout;
    if (saysAbsent(r)) return undefined;
    throw this.#failed(args, r);
  }

  #failed(args: readonly string[], r: { code: number; stderr: string }): ExecError {
    return new ExecError(`${this.#cmd} ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}`, r.code);
  }

  /** @inheritdoc */
  async ensureChain(table: Table, chain: Chain): Promise<boolean> {
    if (await this.chainExists(table, chain)) return true;
    await this.#must(["-t", table, "-N", chain]);
    return false;
  }

  /** @inheritdoc */
  async chainExists(table: Table, chain: Chain): Promise<boolean> {
    return await this.#query(["-t", table, "-S", chain, "1"]) !== undefined;
  }

  /** @inheritdoc */
  async existingChains(table: Table, chains: readonly Chain[]): Promise<Chain[]> {
    if (!this.#readsCreateNothing && !(await this.tables()).has(table)) return [];
    const found: Chain[] = [];
    for (const c of chains) if (await this.chainExists(table, c)) found.push(c);
    return found;
  }

  /** @inheritdoc */
  async listRules(table: Table, chain: Chain, signal?: AbortSignal): Promise<string[] | undefined> {
    const out = await this.#query(["-t", table, "-S", chain], signal);
    return out?.split("\n").filter((l) => l.startsWith("-A "));
  }

  /** @inheritdoc */
  async ensureRule(
    pos: "append" | "prepend",
    table: Table,
    chain: Chain,
    args: readonly string[],
  ): Promise<boolean> {
    if (await this.#query(["-t", table, "-C", chain, ...args]) !== undefined) return true;
    await this.#must(["-t", table, pos === "append" ? "-A" : "-I", chain, ...args]);
    return false;
  }

  /** @inheritdoc */
  async deleteRule(table: Table, chain: Chain, args: readonly string[]): Promise<void> {
    if (await this.#query(["-t", table, "-C", chain, ...args]) === undefined) return;
    await this.#must(["-t", table, "-D", chain, ...args]);
  }

  /** @inheritdoc */
  async deleteChain(table: Table, chain: Chain): Promise<void> {
    if (!(await this.chainExists(table, chain))) return;
    await this.#must(["-t", table, "-F", chain]);
    await this.#must(["-t", table, "-X", chain]);
  }
}

/**
 * Whether a failed `-C` or `-S` says its rule, chain or table is not there, as upstream's
 * IsNotFoundError: exit 1 ("Bad rule (does a matching rule exist ...)", "No chain/target/match by
 * that name"), or the words for a jump to a chain that does not exist (legacy: "Couldn't load
 * target ...: No such file or directory"; nf_tables: "Chain ... does not exist") and for a table
 * the kernel lacks ("Table does not exist"). The lock held past `-w` exits 4 with other words; a
 * killed tool, 124.
 */
export function saysAbsent(r: { code: number; stderr: string }): boolean {
  return r.code === 1 ||
    /No chain\/target\/match by that name|No such file or directory|does a matching rule exist|does not exist/
      .test(r.stderr);
}

/** Returns line `n` (1-based) of `input`, without joining chunks. */
function lineOf(input: RestoreInput, n: number): string | undefined {
  let seen = 1;
  let partial = "";
  for (const chunk of typeof input === "string" ? [input] : input) {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf("\n", start);
      if (seen === n) {
        if (nl < 0) {
          partial += chunk.slice(start);
          break;
        }
        return partial + chunk.slice(start, nl);
      }
      if (nl < 0) break;
      seen++;
      start = nl + 1;
    }
  }
  return seen === n && partial !== "" ? partial : undefined;
}
