/**
 * The resident memory a run starts from, before any object: `deno run -A bench/memory_floor.ts
 * WHAT` prints one JSON line with this process's RSS after importing WHAT, after a full GC:
 * `none`; `program` (the entry point's modules: the command line and the command registry);
 * `proxy` (those and what the running proxy loads: its code, the Kubernetes source's reflectors,
 * the nftables and iptables modes' proxiers); `everything` (those and every command's code, the
 * read side, `--help`'s text: what a start loaded when every command was imported at start). Run with
 * the start task's V8 flags plus --expose-gc.
 * @module
 */
const what = Deno.args[0] ?? "none";
if (what !== "none") await import("../main.ts");
if (what === "proxy" || what === "everything") {
  await import("../proxier/commands/proxy/proxy_server.ts");
  await import("../proxier/sources/kubernetes.ts");
  await import("../proxier/nftables/proxier.ts");
  await import("../proxier/iptables/proxier.ts");
}
if (what === "everything") {
  // Every command's code: the files of each registered command's folder.
  const { COMMAND_NAMES } = await import("../proxier/commands.ts");
  for (const name of COMMAND_NAMES) {
    const dir = new URL(`../proxier/commands/${name}/`, import.meta.url);
    for (const e of Deno.readDirSync(dir)) {
      if (e.name.endsWith(".ts") && !e.name.endsWith("_test.ts")) await import(new URL(e.name, dir).href);
    }
  }
  await import("../proxier/read_side/datapath_workers.ts");
  await import("../proxier/cli/usage.ts");
  await import("../proxier/nftables/trace.ts");
  await import("../proxier/trace/iptables_trace.ts");
}
(globalThis as { gc?: () => void }).gc?.();
const m = /VmRSS:\s+(\d+) kB/.exec(Deno.readTextFileSync("/proc/self/status"));
console.log(JSON.stringify({ what, rssMiB: Math.round(Number(m?.[1]) / 1024) }));
