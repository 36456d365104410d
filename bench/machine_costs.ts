/**
 * What this machine charges for the two things a change's kernel tool does most apart from its work:
 * starting a process and touching memory for the first time. A virtual machine whose hypervisor
 * handles page faults can charge ten times a bare machine's for both, and every figure of a change
 * (its tool's start, the tool's allocations, the program's spawn) moves with them: set beside a
 * run's figures, they say which machine measured them.
 * @module
 */
import { sh } from "./chain_watch.ts";
import { median } from "./percentile.ts";
import { timedRun } from "./timed_run.ts";

/** A machine's costs, medians of several tries. */
export interface MachineCosts {
  /** A process spawned and waited for (`true`: its exec, start and exit), CPU ms. */
  readonly spawnCpuMs: number;
  /** The same, wall ms. */
  readonly spawnWallMs: number;
  /** A page of fresh anonymous memory touched for the first time, µs (the loop's own cost included). */
  readonly faultUs: number;
}

/** Touches 64 MiB of fresh anonymous memory, a byte a page; prints µs per page. */
const TOUCH = `
import mmap, time
n = 64 << 20
m = mmap.mmap(-1, n)
start = time.perf_counter()
for i in range(0, n, 4096):
    m[i] = 1
print("%.3f" % ((time.perf_counter() - start) * 1e6 / (n // 4096)))
`;

/** Measures this machine's costs (`tries` of each); throws, naming the step, when one fails. */
export async function machineCosts(tries = 9): Promise<MachineCosts> {
  const wall: number[] = [];
  const cpu: number[] = [];
  const fault: number[] = [];
  for (let k = 0; k < tries; k++) {
    const r = await timedRun(undefined, "true", []);
    if (r.code !== 0) throw new Error(`true exited ${r.code}: ${r.err}`);
    wall.push(r.wallMs);
    cpu.push(r.cpuMs);
    const touched = await sh("python3", ["-c", TOUCH]);
    const us = Number(touched.out);
    if (touched.code !== 0 || !(us > 0)) {
      throw new Error(`touching fresh memory failed: ${touched.err.slice(-300)}`);
    }
    fault.push(us);
  }
  return { spawnCpuMs: median(cpu), spawnWallMs: median(wall), faultUs: median(fault) };
}

/** Returns the line a bench prints of `c`. */
export function machineCostsLine(c: MachineCosts): string {
  return `This machine: a process spawned and waited for (\`true\`) ${c.spawnWallMs.toFixed(2)} ms, ` +
    `${c.spawnCpuMs.toFixed(2)} ms of CPU; a page of fresh memory first touched ${c.faultUs.toFixed(1)} µs.`;
}
