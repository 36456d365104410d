/**
 * Running a kernel tool from the benches, and telling when an iptables chain reached the kernel.
 * @module
 */
import type { IptablesBackendName } from "../iptables/iptables.ts";

/** Runs `cmd` with `args` (and `stdin`, if given); resolves with its exit code and what it printed. */
export async function sh(
  cmd: string,
  args: string[],
  stdin?: string,
): Promise<{ code: number; out: string; err: string }> {
  const child = new Deno.Command(cmd, {
    args,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin)).catch(() => {});
    await w.close().catch(() => {});
  }
  const r = await child.output();
  const dec = new TextDecoder();
  return { code: r.code, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Tells when a chain reached the kernel's nat table.
 *
 * nf_tables: asked every 25 ms (`iptables-nft -S CHAIN` costs a few milliseconds whatever the
 * table holds; `nft monitor` would need no polling but reads and prints the whole ruleset as it
 * loads, seconds of CPU at scale). Legacy: listing one chain fetches the whole table under the
 * xtables lock (0.2 s at 5,000 services), which would delay the very restore being timed; instead
 * the program's `iptables-legacy-restore` is a shim on its PATH that notes when each restore
 * committed and keeps its input, and the chain is in the kernel once a committed input declared it.
 * The watch owns the directory the shim and the inputs it keeps are in: {@linkcode close} removes it.
 */
export class ChainWatch {
  readonly #backend: IptablesBackendName;
  readonly #dir: string;
  #read = 0;
  readonly #committed: Array<{ atMs: number; file: string }> = [];

  private constructor(backend: IptablesBackendName, dir: string) {
    this.#backend = backend;
    this.#dir = dir;
  }

  /** Returns a watch for `backend` with a new temporary directory of its own (named `prefix`...). */
  static async create(backend: IptablesBackendName, prefix: string): Promise<ChainWatch> {
    return new ChainWatch(backend, await Deno.makeTempDir({ prefix }));
  }

  /** The directory the watch owns (the shim, the restores' inputs it keeps). */
  get dir(): string {
    return this.#dir;
  }

  /** Removes the watch's directory with all it holds; a second call does nothing. */
  async close(): Promise<void> {
    await Deno.remove(this.#dir, { recursive: true }).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
  }

  /** Environment for the program: the shim first on PATH (legacy); nothing for nf_tables. */
  async env(): Promise<Record<string, string>> {
    if (this.#backend !== "legacy") return {};
    const real = (await sh("sh", ["-c", "command -v iptables-legacy-restore"])).out.trim();
    await Deno.writeTextFile(
      `${this.#dir}/iptables-legacy-restore`,
      `#!/bin/sh
f=$(mktemp -p ${this.#dir} restore.XXXXXX)
cat > "$f"
${real} "$@" < "$f"
rc=$?
if [ $rc -eq 0 ]; then echo "$(date +%s%N) $f" >> ${this.#dir}/committed; else rm -f "$f"; fi
exit $rc
`,
      { mode: 0o755 },
    );
    return { PATH: `${this.#dir}:${Deno.env.get("PATH")}` };
  }

  /** Resolves with the wall-clock time (ms) `chain` reached the kernel, or undefined after `timeoutMs`. */
  async appeared(chain: string, timeoutMs: number): Promise<number | undefined> {
    for (const end = performance.now() + timeoutMs; performance.now() < end;) {
      if (this.#backend === "nft") {
        const r = await sh("iptables-nft", ["-w", "5", "-t", "nat", "-S", chain, "1"]);
        if (r.code === 0) return Date.now();
      } else {
        const found = await this.#committedWith(`:${chain} `);
        if (found !== undefined) return found;
      }
      await sleep(25);
    }
    return undefined;
  }

  async #readLog(): Promise<void> {
    let log = "";
    try {
      log = await Deno.readTextFile(`${this.#dir}/committed`);
    } catch { /* nothing committed yet */ }
    const lines = log.split("\n").filter((l) => l !== "");
    for (; this.#read < lines.length; this.#read++) {
      const [ns, file] = lines[this.#read].split(" ");
      this.#committed.push({ atMs: Number(BigInt(ns) / 1_000_000n), file });
    }
  }

  async #committedWith(decl: string): Promise<number | undefined> {
    await this.#readLog();
    for (const c of this.#committed) {
      if ((await Deno.readTextFile(c.file)).includes(decl)) return c.atMs;
    }
    return undefined;
  }

  /** Forgets every restore committed so far (each change looks only at later ones). */
  async forget(): Promise<void> {
    await this.#readLog();
    for (const c of this.#committed.splice(0)) await Deno.remove(c.file).catch(() => {});
  }
}
