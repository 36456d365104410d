/**
 * nftables through `nft`: one `nft -f -` transaction at a time (all of it or nothing), state read
 * with `nft -j list ...`. One instance per family (`ip` or `ip6`).
 * @module
 */
import { ExecError, type Executor, inputText } from "./executor.ts";
import type { IPFamily } from "./ip.ts";
import { NftSession, type NftSessionAnswer, SESSION_TX_BYTES, sessionText } from "./nft_session.ts";
import type { NftBaseHook } from "./nft_priority.ts";
import { sessionsOf } from "./tool_session.ts";

/** The nft family keyword of an IP family. */
export function nftFamily(family: IPFamily): "ip" | "ip6" {
  return family === "IPv4" ? "ip" : "ip6";
}

/** One element of a map or set as `nft -j` lists it: key and value as their concatenated parts. */
export interface NftElement {
  /** The key's parts, each as nft prints it (`10.0.0.1`, `tcp`, `80`). */
  readonly key: readonly string[];
  /** The value's parts (empty for sets). */
  readonly value: readonly string[];
  /** Its comment, when it has one. */
  readonly comment?: string;
}

/** One chain of a table as `nft -j list chains` lists it; `base` only for a base chain. */
export interface NftChainInfo {
  readonly name: string;
  readonly base?: NftBaseHook;
}

/**
 * A transaction for `nft -f`: its text, or its statements one to an element (written to nft one at
 * a time: a transaction of a hundred thousand elements is never joined into one text).
 */
export type NftScript = string | readonly string[];

/** Returns the text of `script` as nft reads it: for fakes and dry runs, never on a live path. */
export function scriptText(script: NftScript): string {
  return inputText(typeof script === "string" ? script : statements(script));
}

/** The operations the nftables mode needs, for one family. */
export interface NFTables {
  readonly family: IPFamily;
  /**
   * Applies `script` as one transaction; aborting `signal` kills nft, and then nothing of it is
   * applied. @throws {NftError} naming the offending line.
   */
  apply(script: NftScript, signal?: AbortSignal): Promise<void>;
  /** Checks `script` against the kernel without applying it (`nft -c`). @throws {NftError} */
  check(script: string): Promise<void>;
  /**
   * Checks `script` with `nft -c` and returns every statement the kernel refused, in order (none:
   * it would apply whole). The kernel goes on past a refused statement and reports each, so one
   * run answers many questions: `delete element` refused when an element is missing, `delete map`
   * refused as busy while a rule uses the map. Rejects at once when `signal` stops it (nft killed).
   */
  refusals(script: string, signal?: AbortSignal): Promise<NftRefusal[]>;
  /**
   * The chains of `table` in this family, base chains with their hook and numeric priority, or
   * undefined when it has none (or does not exist).
   */
  listChains(table: string): Promise<NftChainInfo[] | undefined>;
  /**
   * The elements of map or set `name` of `table`; empty when it does not exist. Rejects at once when
   * `signal` stops it (its nft is killed; nothing else is run).
   */
  listElements(table: string, name: string, signal?: AbortSignal): Promise<NftElement[]>;
  /** The number of rules of `chain` in `table`, or undefined when the chain does not exist. */
  countRules(table: string, chain: string, signal?: AbortSignal): Promise<number | undefined>;
  /** Ends the nft kept running for transactions, if one runs (`nft_session.ts`). */
  close?(): Promise<void>;
  /** Starts the nft kept running for transactions now, if none runs: the next need not wait for it. */
  warm?(): void;
  /**
   * Returns a lane of a new table's load (`proxier/nftables/fresh_load.ts`): transactions of any
   * size, one at a time, through an nft of its own started at once and kept running until
   * {@linkcode NftLane.close}; undefined (or absent) when none can be kept, each its own `nft -f`.
   */
  lane?(): NftLane | undefined;
}

/**
 * One lane of a new table's load: `apply` as {@linkcode NFTables.apply}, through one `nft -i` of its
 * own (`nft_session.ts`; each by `nft -f` when no session can take it), which reuses the memory the
 * last transaction took where an `nft -f` each takes it fresh; `close` ends that nft.
 */
export type NftLane = Pick<NFTables, "apply"> & { close(): Promise<void> };

/** A statement `nft -c` refused: its line (1-based) and nft's message. */
export interface NftRefusal {
  readonly lineNumber: number;
  readonly line: string;
  readonly message: string;
  /** The part of the line nft pointed at (the missing element of a `delete element`). */
  readonly at: string;
}

/**
 * Reads every `/dev/stdin:LINE:FROM-TO: Error: MESSAGE` of nft's stderr against `script`, in the
 * order nft printed them.
 */
export function parseRefusals(script: string, stderr: string): NftRefusal[] {
  const lines = script.split("\n");
  const out: NftRefusal[] = [];
  for (const m of stderr.matchAll(/^(?:\/dev\/stdin|-):(\d+):(\d+)(?:-(\d+))?: Error: (.*)$/gm)) {
    const lineNumber = Number(m[1]);
    const line = lines[lineNumber - 1] ?? "";
    const from = Number(m[2]);
    out.push({ lineNumber, line, message: m[4], at: line.slice(from - 1, Number(m[3] ?? from)) });
  }
  return out;
}

/** A transaction failed; `line` is the transaction line nft named, when it named one. */
export class NftError extends ExecError {
  /** @param line the offending line; @param lineNumber its 1-based number. */
  constructor(
    message: string,
    code: number,
    readonly line?: string,
    readonly lineNumber?: number,
    options?: ErrorOptions,
  ) {
    super(message, code, options);
    this.name = "NftError";
  }
}

/** The version `nft --version` reports, parsed. */
export interface NftVersion {
  readonly text: string;
  readonly major: number;
  readonly minor: number;
  readonly patch: number;
}

/** Parses `nftables v1.0.6 (Lester Gooch #5)`; undefined when it is not such a line. */
export function parseNftVersion(text: string): NftVersion | undefined {
  const m = /v(\d+)\.(\d+)(?:\.(\d+))?/.exec(text);
  if (m === null) return undefined;
  return { text: text.trim(), major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3] ?? 0) };
}

/** Returns true when `v` is at least `min` ([major, minor, patch]). */
export function versionAtLeast(v: NftVersion, min: readonly [number, number, number]): boolean {
  const a = [v.major, v.minor, v.patch];
  for (let i = 0; i < 3; i++) if (a[i] !== min[i]) return a[i] > min[i];
  return true;
}

/**
 * The real implementation: runs `nft`; a transaction short of a new table's goes to an `nft -i` kept
 * running when the executor can keep one (`nft_session.ts`).
 */
export class NftRunner implements NFTables {
  readonly family: IPFamily;
  readonly #exec: Executor;
  readonly #family: "ip" | "ip6";
  readonly #session: NftSession | undefined;

  /** Runs nothing yet. */
  constructor(opts: { exec: Executor; family: IPFamily }) {
    this.family = opts.family;
    this.#exec = opts.exec;
    this.#family = nftFamily(opts.family);
    const sessions = sessionsOf(opts.exec);
    this.#session = sessions === undefined ? undefined : new NftSession(sessions);
  }

  /** @inheritdoc */
  async close(): Promise<void> {
    await this.#session?.close();
  }

  /** Returns the installed nft's version. @throws {ExecError} when nft is missing or fails. */
  async version(): Promise<NftVersion> {
    const r = await this.#exec.run("nft", { args: ["--version"] });
    const v = parseNftVersion(r.stdout);
    if (r.code !== 0 || v === undefined) {
      throw new ExecError(`nft --version exited ${r.code}: ${(r.stderr || r.stdout).trim()}`, r.code);
    }
    return v;
  }

  /** @inheritdoc */
  apply(script: NftScript, signal?: AbortSignal): Promise<void> {
    return this.#applyThrough(this.#session, SESSION_TX_BYTES, script, signal);
  }

  /** @inheritdoc */
  warm(): void {
    this.#session?.warm();
  }

  /** @inheritdoc */
  lane(): NftLane | undefined {
    const sessions = sessionsOf(this.#exec);
    if (sessions === undefined) return undefined;
    const session = new NftSession(sessions);
    session.warm();
    return {
      // Its nft ends with the load: the memory a part of any size took is not kept.
      apply: (script, signal) => this.#applyThrough(session, Infinity, script, signal),
      close: () => session.close(),
    };
  }

  /** Applies `script` through session `s` when it takes it (at most `maxBytes`), else by `nft -f`. */
  async #applyThrough(s: NftSession | undefined, maxBytes: number, script: NftScript, signal?: AbortSignal) {
    const text = s?.ready === true ? sessionText(script, maxBytes) : undefined;
    let answer: NftSessionAnswer | undefined;
    try {
      answer = text === undefined ? undefined : await s!.apply(text, signal);
    } catch (cause) {
      const code = cause instanceof ExecError ? cause.code : -1;
      throw new NftError(`nft -i: ${(cause as Error).message}`, code, undefined, undefined, { cause });
    }
    if (answer === undefined) return this.#run(["-f", "-"], script, signal);
    if (answer.refused) throw nftFailure("nft -i: ", 1, answer.stderr, script, answer.file);
  }

  /** @inheritdoc */
  check(script: string): Promise<void> {
    return this.#run(["-c", "-f", "-"], script);
  }

  /** @inheritdoc */
  async refusals(script: string, signal?: AbortSignal): Promise<NftRefusal[]> {
    const r = await this.#exec.run("nft", { args: ["-c", "-f", "-"], stdin: script, signal });
    if (signal?.aborted === true) throw new ExecError("nft -c -f -: stopped", r.code);
    if (r.code === 0) return [];
    const refused = parseRefusals(script, r.stderr);
    if (refused.length > 0) return refused;
    throw new NftError(`nft -c -f - exited ${r.code}: ${r.stderr.trim().split("\n")[0]}`, r.code);
  }

  async #run(args: string[], script: NftScript, signal?: AbortSignal): Promise<void> {
    const stdin = typeof script === "string" ? script : statements(script);
    const r = await this.#exec.run("nft", { args, stdin, signal });
    if (r.code === 0) return;
    throw nftFailure(`nft ${args.join(" ")} exited ${r.code}: `, r.code, r.stderr, script, "/dev/stdin", "-");
  }

  async #list(args: string[], options: string[] = [], signal?: AbortSignal): Promise<unknown[]> {
    const r = await this.#exec.run("nft", { args: ["-j", ...options, "list", ...args], signal });
    if (r.code !== 0) {
      throw new ExecError(
        `nft -j ${[...options, "list", ...args].join(" ")} exited ${r.code}: ${r.stderr.trim()}`,
        r.code,
      );
    }
    // A dry run answers with nothing: an empty ruleset.
    if (r.stdout.trim() === "") return [];
    const doc = JSON.parse(r.stdout) as { nftables?: unknown[] };
    return doc.nftables ?? [];
  }

  /** @inheritdoc */
  async listChains(table: string): Promise<NftChainInfo[] | undefined> {
    // The family's chains, without rules: nft reads no rule, set or element of any table (even
    // `list table -t` fetches every element: 1.5 s at a million), so this stays cheap at any scale
    // and whatever another program holds.
    const objects = await this.#list(["chains", this.#family]);
    const chains: NftChainInfo[] = [];
    for (const o of objects) {
      const c =
        (o as { chain?: { table?: string; name?: string; type?: string; hook?: string; prio?: number } })
          .chain;
      if (c?.table !== table || typeof c.name !== "string") continue;
      const base = c.hook === undefined
        ? undefined
        : { type: c.type ?? "", hook: c.hook, priority: c.prio ?? 0 };
      chains.push({ name: c.name, base });
    }
    return chains.length === 0 ? undefined : chains;
  }

  /** @inheritdoc */
  async countRules(table: string, chain: string, signal?: AbortSignal): Promise<number | undefined> {
    const objects = await this.#list(["chain", this.#family, table, chain], [], signal).catch(() =>
      undefined
    );
    return objects?.filter((o) => (o as { rule?: unknown }).rule !== undefined).length;
  }

  /** @inheritdoc */
  async listElements(table: string, name: string, signal?: AbortSignal): Promise<NftElement[]> {
    const chains = await this.listChains(table);
    if (chains === undefined) return [];
    let objects: unknown[];
    try {
      objects = await this.#list(["map", this.#family, table, name], [], signal);
    } catch (e) {
      // Stopped: no second listing (nft reads the table's elements before it says a map is no set).
      if (signal?.aborted === true) throw e;
      // Not a map (or gone): try it as a set, and treat a missing one as empty.
      objects = await this.#list(["set", this.#family, table, name], [], signal).catch(() => []);
    }
    const out: NftElement[] = [];
    for (const o of objects) {
      const s = o as { map?: { elem?: unknown[] }; set?: { elem?: unknown[] } };
      for (const e of (s.map ?? s.set)?.elem ?? []) {
        const [k, v] = Array.isArray(e) ? e : [e, undefined];
        const comment = (k as { elem?: { comment?: string } } | null)?.elem?.comment;
        out.push({ key: jsonParts(k), value: jsonParts(v), ...(comment === undefined ? {} : { comment }) });
      }
    }
    return out;
  }
}

/**
 * The error of a transaction nft refused: `said` and nft's first error line, the statement it
 * located (as `SOURCE:LINE:` for one of `sources`, the names nft read the transaction by).
 */
function nftFailure(
  said: string,
  code: number,
  stderr: string,
  script: NftScript,
  ...sources: string[]
): NftError {
  const text = stderr.trim();
  const names = sources.map((s) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")).join("|");
  const m = new RegExp(`(?:^|\\n)(?:${names}):(\\d+):`).exec(text);
  const lineNumber = m ? Number(m[1]) : undefined;
  const lines = typeof script === "string" ? script.split("\n") : script;
  const line = lineNumber === undefined ? undefined : lines[lineNumber - 1];
  const shown = line === undefined ? "" : ` (line ${lineNumber}: ${clipped(line)})`;
  const first = text.split("\n").find((l) => l.includes("Error:")) ?? text.split("\n")[0];
  return new NftError(`${said}${first}${shown}`, code, line, lineNumber);
}

/** Returns `line` cut to 200 characters for a message. */
function clipped(line: string): string {
  return line.length > 200 ? line.slice(0, 200) + "..." : line;
}

/** Flattens nft's JSON for a key or value (`{concat: [...]}`, `{elem: {val}}`, prefixes) to text parts. */
function jsonParts(v: unknown): string[] {
  if (v === null || v === undefined) return [];
  if (typeof v === "string" || typeof v === "number") return [String(v)];
  if (Array.isArray(v)) return v.flatMap(jsonParts);
  const o = v as Record<string, unknown>;
  if ("elem" in o) return jsonParts((o.elem as { val: unknown }).val);
  if ("concat" in o) return jsonParts(o.concat);
  if ("prefix" in o) {
    const p = o.prefix as { addr: string; len: number };
    return [`${p.addr}/${p.len}`];
  }
  if ("range" in o) return [(o.range as unknown[]).map((x) => jsonParts(x).join("")).join("-")];
  if ("goto" in o) return [`goto ${(o.goto as { target: string }).target}`];
  if ("jump" in o) return [`jump ${(o.jump as { target: string }).target}`];
  for (const verdict of ["drop", "accept", "return", "continue"]) if (verdict in o) return [verdict];
  return [JSON.stringify(o)];
}

/** Yields each statement and its newline, for nft's stdin. */
function* statements(lines: readonly string[]): Generator<string> {
  for (const l of lines) {
    yield l;
    yield "\n";
  }
}
