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
});

/** Every product module's imports, by repository path: `code` (loaded) or `type` (type-only). */
async function productImports(): Promise<Map<string, Array<{ to: string; code: boolean }>>> {
  const root = new URL("../..", import.meta.url).href;
  const graph = new Map<string, Array<{ to: string; code: boolean }>>();
  // main.ts reaches every mode (their dynamic imports have literal specifiers); mod.ts every kernel tool.
  for (const entry of ["main.ts", "proxier/userspace/tcp_worker.ts", "iptables/mod.ts"]) {
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
const MODEL = [
  "types.ts",
  "net.ts",
  "service_port.ts",
  "endpoint.ts",
  "errors.ts",
  "topology.ts",
  "nodeport_addresses.ts",
  "object_warnings.ts",
  "service_change_tracker.ts",
  "endpoints_change_tracker.ts",
  "pending_changes.ts",
].map((f) => `proxier/${f}`);
/**
 * What the model may import besides itself: the sinks it speaks through (logging, Events), metrics
 * types, the configuration's types, IP parsing.
 */
const MODEL_MAY_IMPORT = [
  "proxier/runtime/logger.ts",
  "proxier/runtime/events.ts",
  "proxier/metrics.ts",
  "proxier/options/config.ts",
  "iptables/ip.ts",
];
/** The hub and the commands: the sources feed them and must not import them. */
const ABOVE_SOURCES = [
  "proxier/base_proxier.ts",
  "proxier/node_manager.ts",
  "proxier/drift.ts",
  "proxier/meta_proxier.ts",
  "proxier/mode_definition.ts",
  "proxier/modes.ts",
  "proxier/render.ts",
  "proxier/cleanup.ts",
];

/** What the mode contract may import of the options: the configuration and the feature gates, not the command line. */
const MODE_CONTRACT_MAY_IMPORT = [
  "proxier/options/config.ts",
  "proxier/options/feature_gates.ts",
  "proxier/options/feature_gate_list.ts",
];

Deno.test("module graph: imports follow the data (no mode imports another, the kernel layer and the model import nothing above them, sources nothing of the hub)", async () => {
  const graph = await productImports();
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
      if (MODEL.includes(from) && !MODEL.includes(to) && !MODEL_MAY_IMPORT.includes(to)) {
        why(
          "the model imports only the model, logging, Events and metrics types, the configuration types and IP parsing",
        );
      }
      if (from.startsWith("proxier/sources/") && ABOVE_SOURCES.includes(to)) why("a source imports the hub");
      if (
        from === "proxier/mode_definition.ts" &&
        (to.startsWith("proxier/options/") && !MODE_CONTRACT_MAY_IMPORT.includes(to))
      ) why("the mode contract imports the command line");
    }
  }
  assertEquals(wrong, []);
  // The rules are only as good as the graph: it holds every mode and the layers.
  for (
    const f of [
      "proxier/iptables/proxier.ts",
      "proxier/nftables/trace.ts",
      "proxier/ipvs/proxier.ts",
      ...MODEL,
    ]
  ) {
    assertEquals(graph.has(f), true, `${f} is in the graph`);
  }
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
