/**
 * `--oom-score-adj`: the kernel's OOM-killer preference for this process, as upstream sets it
 * (-999 by default, so the node's service proxy is among the last processes killed). Read and set
 * through util-linux's choom(1): the shipped permission set cannot open /proc.
 * @module
 */
import type { Executor } from "../../iptables/executor.ts";
import type { Logger } from "./logger.ts";

/**
 * Returns the oom_score_adj of `pid`, as choom reports it; `signal` ends a choom still running.
 * @throws {Error} naming what failed.
 */
export async function oomScoreAdj(exec: Executor, pid: number, signal?: AbortSignal): Promise<number> {
  const r = await exec.run("choom", { args: ["-p", String(pid)], signal });
  const m = /adjust value: (-?\d+)/.exec(r.stdout);
  if (r.code !== 0 || m === null) {
    throw new Error(`choom -p ${pid} exited ${r.code}: ${(r.stderr || r.stdout).trim()}`);
  }
  return Number(m[1]);
}

/**
 * Sets the oom_score_adj of `pid` to `value` unless it already has it. Returns true when it wrote.
 * `signal` ends a choom still running.
 * @throws {Error} naming what failed (lowering it needs CAP_SYS_RESOURCE).
 */
export async function applyOomScoreAdj(
  exec: Executor,
  pid: number,
  value: number,
  signal?: AbortSignal,
): Promise<boolean> {
  if (!Number.isInteger(value) || value < -1000 || value > 1000) {
    throw new RangeError(`oom_score_adj ${value} is outside [-1000, 1000]`);
  }
  if (await oomScoreAdj(exec, pid, signal) === value) return false;
  const r = await exec.run("choom", { args: ["-n", String(value), "-p", String(pid)], signal });
  if (r.code !== 0) throw new Error(`choom -n ${value} -p ${pid} exited ${r.code}: ${r.stderr.trim()}`);
  return true;
}

/**
 * Applies `value` to this process and logs the outcome; a failure is a warning (upstream logs it
 * and goes on), never an exit. Resolves once choom answered, or once `signal` ended the choom
 * still running (then nothing is said).
 */
export async function setOwnOomScoreAdj(
  exec: Executor,
  value: number | null,
  log: Logger,
  signal?: AbortSignal,
): Promise<void> {
  if (value === null) return;
  try {
    if (await applyOomScoreAdj(exec, Deno.pid, value, signal)) log.info("Set oom_score_adj", { value });
  } catch (e) {
    if (signal?.aborted) return;
    log.warn("Failed to apply OOMScore", { value, error: (e as Error).message });
  }
}
