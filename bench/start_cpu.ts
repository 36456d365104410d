/**
 * Where a start's CPU goes until a moment of it: the program's main thread (the one JavaScript
 * thread), its other threads (V8's collector and compiler workers, the runtime's), the kernel tools
 * it ran and waited for, and the driver serving it (the test API server's process, this one).
 * Read from `/proc` every few ms, so that the sum set against the cores says how soon the start
 * could end however well its work overlapped. Beside the CPU, the program's minor page faults: on a
 * machine where a page first touched costs microseconds (`machine_costs.ts`), what a start touches
 * afresh is a share of its CPU that no profile of its code shows.
 * @module
 */

/** CPU seconds a start spent, by who spent them. */
export interface StartCpu {
  /** The program's main thread. */
  readonly main: number;
  /** The program's other threads. */
  readonly threads: number;
  /** The program's children (nft, iptables-restore...): those it waited for and those still running. */
  readonly tools: number;
  /** This process: the API server the program lists from, and this sampling. */
  readonly driver: number;
}

/** Minor page faults a start took (a page first touched, or mapped from the page cache). */
export interface StartFaults {
  /** On the program's main thread. */
  readonly main: number;
  /** On its other threads. */
  readonly threads: number;
}

/** How many times one reading is retried while the main thread ticks between its parts. */
const MAX_READ_TRIES = 5;

/** Clock ticks per second of `/proc/.../stat` (USER_HZ, 100 on Linux). */
const TICKS = 100;

/**
 * Returns the fields of one `/proc/PID/stat` (or `.../task/TID/stat`) text from the third (the
 * state) on: field n of `man 5 proc` is at index n - 3. The command name (the second) may hold
 * spaces and parentheses: the fields are counted from its last `)`.
 */
function statFields(text: string): string[] {
  return text.slice(text.lastIndexOf(")") + 2).split(" ");
}

/**
 * Returns the CPU seconds of one `/proc/PID/stat` (or `.../task/TID/stat`) text: its own (utime +
 * stime, fields 14-15) and its waited-for children's (cutime + cstime, fields 16-17).
 */
export function statSeconds(text: string): { own: number; children: number } {
  const f = statFields(text);
  const n = (field: number) => Number(f[field - 3]) / TICKS;
  return { own: n(14) + n(15), children: n(16) + n(17) };
}

/**
 * Returns the minor page faults of one `/proc/PID/stat` (or `.../task/TID/stat`) text: field 10,
 * the process's (every thread's, ended ones too) or the thread's.
 */
export function statFaults(text: string): number {
  return Number(statFields(text)[10 - 3]);
}

/**
 * Returns the CPU seconds of `pid`'s children still running (their own and their waited-for
 * children's): a tool kept running (`nft -i`) is in no `cutime` until it exits and is waited for.
 */
export function liveChildrenSeconds(pid: number): number {
  let total = 0;
  for (const task of Deno.readDirSync(`/proc/${pid}/task`)) {
    let children: string;
    try {
      children = Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/children`);
    } catch {
      continue; // the thread ended
    }
    for (const child of children.split(" ").filter((c) => c.trim() !== "")) {
      try {
        const s = statSeconds(Deno.readTextFileSync(`/proc/${child.trim()}/stat`));
        total += s.own + s.children;
      } catch {
        // waited for meanwhile: in the parent's cutime from now on
      }
    }
  }
  return total;
}

/** One reading, with the `performance.now()` it was taken at. */
interface Sample extends StartCpu {
  readonly at: number;
  readonly faults: StartFaults;
}

/**
 * Samples process `pid` and this process every `everyMs` from {@linkcode start} to {@linkcode stop};
 * {@linkcode until} returns what was spent from the first sample to the last one at or before a moment.
 */
export class CpuSampler {
  readonly #pid: number;
  readonly #everyMs: number;
  readonly #samples: Sample[] = [];
  #running: Promise<void> | undefined;
  #stopped = false;

  /** Samples `pid` (and this process) every `everyMs` once started; reads nothing yet. */
  constructor(pid: number, everyMs = 10) {
    this.#pid = pid;
    this.#everyMs = everyMs;
  }

  /** Takes the first sample now and goes on every `everyMs`, until {@linkcode stop} or the process is gone. */
  start(): void {
    this.#read();
    this.#running = (async () => {
      while (!this.#stopped) {
        await new Promise((r) => setTimeout(r, this.#everyMs));
        if (!this.#read()) return;
      }
    })();
  }

  /** Stops sampling; resolves once the last sample is taken. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#running;
  }

  /** What was spent from the first sample to the last taken at or before `at` (a `performance.now()`). */
  until(at: number): StartCpu | undefined {
    const span = this.#span(at);
    if (span === undefined) return undefined;
    const [first, last] = span;
    return {
      main: last.main - first.main,
      threads: last.threads - first.threads,
      tools: last.tools - first.tools,
      driver: last.driver - first.driver,
    };
  }

  /** The program's minor page faults from the first sample to the last taken at or before `at`. */
  faultsUntil(at: number): StartFaults | undefined {
    const span = this.#span(at);
    if (span === undefined) return undefined;
    const [first, last] = span;
    return {
      main: last.faults.main - first.faults.main,
      threads: last.faults.threads - first.faults.threads,
    };
  }

  /** The first sample and the last taken at or before `at`, if both were taken. */
  #span(at: number): [Sample, Sample] | undefined {
    const first = this.#samples[0];
    const last = this.#samples.findLast((s) => s.at <= at);
    return first === undefined || last === undefined ? undefined : [first, last];
  }

  /** Adds a sample; false once the process is gone. */
  #read(): boolean {
    try {
      const read = (path: string) => statSeconds(Deno.readTextFileSync(path));
      // The main thread's id is the process's. Its reading brackets the process's, so that a tick it
      // spends between the two is not put on the other threads. The kernel rounds the process's
      // figure and the thread's to ticks apart, so they may still differ by one.
      const task = `/proc/${this.#pid}/task/${this.#pid}/stat`;
      let main: number;
      let mainFaults: number;
      let whole: ReturnType<typeof statSeconds>;
      let faults: number;
      let tries = 0;
      do {
        const thread = Deno.readTextFileSync(task);
        main = statSeconds(thread).own;
        mainFaults = statFaults(thread);
        const proc = Deno.readTextFileSync(`/proc/${this.#pid}/stat`);
        whole = statSeconds(proc);
        faults = statFaults(proc);
      } while (read(task).own !== main && ++tries < MAX_READ_TRIES);
      const driver = read("/proc/self/stat").own;
      this.#samples.push({
        at: performance.now(),
        main,
        threads: whole.own - main,
        tools: whole.children + liveChildrenSeconds(this.#pid),
        driver,
        faults: { main: mainFaults, threads: faults - mainFaults },
      });
      return true;
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return false;
      throw error;
    }
  }
}

/** The header and alignment rows of the table {@linkcode startCpuRow} writes rows of, for `cores` cores. */
export function startCpuHeader(cores: number): string[] {
  return [
    `| mode | services x endpoints | main thread | other threads | kernel tools | test API server | total | total / ${cores} cores | cold start | 1.5x floor |`,
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
}

/**
 * Returns the table row of one start: the CPU seconds `cpu` it spent until its first sync was in,
 * their total and that total over `cores` (as soon as a start doing this work could end on them),
 * beside the cold start it took and the target, 1.5x the kernel's floor `floorS`.
 */
export function startCpuRow(
  r: { mode: string; size: string; cpu: StartCpu; coldStartS: number; floorS: number },
  cores: number,
): string {
  const s = (x: number) => `${x.toFixed(2)} s`;
  const total = r.cpu.main + r.cpu.threads + r.cpu.tools + r.cpu.driver;
  return `| ${r.mode} | ${r.size} | ${s(r.cpu.main)} | ${s(r.cpu.threads)} | ${s(r.cpu.tools)} | ${
    s(r.cpu.driver)
  } | ${s(total)} | ${s(total / cores)} | ${s(r.coldStartS)} | ${s(1.5 * r.floorS)} |`;
}

/** Returns the mean of `k` over `faults` in thousands, as the cold bench's table gives it (`63.2k`); `-` for none. */
export function meanFaults(faults: readonly StartFaults[], k: keyof StartFaults): string {
  if (faults.length === 0) return "-";
  return `${(faults.reduce((a, f) => a + f[k], 0) / faults.length / 1000).toFixed(1)}k`;
}
