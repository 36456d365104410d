/**
 * The house's rules that are not imports: a command's name is said only in its own folder and the
 * registry; the `proxier/` root holds few files; every product file stays under its size budget.
 * Each rule is shown failing when broken.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { COMMAND_NAMES } from "../../proxier/commands.ts";

const ROOT = new URL("../../", import.meta.url);

/** Product files (not tests, benches, fakes or the demo), as `git ls-files` lists them. */
function productFiles(): string[] {
  const out = new Deno.Command("git", { args: ["ls-files", "*.ts"], cwd: ROOT }).outputSync();
  return new TextDecoder().decode(out.stdout).split("\n").filter((f) =>
    f !== "" && !/(^|\/)(tests|bench|testing|demo)\//.test(f) && !f.endsWith("_test.ts") &&
    // A file staged for deletion is listed until the commit; only what is there counts.
    exists(f)
  );
}

function exists(f: string): boolean {
  try {
    return Deno.statSync(new URL(f, ROOT)).isFile;
  } catch {
    return false;
  }
}

/**
 * Returns each code line (not a comment) of `files` outside `proxier/commands/` and the registry that
 * holds one of `names` as a string literal: a command is named in its folder and the registry only,
 * so a new command is one folder plus one registry line.
 */
export function commandNameLiterals(files: ReadonlyMap<string, string>, names: readonly string[]): string[] {
  const literal = new RegExp(`(["'\`])(?:${names.join("|")})\\1`);
  const out: string[] = [];
  for (const [path, text] of files) {
    if (path.startsWith("proxier/commands/") || path === "proxier/commands.ts") continue;
    text.split("\n").forEach((line, i) => {
      const code = line.trim();
      if (code.startsWith("*") || code.startsWith("/*") || code.startsWith("//")) return;
      if (literal.test(code.replace(/\/\/.*$/, ""))) out.push(`${path}:${i + 1}: ${code}`);
    });
  }
  return out;
}

/** The floors that end in exit codes: the command line, the command contract and registry, the commands, the read side. */
const EXIT_FLOORS = /^proxier\/(cli\/|commands\/|read_side\/|command_definition\.ts$|commands\.ts$)/;

/**
 * Returns each literal exit code in `files` outside `main.ts`: a `Deno.exit` anywhere, and on the
 * floors that end in exit codes a `return N;`, `exit: N` or `code: N` (they use the contract's
 * `EXIT` table; a command fails by throwing `CommandFailure`). The `EXIT` table itself is the one
 * place the numbers are written.
 */
export function literalExits(files: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const [path, text] of files) {
    if (path === "main.ts") continue;
    text.split("\n").forEach((line, i) => {
      const code = line.trim();
      if (code.startsWith("*") || code.startsWith("//")) return;
      const literal = /\bDeno\.exit\(/.test(code) ||
        (EXIT_FLOORS.test(path) && /\breturn\s+\d+\s*;|\b(exit|code)\s*:\s*\d+\b/.test(code) &&
          !/^\w+: \d+ as ExitCode,$/.test(code));
      if (literal) out.push(`${path}:${i + 1}: ${code}`);
    });
  }
  return out;
}

/** The daemon's functions stay short: the proxy is phases, each a file, none a long function. */
export const PROXY_FUNCTION_MAX = 80;

/**
 * Returns each top-level function of `files` under `proxier/commands/proxy/` longer than
 * {@linkcode PROXY_FUNCTION_MAX} lines (from its declaration to its closing brace at column 0).
 */
export function longProxyFunctions(files: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const [path, text] of files) {
    if (!path.startsWith("proxier/commands/proxy/")) continue;
    const lines = text.split("\n");
    lines.forEach((line, i) => {
      const m = /^(?:export )?(?:async )?function\*? ?(\w+)/.exec(line);
      if (m === null) return;
      const end = lines.findIndex((l, j) => j > i && l === "}");
      const length = (end < 0 ? lines.length : end) - i + 1;
      if (length > PROXY_FUNCTION_MAX) out.push(`${path}:${i + 1}: ${m[1]} is ${length} lines`);
    });
  }
  return out;
}

/** At most this many product files in the `proxier/` root: the hub, the registries, the contracts. */
export const ROOT_FILES_MAX = 16;

/** Returns the product files directly in `proxier/` when there are more than {@linkcode ROOT_FILES_MAX}. */
export function crowdedRoot(files: readonly string[]): string[] {
  const root = files.filter((f) => /^proxier\/[^/]+\.ts$/.test(f));
  return root.length > ROOT_FILES_MAX ? root : [];
}

/** A product file's size limit, in lines, unless {@linkcode BUDGETS} gives it one of its own. */
export const DEFAULT_BUDGET = 400;
/** No budget goes above this. */
export const MAX_BUDGET = 450;
/** The one file exempt: the table of every upstream flag, one entry each. */
const EXEMPT = ["proxier/options/flag_table.ts"];

/** A budget more than this many lines above its file's size is too loose: growth would pass unseen. */
export const BUDGET_SLACK = 3;

/**
 * Files allowed more than {@linkcode DEFAULT_BUDGET} lines, each with its own budget: its size, so
 * any growth is a visible edit of this list, with the reason beside it. A file that shrank leaves
 * the list or lowers its budget (a budget more than {@linkcode BUDGET_SLACK} lines above the file
 * fails).
 */
export const BUDGETS: Readonly<Record<string, number>> = {
  // The hub: intake, sync orchestration and the post-sync step of every mode; a change cuts a drift
  // check short, where a periodic sync lets it end.
  "proxier/base_proxier.ts": 437,
  // The ipvs proxier: virtual servers, ipsets and kube-ipvs0 in one sync.
  "proxier/ipvs/proxier.ts": 434,
  // Upstream's KubeProxyConfiguration: every field's type, default and platform default.
  "proxier/options/kube_proxy_configuration.ts": 427,
  // The iptables proxier: the partial sync's chain bookkeeping; the drift check names another writer
  // and stops when a sync is asked for.
  "proxier/iptables/proxier.ts": 427,
  // The iptables rules of every kind of service port.
  "proxier/iptables/rules.ts": 405,
  // The iptables interpreter: every match and target the modes write.
  "proxier/trace/iptables_walker.ts": 410,
  // The nft interpreter: every expression the nftables mode writes.
  "proxier/trace/nft_walker.ts": 401,
  // nft's ruleset model, read back into rules and elements (with their comments: a writer's identity).
};

/** Returns each file of `sizes` (path -> lines) over its budget, and each budget that is wrong. */
export function overBudget(
  sizes: ReadonlyMap<string, number>,
  budgets: Readonly<Record<string, number>> = BUDGETS,
): string[] {
  const out: string[] = [];
  for (const [path, lines] of sizes) {
    if (EXEMPT.includes(path)) continue;
    const budget = budgets[path] ?? DEFAULT_BUDGET;
    if (lines > budget) out.push(`${path}: ${lines} lines, over its budget of ${budget}`);
  }
  for (const [path, budget] of Object.entries(budgets)) {
    if (budget > MAX_BUDGET) out.push(`${path}: a budget of ${budget} is over ${MAX_BUDGET}`);
    const lines = sizes.get(path);
    if (lines === undefined) out.push(`${path}: a budget for a file that does not exist`);
    else if (lines <= DEFAULT_BUDGET) out.push(`${path}: ${lines} lines fit the default; its budget goes`);
    else if (budget > lines + BUDGET_SLACK) {
      out.push(
        `${path}: a budget of ${budget} is too loose for ${lines} lines (at most ${lines + BUDGET_SLACK})`,
      );
    }
  }
  return out;
}

Deno.test("house: a command is named only in its own folder and the registry", () => {
  const files = new Map(productFiles().map((f) => [f, Deno.readTextFileSync(new URL(f, ROOT))]));
  assert(files.has("main.ts") && files.has("proxier/cli/command_line.ts"), "the files are read");
  assertEquals(commandNameLiterals(files, COMMAND_NAMES), []);
});

Deno.test("house: no literal exit code outside main.ts (the contract's EXIT table, failures thrown)", () => {
  const files = new Map(productFiles().map((f) => [f, Deno.readTextFileSync(new URL(f, ROOT))]));
  assert(files.has("proxier/commands/explain/explain.ts"), "the files are read");
  assertEquals(literalExits(files), []);
});

Deno.test("house: no function of the proxy (commands/proxy/) is over 80 lines", () => {
  const files = new Map(productFiles().map((f) => [f, Deno.readTextFileSync(new URL(f, ROOT))]));
  assert(files.has("proxier/commands/proxy/run.ts"), "the files are read");
  assertEquals(longProxyFunctions(files), []);
});

Deno.test("house: the proxier/ root holds at most 16 product files", () => {
  const files = productFiles();
  assert(files.includes("proxier/base_proxier.ts"), "the files are listed");
  assertEquals(crowdedRoot(files), []);
});

Deno.test("house: every product file is within its size budget (400 lines unless listed, each budget its file's size, none over 450)", () => {
  const sizes = new Map(
    productFiles().map((f) => [f, Deno.readTextFileSync(new URL(f, ROOT)).split("\n").length - 1]),
  );
  assert(sizes.size > 100, "the files are read");
  assertEquals(overBudget(sizes), []);
});

Deno.test("house: each rule fails when broken", () => {
  assertEquals(
    commandNameLiterals(
      new Map([
        ["main.ts", 'if (name === "explain") run();\n// "explain" in a comment is prose'],
        ["proxier/cli/usage.ts", " * `trace` in a doc comment"],
        ["proxier/options/flag_table.ts", 'commands: ["migrate"],'],
        ["proxier/commands/explain/command.ts", 'name: "explain",'],
        ["proxier/commands.ts", 'COMMAND_NAMES = ["proxy", "explain"]'],
      ]),
      ["proxy", "explain", "trace", "migrate", "render"],
    ),
    ['main.ts:1: if (name === "explain") run();', 'proxier/options/flag_table.ts:1: commands: ["migrate"],'],
  );
  assertEquals(
    literalExits(
      new Map([
        ["main.ts", "Deno.exit(code);\n  return 2;"],
        ["proxier/commands/trace/trace.ts", "    return 2;\n  // return 1; in a comment"],
        ["proxier/read_side/render.ts", 'return { error: "x", code: 1 };'],
        ["proxier/commands/proxy/start_checks.ts", "): Promise<{ exit: 1 | 2 }> {\n  return EXIT.usage;"],
        ["proxier/options/duration.ts", 'if (s === "0") return 0;'],
        ["proxier/runtime/gc.ts", "Deno.exit(1);"],
        ["proxier/command_definition.ts", "  usage: 2 as ExitCode,"],
      ]),
    ),
    [
      "proxier/commands/trace/trace.ts:1: return 2;",
      'proxier/read_side/render.ts:1: return { error: "x", code: 1 };',
      "proxier/commands/proxy/start_checks.ts:1: ): Promise<{ exit: 1 | 2 }> {",
      "proxier/runtime/gc.ts:1: Deno.exit(1);",
    ],
  );
  const body = (n: number) => Array.from({ length: n }, () => "  x();").join("\n");
  assertEquals(
    longProxyFunctions(
      new Map([
        [
          "proxier/commands/proxy/run.ts",
          `export async function runProxy() {\n${body(79)}\n}\nfunction ok() {\n}`,
        ],
        ["proxier/commands/proxy/build.ts", `function short() {\n${body(78)}\n}`],
        ["proxier/base_proxier.ts", `function long() {\n${body(200)}\n}`],
      ]),
    ),
    ["proxier/commands/proxy/run.ts:1: runProxy is 81 lines"],
  );
  const seventeen = Array.from({ length: 17 }, (_, i) => `proxier/f${i}.ts`);
  assertEquals(crowdedRoot(seventeen).length, 17);
  assertEquals(crowdedRoot([...seventeen.slice(1), "proxier/model/types.ts"]), []);
  assertEquals(
    overBudget(
      new Map([
        ["proxier/a.ts", 401],
        ["proxier/b.ts", 420],
        ["proxier/c.ts", 300],
        ["proxier/f.ts", 405],
        ["proxier/g.ts", 405],
        ["proxier/options/flag_table.ts", 900],
      ]),
      {
        "proxier/b.ts": 410,
        "proxier/c.ts": 420,
        "proxier/d.ts": 430,
        "proxier/e.ts": 460,
        "proxier/f.ts": 409,
        "proxier/g.ts": 408,
      },
    ),
    [
      "proxier/a.ts: 401 lines, over its budget of 400",
      "proxier/b.ts: 420 lines, over its budget of 410",
      "proxier/c.ts: 300 lines fit the default; its budget goes",
      "proxier/d.ts: a budget for a file that does not exist",
      "proxier/e.ts: a budget of 460 is over 450",
      "proxier/e.ts: a budget for a file that does not exist",
      "proxier/f.ts: a budget of 409 is too loose for 405 lines (at most 408)",
    ],
  );
});
