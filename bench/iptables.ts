/**
 * iptables mode at scale: `deno run -A bench/iptables.ts SERVICES [KERNEL_TIMEOUT_S]` builds the
 * full rule set for SERVICES services x 10 endpoints (one generator for every size), times a
 * partial sync after one endpoint change, optionally loads the full input into a fresh network
 * namespace with iptables-restore, and prints one JSON line of figures.
 * @module
 */
import { DryRunExecutor } from "../iptables/dry_run.ts";
import { inputText } from "../iptables/executor.ts";
import {
  type IPTables,
  type IptablesBackendName,
  IptablesRunner,
  type RestoreInput,
  type RestoreOptions,
} from "../iptables/iptables.ts";
import { DenoExecutor } from "../iptables/executor.ts";
import { IptablesProxier } from "../proxier/iptables/proxier.ts";
import { newModeDeps, proxierOptions } from "../proxier/mode_definition.ts";
import { iptablesMode } from "../proxier/iptables/mode.ts";
import { realClock } from "../proxier/runtime/clock.ts";
import { nullLogger } from "../proxier/runtime/logger.ts";
import { benchConfig, feedGenerated, peakRssMiB, slice } from "./objects.ts";

/** Keeps the last restore input and applies nothing: the proxier's own work is what is timed. */
class NullIPTables implements IPTables {
  readonly family = "IPv4" as const;
  last = "";
  save(): Promise<string> {
    return Promise.resolve("");
  }
  tables(): Promise<ReadonlySet<"nat">> {
    return Promise.resolve(new Set());
  }
  restoreAll(input: RestoreInput, _opts: RestoreOptions): Promise<void> {
    this.last = inputText(input);
    return Promise.resolve();
  }
  ensureChain(): Promise<boolean> {
    return Promise.resolve(true);
  }
  listRules(): Promise<string[]> {
    return Promise.resolve([]);
  }
  ensureRule(): Promise<boolean> {
    return Promise.resolve(true);
  }
  deleteRule(): Promise<void> {
    return Promise.resolve();
  }
  chainExists(): Promise<boolean> {
    return Promise.resolve(true);
  }
  existingChains(): Promise<string[]> {
    return Promise.resolve([]);
  }
  deleteChain(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * Returns the time (ms, median of 5) of the kernel reads the iptables mode's thorough drift check
 * makes (the mangle canary, the jumps of the six built-in chains, nat KUBE-SERVICES) in `ns`.
 */
async function driftCheckMs(ns: string, backend: IptablesBackendName): Promise<number> {
  const ipt = new IptablesRunner({
    exec: {
      run: (cmd, o) => new DenoExecutor().run("ip", { ...o, args: ["netns", "exec", ns, cmd, ...o.args] }),
    },
    family: "IPv4",
    backend,
  });
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    await ipt.chainExists("mangle", "KUBE-PROXY-CANARY");
    for (
      const [table, chain] of [["nat", "PREROUTING"], ["nat", "OUTPUT"], ["nat", "POSTROUTING"]] as const
    ) {
      await ipt.listRules(table, chain);
    }
    for (const chain of ["INPUT", "FORWARD", "OUTPUT"]) await ipt.listRules("filter", chain);
    await ipt.listRules("nat", "KUBE-SERVICES");
    times.push(performance.now() - t);
  }
  return Math.round(times.sort((a, b) => a - b)[2]);
}

/** The drift check's cost after each backend's kernel restore. */
const driftMs: Record<string, number | string> = { nft: "not run", legacy: "not run" };

async function kernelRestore(text: string, timeoutS: number, tool: string): Promise<number | string> {
  if (Deno.uid() !== 0) return "skipped (not root)";
  const ns = `kpdbench-${crypto.randomUUID().slice(0, 8)}`;
  const run = (args: string[]) => new Deno.Command("ip", { args, stdout: "null", stderr: "piped" }).output();
  await run(["netns", "add", ns]);
  try {
    const child = new Deno.Command("ip", {
      args: ["netns", "exec", ns, tool, "--noflush", "-w", "5"],
      stdin: "piped",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const start = performance.now();
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutS * 1000);
    const w = child.stdin.getWriter();
    // A killed restore closes its stdin: the write then fails, and the exit status tells why.
    await w.write(new TextEncoder().encode(text)).catch(() => {});
    await w.close().catch(() => {});
    const out = await child.output();
    clearTimeout(timer);
    const secs = (performance.now() - start) / 1000;
    if (out.signal === "SIGKILL") return `> ${timeoutS} s (stopped)`;
    if (out.code !== 0) return `failed: ${new TextDecoder().decode(out.stderr).trim()}`;
    const backend = tool === "iptables-restore" ? "nft" : "legacy";
    driftMs[backend] = await driftCheckMs(ns, backend);
    return secs;
  } finally {
    await run(["netns", "del", ns]);
  }
}

if (import.meta.main) {
  const n = Number(Deno.args[0] ?? "1000");
  const kernelTimeout = Number(Deno.args[1] ?? "0");
  const ipt = new NullIPTables();
  const config = benchConfig({ syncPeriodMs: 3_600_000, clusterCIDRs: ["10.0.0.0/8"] });
  const deps = newModeDeps(config, {
    nodeName: "node-a",
    log: nullLogger,
    clock: realClock,
    exec: new DryRunExecutor(),
  });
  const p = new IptablesProxier({
    ...proxierOptions(deps, "IPv4", iptablesMode.schedulers(deps.config)),
    iptables: ipt,
    masqueradeAll: false,
    masqueradeBit: 14,
    nodePortAddresses: [],
    localhostNodePorts: true,
    nodeIPs: [],
  });
  const eventsMs = feedGenerated(p, n);
  let t = performance.now();
  await p.syncNow();
  const fullMs = performance.now() - t;
  const full = ipt.last;
  const lines = full.split("\n").length - 1;
  // Partial syncs: one endpoint change each; the median of 5 is reported.
  const partials: number[] = [];
  let partialLines = 0;
  for (let g = 1; g <= 5; g++) {
    const i = Math.floor(n / 2) + g;
    p.onEndpointSliceUpdate(slice(`svc-${i}`, i, 0), slice(`svc-${i}`, i, g));
    t = performance.now();
    await p.syncNow();
    partials.push(performance.now() - t);
    partialLines = ipt.last.split("\n").length - 1;
  }
  partials.sort((a, b) => a - b);
  const kernel = kernelTimeout > 0 ? await kernelRestore(full, kernelTimeout, "iptables-restore") : "not run";
  const legacy = kernelTimeout > 0
    ? await kernelRestore(full, kernelTimeout, "iptables-legacy-restore")
    : "not run";
  console.log(JSON.stringify({
    services: n,
    endpoints: n * 10,
    eventsMs: Math.round(eventsMs),
    buildMs: Math.round(fullMs),
    lines,
    bytes: full.length,
    partialMs: Number(partials[2].toFixed(1)),
    partialLines,
    kernelRestoreS: typeof kernel === "number" ? Number(kernel.toFixed(2)) : kernel,
    legacyRestoreS: typeof legacy === "number" ? Number(legacy.toFixed(2)) : legacy,
    driftCheckMs: driftMs.nft,
    legacyDriftCheckMs: driftMs.legacy,
    peakRssMiB: Math.round(peakRssMiB()),
  }));
}
