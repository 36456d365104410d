/**
 * A kernel tool's own run, timed in the namespace it runs in around the tool alone (neither
 * `ip netns exec` nor the timer's own start is counted), with the CPU it spent. A floor set beside
 * what the program pays for the same work counts what the program's own spawn of the tool counts: a
 * vfork, the tool's exec and start, its work and its exit.
 * @module
 */
import { sh } from "./chain_watch.ts";

/** One timed run: its exit code, what it printed on stderr, its wall time and CPU (user + system), ms. */
export interface TimedRun {
  readonly code: number;
  readonly err: string;
  readonly wallMs: number;
  readonly cpuMs: number;
}

/**
 * Spawns its arguments as the program spawns a tool (posix_spawn: a vfork, then the tool's exec), its
 * stdout dropped, and waits for it; writes its wall time and CPU (ms) as the last line on stderr and
 * exits with its exit code.
 */
const TIMER = `
import os, sys, time
start = time.monotonic()
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ,
                      file_actions=[(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)])
_, status, usage = os.wait4(pid, 0)
wall = time.monotonic() - start
sys.stderr.write("\\n%.3f %.3f\\n" % (wall * 1000, (usage.ru_utime + usage.ru_stime) * 1000))
sys.exit(os.waitstatus_to_exitcode(status))
`;

/** The timer's line: the last on stderr. */
const TIMES = /\n(\d+\.\d+) (\d+\.\d+)\n$/;

/**
 * Runs `cmd args` (given `stdin`) in network namespace `ns` (the driver's own when undefined);
 * returns its exit code, stderr and times. Throws, naming the command, when no times were written.
 */
export async function timedRun(
  ns: string | undefined,
  cmd: string,
  args: string[],
  stdin?: string,
): Promise<TimedRun> {
  const timer = ["python3", "-c", TIMER, cmd, ...args];
  const [bin, ...rest] = ns === undefined ? timer : ["ip", "netns", "exec", ns, ...timer];
  const r = await sh(bin, rest, stdin);
  const m = TIMES.exec(r.err);
  if (m === null) {
    throw new Error(`no times for ${cmd} ${args.join(" ")} (exit ${r.code}): ${r.err.slice(-300)}`);
  }
  return { code: r.code, err: r.err.slice(0, m.index), wallMs: Number(m[1]), cpuMs: Number(m[2]) };
}
