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

/**
 * Files allowed more than {@linkcode DEFAULT_BUDGET} lines, each with its own budget. Raising one is
 * a visible line in a commit; a file that shrank below the default leaves the list.
 */
export const BUDGETS: Readonly<Record<string, number>> = {
  "proxier/base_proxier.ts": 450,
  "proxier/sources/file.ts": 450,
  "proxier/ipvs/proxier.ts": 440,
  "proxier/options/kube_proxy_configuration.ts": 430,
  "proxier/iptables/proxier.ts": 430,
  "proxier/iptables/rules.ts": 420,
  "proxier/trace/iptables_walker.ts": 420,
  "proxier/trace/nft_walker.ts": 410,
  "iptables/nft_ruleset.ts": 420,
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
  }
  return out;
}

Deno.test("house: a command is named only in its own folder and the registry", () => {
  const files = new Map(productFiles().map((f) => [f, Deno.readTextFileSync(new URL(f, ROOT))]));
  assert(files.has("main.ts") && files.has("proxier/cli/command_line.ts"), "the files are read");
  assertEquals(commandNameLiterals(files, COMMAND_NAMES), []);
});

Deno.test("house: the proxier/ root holds at most 16 product files", () => {
  const files = productFiles();
  assert(files.includes("proxier/base_proxier.ts"), "the files are listed");
  assertEquals(crowdedRoot(files), []);
});

Deno.test("house: every product file is within its size budget (400 lines unless listed, none over 450)", () => {
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
  const seventeen = Array.from({ length: 17 }, (_, i) => `proxier/f${i}.ts`);
  assertEquals(crowdedRoot(seventeen).length, 17);
  assertEquals(crowdedRoot([...seventeen.slice(1), "proxier/model/types.ts"]), []);
  assertEquals(
    overBudget(
      new Map([
        ["proxier/a.ts", 401],
        ["proxier/b.ts", 420],
        ["proxier/c.ts", 300],
        ["proxier/options/flag_table.ts", 900],
      ]),
      { "proxier/b.ts": 410, "proxier/c.ts": 420, "proxier/d.ts": 430, "proxier/e.ts": 460 },
    ),
    [
      "proxier/a.ts: 401 lines, over its budget of 400",
      "proxier/b.ts: 420 lines, over its budget of 410",
      "proxier/c.ts: 300 lines fit the default; its budget goes",
      "proxier/d.ts: a budget for a file that does not exist",
      "proxier/e.ts: a budget of 460 is over 450",
      "proxier/e.ts: a budget for a file that does not exist",
    ],
  );
});
