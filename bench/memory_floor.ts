/**
 * The resident memory a run starts from, before any object: `deno run -A bench/memory_floor.ts
 * WHAT` prints one JSON line with this process's RSS after importing WHAT (`none`, `program`: the
 * entry point's modules, `informer`: those plus the Kubernetes source's reflectors, as that
 * source loads them), after a full GC. Run with the start task's V8 flags plus --expose-gc.
 * @module
 */
const what = Deno.args[0] ?? "none";
if (what !== "none") await import("../main.ts");
if (what === "informer") await import("../proxier/sources/kubernetes.ts");
(globalThis as { gc?: () => void }).gc?.();
const m = /VmRSS:\s+(\d+) kB/.exec(Deno.readTextFileSync("/proc/self/status"));
console.log(JSON.stringify({ what, rssMiB: Math.round(Number(m?.[1]) / 1024) }));
