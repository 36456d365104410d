/**
 * The bounds real-kernel tests wait with. A test waits for the event it asserts (the program's first
 * sync, a rule in the kernel, an answer) and polling returns as soon as it holds, so the bounds are
 * generous: a machine busy with other work slows a check without failing it, and only a check that
 * never holds pays the whole bound. Inside the emulated VM guest every tool and program runs 10-20x
 * slower, and a busy host slows the guest four times over and more, so the guest's bounds are larger
 * (the guest run's own cap, `tests/vm/ipvs_vm_test.ts`, bounds the whole).
 * @module
 */

/** True inside the VM guest (`tests/vm/run.sh`, started by `ipvs_vm_test.ts`). */
export const IN_VM = Deno.env.get("KPD_IN_VM") === "1";

/** How long a test waits for the program to reach a state: a start, a sync, a rule, a drain. */
export const CONVERGE_MS = IN_VM ? 300_000 : 60_000;

/** How long a connection or request that should be answered may take to be. */
export const ANSWER_MS = IN_VM ? 30_000 : 10_000;

/** What {@linkcode pace}'s work takes on an idle machine of these (2 cores, no virtualization): host, guest. */
const IDLE_WORK_MS = IN_VM ? 210 : 15;

/** A fixed piece of CPU work (arrays filled and sorted); returns the milliseconds it took. */
function work(): number {
  const start = performance.now();
  let keep = 0;
  for (let round = 0; round < 5; round++) {
    const a = Array.from({ length: 20_000 }, (_, i) => (i * 2654435761) % 1000003);
    a.sort((p, q) => p - q);
    keep += a[1000];
  }
  return performance.now() - start + (keep < 0 ? 1 : 0);
}

/**
 * How many times slower than idle this machine runs now (at least 1): a fixed piece of work, timed
 * after a warm-up against what it takes on an idle machine. For a test whose own pace (a schedule,
 * the program's sync period) must follow the machine, not only its bounds.
 */
export function pace(): number {
  work();
  const ms = (work() + work() + work()) / 3;
  return Math.max(1, ms / IDLE_WORK_MS);
}
