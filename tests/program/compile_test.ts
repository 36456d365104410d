/**
 * What the program loads, and what its binary holds. A start loads only what the proxy runs (the
 * command line, the registry's light definitions, each mode's definition): every command's code, the
 * read side, the tracers and `--help`'s text are imported when their command runs. `deno task
 * compile` still embeds every module the program can load, the dynamic imports and the two workers
 * included: the test compiles with Deno's own binary as the runtime (this machine cannot download
 * denort; the embedded files are the same) and holds the listing to the module graph.
 */
import { assert, assertEquals } from "../support/assert.ts";

const ROOT = new URL("../..", import.meta.url);

interface Graph {
  readonly modules: Array<{
    specifier: string;
    dependencies?: Array<{ code?: { specifier?: string }; isDynamic?: boolean }>;
  }>;
}

async function graphOf(entry: string): Promise<Graph> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", new URL(entry, ROOT).pathname],
    stderr: "inherit",
  }).output();
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

/** The repository paths of the local modules `entry` reaches, following dynamic imports or not. */
function reach(g: Graph, entry: string, dynamic: boolean): Set<string> {
  const root = ROOT.href;
  const by = new Map(g.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>();
  const todo = [new URL(entry, ROOT).href];
  while (todo.length > 0) {
    const s = todo.pop()!;
    if (seen.has(s) || !s.startsWith(root)) continue;
    seen.add(s);
    for (const d of by.get(s)?.dependencies ?? []) {
      if (d.code?.specifier !== undefined && (dynamic || d.isDynamic !== true)) todo.push(d.code.specifier);
    }
  }
  return new Set([...seen].map((s) => s.slice(root.length)));
}

Deno.test("a start loads only what the proxy runs: no command's code, no read side, no tracer, no --help text", async () => {
  const loaded = reach(await graphOf("main.ts"), "main.ts", false);
  assert(
    loaded.has("proxier/cli/command_line.ts") && loaded.has("proxier/commands.ts"),
    [...loaded].join(" "),
  );
  const heavy = [...loaded].filter((f) =>
    f.startsWith("proxier/read_side/") && f !== "proxier/read_side/flags.ts" ||
    /^proxier\/commands\/[^/]+\//.test(f) && !/\/(command|flags)\.ts$/.test(f) ||
    f.startsWith("proxier/trace/") || /\/(trace|proxier)\.ts$/.test(f) || f === "proxier/cli/usage.ts"
  );
  assertEquals(heavy, []);
});

/** The local files `deno compile` printed it embeds: its tree, `dir/*` standing for a whole folder. */
function embedded(listing: string): { files: Set<string>; folders: string[] } {
  const files = new Set<string>();
  const folders: string[] = [];
  const path: string[] = [];
  let inTree = false;
  for (const line of listing.split("\n")) {
    const m = /^([│ ]*)[├└]─[─┬] (\S+)/.exec(line);
    if (m === null) {
      inTree ||= line.trim() === "Embedded Files";
      continue;
    }
    if (!inTree) continue;
    const depth = m[1].length / 2;
    path.length = depth;
    const name = m[2];
    if (name.startsWith(".deno_compile_node_modules")) {
      path[depth] = "\0"; // npm packages: not the program's files
      continue;
    }
    path[depth] = name;
    if (path.includes("\0")) continue;
    const full = path.slice(0, depth + 1).join("/");
    if (name.endsWith("/*")) folders.push(full.slice(0, -1));
    else if (name.endsWith(".ts")) files.add(full);
  }
  return { files, folders };
}

Deno.test("deno task compile embeds every module the program can load, its dynamic imports and workers included, and nothing else of the repository", async () => {
  const task = JSON.parse(Deno.readTextFileSync(new URL("deno.json", ROOT))).tasks.compile as string;
  const dir = await Deno.makeTempDir({ prefix: "kpd-compile-" });
  try {
    const args = task.split(/\s+/).slice(1).map((a, i, all) => all[i - 1] === "--output" ? `${dir}/kpd` : a);
    const out = await new Deno.Command(Deno.execPath(), {
      args,
      cwd: ROOT,
      env: { DENORT_BIN: Deno.execPath(), NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const listing = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assertEquals(out.code, 0, listing);
    const { files, folders } = embedded(listing);
    const covered = (f: string) => files.has(f) || folders.some((d) => f.startsWith(d));
    const includes = [...task.matchAll(/--include (\S+)/g)].map((m) => m[1]);
    const want = new Set<string>();
    for (const entry of ["main.ts", ...includes]) {
      for (const f of reach(await graphOf(entry), entry, true)) want.add(f);
    }
    assert(
      want.has("proxier/commands/explain/explain.ts") && want.has("proxier/read_side/datapath_worker.ts"),
    );
    assertEquals([...want].filter((f) => !covered(f)).sort(), [], "every module the program can load");
    assertEquals([...files].filter((f) => !want.has(f)).sort(), [], "no file the program cannot load");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the compiled program runs with the V8 flags the start task measured: the same young generation, heap growth and collections", () => {
  const tasks = JSON.parse(Deno.readTextFileSync(new URL("deno.json", ROOT))).tasks;
  const flags = (task: string) => /--v8-flags=(\S+)/.exec(task)?.[1];
  assert(flags(tasks.start)?.includes("--max-semi-space-size="), tasks.start);
  assertEquals(flags(tasks.compile), flags(tasks.start));
});
