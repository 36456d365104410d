import { assert, assertEquals } from "../support/assert.ts";

/**
 * Every `node:` built-in the program could load: an import of any of them loads Deno's Node
 * compatibility layer, about 9 MiB of resident memory on every node (the program's floor was 51
 * MiB with `node:net` and `node:process`, 44 without). Type-only imports are not loaded.
 */
async function nodeBuiltins(entry: string): Promise<string[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", new URL(entry, import.meta.url).pathname],
    stderr: "inherit",
  }).output();
  const graph = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: Array<{ specifier: string; dependencies?: Array<{ specifier: string; code?: unknown }> }>;
  };
  assert(graph.modules.length > 1, `deno info ${entry} found the module graph`);
  return graph.modules.flatMap((m) =>
    (m.dependencies ?? []).filter((d) => d.specifier.startsWith("node:") && d.code !== undefined)
      .map((d) => `${m.specifier.replace(new URL("../..", import.meta.url).href, "")} imports ${d.specifier}`)
  );
}

Deno.test("module graph: the program and its TCP worker load no node: built-in (each costs the Node layer)", async () => {
  // Dynamic imports with literal specifiers (each mode's proxier and tracer) are in the graph too.
  assertEquals(await nodeBuiltins("../../main.ts"), []);
  assertEquals(await nodeBuiltins("../../proxier/userspace/tcp_worker.ts"), []);
  assertEquals(await nodeBuiltins("../../proxier/read_side/datapath_worker.ts"), []);
});

/** Every product module's imports, by repository path: `code` (loaded) or `type` (type-only). */
async function productImports(): Promise<Map<string, Array<{ to: string; code: boolean }>>> {
  const root = new URL("../..", import.meta.url).href;
  const graph = new Map<string, Array<{ to: string; code: boolean }>>();
  // main.ts reaches every command and mode (their dynamic imports have literal specifiers); mod.ts
  // every kernel tool.
  for (
    const entry of [
      "main.ts",
      "proxier/userspace/tcp_worker.ts",
      "proxier/read_side/datapath_worker.ts",
      "iptables/mod.ts",
    ]
  ) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", new URL(`../../${entry}`, import.meta.url).pathname],
      stderr: "inherit",
    }).output();
    const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
      modules: Array<{
        specifier: string;
        dependencies?: Array<{ code?: { specifier?: string }; type?: { specifier?: string } }>;
      }>;
    };
    for (const m of info.modules) {
      if (!m.specifier.startsWith(root)) continue;
      graph.set(
        m.specifier.slice(root.length),
        (m.dependencies ?? []).flatMap((d) => {
          const to = d.code?.specifier ?? d.type?.specifier;
          return to?.startsWith(root) ? [{ to: to.slice(root.length), code: d.code !== undefined }] : [];
        }),
      );
    }
  }
  return graph;
}

const MODES = ["iptables", "nftables", "ipvs", "userspace"];
/** The model: what a Service and its endpoints are, what changed; it knows no mode, tool or command. */
const MODEL = "proxier/model/";
/**
 * What the model may import besides itself: the sinks it speaks through (logging, Events), the
 * errors, the configuration's types, IP parsing (the metrics it updates it declares itself).
 */
const MODEL_MAY_IMPORT = [
  "proxier/runtime/logger.ts",
  "proxier/runtime/events.ts",
  "proxier/runtime/errors.ts",
  "proxier/options/config.ts",
  "iptables/ip.ts",
];
/** The hub and what sits above the sources: the sources feed them and must not import them. */
const ABOVE_SOURCES = [
  "proxier/base_proxier.ts",
  "proxier/node_manager.ts",
  "proxier/drift.ts",
  "proxier/meta_proxier.ts",
  "proxier/mode_definition.ts",
  "proxier/modes.ts",
];

/** What the mode contract may import of the options: the configuration and the feature gates, not the command line. */
const MODE_CONTRACT_MAY_IMPORT = [
  "proxier/options/config.ts",
  "proxier/options/feature_gates.ts",
  "proxier/options/feature_gate_list.ts",
];

/** The floors of the commands, top down: the command line, the registry, the commands, their shared read side. */
const CLI = "proxier/cli/";
const REGISTRY = "proxier/commands.ts";
const COMMANDS = "proxier/commands/";
const READ_SIDE = "proxier/read_side/";

/** The command folder `f` belongs to (`proxier/commands/explain/`), if any. */
const commandOf = (f: string) => /^proxier\/commands\/[^/]+\//.exec(f)?.[0];

/** Product files (not tests, benches, fakes or the demo), as `git ls-files` lists them. */
function productFiles(): string[] {
  const out = new Deno.Command("git", { args: ["ls-files", "*.ts"], cwd: new URL("../..", import.meta.url) })
    .outputSync();
  return new TextDecoder().decode(out.stdout).split("\n").filter((f) =>
    f !== "" && !/(^|\/)(tests|bench|testing|demo)\//.test(f) && !f.endsWith("_test.ts")
  );
}

/** Every file-level import cycle of `graph` (type imports count), each as its files, sorted. */
export function importCycles(graph: ReadonlyMap<string, ReadonlyArray<{ to: string }>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    on.add(v);
    for (const { to } of graph.get(v) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(v, Math.min(low.get(v)!, low.get(to)!));
      } else if (on.has(to)) low.set(v, Math.min(low.get(v)!, index.get(to)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const c: string[] = [];
    for (let w = ""; w !== v;) {
      w = stack.pop()!;
      on.delete(w);
      c.push(w);
    }
    if (c.length > 1) cycles.push(c.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

/**
 * The folder a file belongs to for the folder-level cycle rule: each `proxier/<dir>/` one node, each
 * `proxier/commands/<name>/` its own, each file at `proxier/`'s root its own, each other top-level
 * folder one node (as denoland/std checks package cycles over the same module graph).
 */
export function folderOf(f: string): string {
  const p = f.split("/");
  if (p[0] !== "proxier") return p.length > 1 ? `${p[0]}/` : f;
  if (p.length === 2) return f;
  if (p[1] === "commands" && p.length > 3) return `${p.slice(0, 3).join("/")}/`;
  return `${p.slice(0, 2).join("/")}/`;
}

/** Every folder-level import cycle of `graph` (type imports count), each as its folders, sorted. */
export function folderCycles(graph: ReadonlyMap<string, ReadonlyArray<{ to: string }>>): string[][] {
  const folders = new Map<string, Array<{ to: string }>>();
  for (const [from, deps] of graph) {
    const edges = folders.get(folderOf(from)) ?? [];
    folders.set(folderOf(from), edges);
    for (const { to } of deps) if (folderOf(to) !== folderOf(from)) edges.push({ to: folderOf(to) });
  }
  return importCycles(folders);
}

/** Returns each edge of `graph` that breaks a floor rule, with the rule; see the tests below. */
export function floorViolations(
  graph: ReadonlyMap<string, ReadonlyArray<{ to: string; code: boolean }>>,
): string[] {
  const wrong: string[] = [];
  const modeOf = (f: string) => MODES.find((m) => f.startsWith(`proxier/${m}/`));
  for (const [from, deps] of graph) {
    for (const { to, code } of deps) {
      const why = (rule: string) => wrong.push(`${from} -> ${to}: ${rule}`);
      if (modeOf(from) !== undefined && modeOf(to) !== undefined && modeOf(from) !== modeOf(to)) {
        why("a mode imports another mode");
      }
      if (from.startsWith("iptables/") && to.startsWith("proxier/") && code) {
        why("the kernel-tool layer imports nothing from proxier/ but plain types");
      }
      if (to.includes("/testing/") && !from.includes("/testing/")) why("product code imports a fake");
      if (from.startsWith(MODEL) && !to.startsWith(MODEL) && !MODEL_MAY_IMPORT.includes(to)) {
        why(
          "the model imports only the model, logging, Events and metrics types, the configuration types and IP parsing",
        );
      }
      if (
        from.startsWith("proxier/sources/") &&
        (ABOVE_SOURCES.includes(to) || to.startsWith(COMMANDS) || to.startsWith(READ_SIDE))
      ) why("a source imports the hub");
      if (
        from === "proxier/mode_definition.ts" &&
        (to.startsWith("proxier/options/") && !MODE_CONTRACT_MAY_IMPORT.includes(to))
      ) why("the mode contract imports the command line");
      if (from.startsWith("proxier/runtime/") && to.startsWith("proxier/options/")) {
        why("runtime imports nothing from the configuration");
      }
      const folder = commandOf(to);
      // The registry lists each command's definition; nothing else crosses into a command's folder.
      const listed = from === REGISTRY && to === `${folder}command.ts`;
      if (folder !== undefined && commandOf(from) !== folder && !listed) {
        why(
          from === REGISTRY
            ? "the registry imports a command's definition only"
            : from.startsWith("proxier/options/") || from.startsWith("proxier/runtime/")
            ? "configuration and runtime import no command"
            : to.endsWith("/command.ts")
            ? "only the registry imports a command definition"
            : "a command's files are its own: nothing outside its folder imports them",
        );
      }
      if (to === REGISTRY && from !== "main.ts" && !from.startsWith(CLI)) {
        why("only the command line imports the command registry");
      }
      if (to.startsWith(READ_SIDE) && !from.startsWith(READ_SIDE) && commandOf(from) === undefined) {
        why("only the commands import the read side (it sits below them, above the contracts)");
      }
      if (to.startsWith(CLI) && from !== "main.ts" && !from.startsWith(CLI)) {
        why("only main.ts reads the command line");
      }
    }
  }
  for (const c of importCycles(graph)) wrong.push(`import cycle: ${c.join(" ")}`);
  for (const c of folderCycles(graph)) wrong.push(`folder cycle: ${c.join(" ")}`);
  return wrong;
}

/**
 * Returns each place in `files` (path -> text) outside the modes' folders and the configuration
 * (`proxier/options/`) that compares a mode's name: a mode says what it is through its definition.
 */
export function modeNameComparisons(files: ReadonlyMap<string, string>): string[] {
  const name = `"(?:${MODES.join("|")})"`;
  const compared = new RegExp(`(?:[!=]==\\s*${name}|${name}\\s*[!=]==|case\\s+${name}\\s*:)`);
  const out: string[] = [];
  for (const [path, text] of files) {
    if (MODES.some((m) => path.startsWith(`proxier/${m}/`)) || path.startsWith("proxier/options/")) continue;
    text.split("\n").forEach((line, i) => {
      if (compared.test(line)) out.push(`${path}:${i + 1}: ${line.trim()}`);
    });
  }
  return out;
}

Deno.test("module graph: imports follow the floors (no file or folder cycle, no mode imports another, the command line over the registry over the commands over the read side over the modes, a command's files its own, the kernel layer, the model and the runtime import nothing above them, sources nothing of the hub)", async () => {
  const graph = await productImports();
  assertEquals(floorViolations(graph), []);
  // The rules are only as good as the graph: it holds every mode, every command (loaded when it
  // runs: dynamic imports with literal specifiers are in the graph) and the layers.
  for (
    const f of [
      "proxier/iptables/proxier.ts",
      "proxier/nftables/trace.ts",
      "proxier/ipvs/proxier.ts",
      "proxier/commands/explain/explain.ts",
      "proxier/commands/trace/trace.ts",
      "proxier/commands/migrate/migrate.ts",
      "proxier/commands/render/render.ts",
      "proxier/commands/proxy/proxy_server.ts",
      "proxier/read_side/report.ts",
      "proxier/cli/command_line.ts",
      "proxier/model/topology.ts",
      "proxier/model/types.ts",
    ]
  ) {
    assertEquals(graph.has(f), true, `${f} is in the graph`);
  }
});

Deno.test("module graph: no mode name is compared outside the modes and the configuration", () => {
  const root = new URL("../../", import.meta.url);
  const files = new Map(productFiles().map((f) => [f, Deno.readTextFileSync(new URL(f, root))]));
  assert(files.has("main.ts") && files.has("proxier/read_side/expectation.ts"), "the files are read");
  assertEquals(modeNameComparisons(files), []);
});

Deno.test("module graph: each floor rule fails when broken", () => {
  const edge = (from: string, to: string, code = true) =>
    floorViolations(new Map([[from, [{ to, code }]], [to, []]]));
  const said = (wrong: string[], rule: string) =>
    assert(wrong.some((w) => w.includes(rule)), wrong.join("; ") || "nothing said");
  said(edge("proxier/options/config.ts", "proxier/commands/explain/explain.ts"), "configuration and runtime");
  said(edge("proxier/runtime/logger.ts", "proxier/commands/trace/trace.ts"), "configuration and runtime");
  said(
    edge("proxier/runtime/kernel_tools.ts", "proxier/options/config.ts", false),
    "runtime imports nothing",
  );
  said(edge("proxier/base_proxier.ts", "proxier/commands/explain/format.ts"), "nothing outside its folder");
  said(edge("proxier/commands/migrate/migrate.ts", "proxier/commands/explain/format.ts"), "its own");
  said(edge("proxier/cli/usage.ts", "proxier/commands/explain/command.ts"), "only the registry imports");
  said(edge("proxier/commands.ts", "proxier/commands/explain/explain.ts"), "definition only");
  said(
    edge("proxier/commands/proxy/proxy_server.ts", "proxier/commands.ts"),
    "only the command line imports",
  );
  said(edge("proxier/base_proxier.ts", "proxier/read_side/report.ts", false), "only the commands import");
  said(edge("proxier/nftables/proxier.ts", "proxier/read_side/render.ts"), "only the commands import");
  said(edge("proxier/commands/render/render.ts", "proxier/cli/command_line.ts"), "only main.ts reads");
  said(edge("proxier/nftables/proxier.ts", "proxier/iptables/rules.ts"), "another mode");
  said(edge("proxier/model/topology.ts", "proxier/nftables/layout.ts"), "the model imports only");
  said(edge("proxier/sources/file.ts", "proxier/base_proxier.ts"), "a source imports the hub");
  said(edge("proxier/sources/file.ts", "proxier/read_side/render.ts"), "a source imports the hub");
  said(edge("iptables/nft.ts", "proxier/model/net.ts"), "kernel-tool layer");
  said(edge("proxier/mode_definition.ts", "proxier/options/flag_table.ts"), "mode contract");
  said(
    floorViolations(
      new Map([
        ["proxier/trace/packet.ts", [{ to: "proxier/trace/nft_walker.ts", code: false }]],
        ["proxier/trace/nft_walker.ts", [{ to: "proxier/trace/packet.ts", code: false }]],
      ]),
    ),
    "import cycle: proxier/trace/nft_walker.ts proxier/trace/packet.ts",
  );
  // Files that form no cycle can still make their folders one: model -> runtime -> model.
  const folders = floorViolations(
    new Map([
      ["proxier/model/object_warnings.ts", [{ to: "proxier/runtime/logger.ts", code: false }]],
      ["proxier/runtime/logger.ts", []],
      ["proxier/runtime/events.ts", [{ to: "proxier/model/errors.ts", code: true }]],
      ["proxier/model/errors.ts", []],
    ]),
  );
  said(folders, "folder cycle: proxier/model/ proxier/runtime/");
  assertEquals(folders.filter((w) => w.startsWith("import cycle")), []);
  assertEquals(
    [
      "proxier/commands/explain/format.ts",
      "proxier/base_proxier.ts",
      "proxier/trace/packet.ts",
      "iptables/nft.ts",
    ]
      .map(folderOf),
    ["proxier/commands/explain/", "proxier/base_proxier.ts", "proxier/trace/", "iptables/"],
  );
  // What is allowed stays allowed.
  assertEquals(edge("proxier/commands.ts", "proxier/commands/explain/command.ts"), []);
  assertEquals(edge("proxier/cli/command_line.ts", "proxier/commands.ts"), []);
  assertEquals(edge("main.ts", "proxier/cli/command_line.ts"), []);
  assertEquals(edge("proxier/commands/explain/command.ts", "proxier/commands/explain/explain.ts"), []);
  assertEquals(edge("proxier/commands/explain/explain.ts", "proxier/read_side/report.ts"), []);
  assertEquals(edge("proxier/commands/proxy/debug_services.ts", "proxier/read_side/report.ts"), []);
  assertEquals(edge("proxier/read_side/report.ts", "proxier/family_view.ts", false), []);
  const compared = modeNameComparisons(
    new Map([
      ["proxier/read_side/expectation.ts", 'if (mode === "ipvs") return;\nconst x = "nftables";'],
      ["main.ts", 'switch (m) {\n  case "userspace":\n}'],
      ["proxier/ipvs/mode.ts", 'if (mode === "ipvs") return;'],
      ["proxier/options/validation.ts", 'if (c.mode === "nftables") bit();'],
    ]),
  );
  assertEquals(compared, [
    'proxier/read_side/expectation.ts:1: if (mode === "ipvs") return;',
    'main.ts:2: case "userspace":',
  ]);
});

Deno.test("module graph: unit tests import test support, never the end-to-end harness", () => {
  const root = new URL("../../", import.meta.url);
  const files = new Deno.Command("git", { args: ["ls-files", "*_test.ts"], cwd: root }).outputSync();
  const wrong: string[] = [];
  for (const f of new TextDecoder().decode(files.stdout).split("\n").filter((f) => f !== "")) {
    // The harness's own tests, the fault schedule and the VM tests run the real program end to end.
    if (/^tests\/(e2e|faults|vm)\//.test(f)) continue;
    const text = Deno.readTextFileSync(new URL(f, root));
    if (/from "[^"]*tests\/e2e\/|from "(\.\.\/)+e2e\//.test(text)) wrong.push(f);
  }
  assertEquals(wrong, []);
});
