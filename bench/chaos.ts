/**
 * The fault schedule as a benchmark (`deno task bench chaos`): {@linkcode benchChaos} runs
 * tests/faults/chaos.ts for one kernel mode, ipvs inside the VM (tests/vm/run.sh: this machine's
 * kernel has no IPVS), where this module is the driver and prints the figures as one JSON line.
 * @module
 */
import { parseArgs } from "node:util";
import { type ChaosFigures, runChaos } from "../tests/faults/chaos.ts";
import type { IptablesBackendName } from "../iptables/iptables.ts";

const ROOT = new URL("..", import.meta.url).pathname;

/**
 * One schedule's figures, for `mode` (ipvs: in the VM, with the emulator's slower bounds; iptables:
 * on `iptablesBackend`, default nf_tables).
 */
export async function benchChaos(
  mode: "iptables" | "nftables" | "ipvs",
  seed: number,
  seconds: number,
  stallMs: number,
  iptablesBackend?: IptablesBackendName,
): Promise<ChaosFigures> {
  if (mode !== "ipvs") return await runChaos(mode, seed, seconds, { stallMs, iptablesBackend });
  const out = await new Deno.Command(`${ROOT}tests/vm/run.sh`, {
    args: [
      "--mem",
      "2048",
      // The emulated guest: start, the schedule, and convergence at its pace.
      "--timeout",
      String(seconds * 3 + 1800),
      "--",
      "env",
      "KPD_IN_VM=1",
      Deno.execPath(),
      "run",
      "-A",
      "--config",
      `${ROOT}deno.json`,
      new URL(import.meta.url).pathname,
      `--mode=${mode}`,
      `--seed=${seed}`,
      `--seconds=${seconds}`,
      `--stall-ms=${stallMs}`,
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "inherit",
  }).output();
  const line = new TextDecoder().decode(out.stdout).split("\n").findLast((l) => l.startsWith('{"mode"'));
  if (line === undefined) throw new Error(`the VM's fault schedule printed no figures (exit ${out.code})`);
  return JSON.parse(line);
}

if (import.meta.main) {
  const { values: v } = parseArgs({
    args: Deno.args,
    options: {
      mode: { type: "string", default: "ipvs" },
      seed: { type: "string", default: "7" },
      seconds: { type: "string", default: "600" },
      "stall-ms": { type: "string", default: "60000" },
    },
  });
  const mode = v.mode as "iptables" | "nftables" | "ipvs";
  const r = await runChaos(mode, Number(v.seed), Number(v.seconds), { stallMs: Number(v["stall-ms"]) });
  console.log(JSON.stringify(r));
  Deno.exit(0);
}
