import { assertEquals } from "./assert.ts";

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
  return graph.modules.flatMap((m) =>
    (m.dependencies ?? []).filter((d) => d.specifier.startsWith("node:") && d.code !== undefined)
      .map((d) => `${m.specifier.replace(new URL("..", import.meta.url).href, "")} imports ${d.specifier}`)
  );
}

Deno.test("module graph: the program and its TCP worker load no node: built-in (each costs the Node layer)", async () => {
  // Dynamic imports with literal specifiers (each mode's proxier and tracer) are in the graph too.
  assertEquals(await nodeBuiltins("../main.ts"), []);
  assertEquals(await nodeBuiltins("../proxier/userspace/tcp_worker.ts"), []);
});
