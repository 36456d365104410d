import { assert, assertEquals } from "../tests/support/assert.ts";
import {
  CpuSampler,
  meanFaults,
  type StartCpu,
  startCpuHeader,
  startCpuRow,
  type StartFaults,
  statSeconds,
} from "./start_cpu.ts";

const LOOP = "while :; do :; done";

Deno.test("statSeconds reads the kernel's line of a process whose name holds ') ('", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const odd = `${dir}/a) (b`;
    await Deno.copyFile("/bin/sleep", odd);
    await Deno.chmod(odd, 0o755);
    const child = new Deno.Command(odd, { args: ["5"] }).spawn();
    try {
      const text = await Deno.readTextFile(`/proc/${child.pid}/stat`);
      assert(text.includes("(a) (b)"), text);
      assertEquals(statSeconds(text), { own: 0, children: 0 });
    } finally {
      child.kill();
      await child.status;
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** CPU seconds each sampled process spends before the tests read what it spent. */
const BURN_S = 0.3;
/** One clock tick: the kernel rounds a process's figure and each thread's to ticks apart. */
const TICK_S = 0.01;
/** CPU seconds a runtime may spend exiting after it counted its own, as the kernel counts them. */
const EXIT_S = 0.1;
/** How long a busy machine may take to give a process that much CPU before a test fails. */
const GIVE_UP_MS = 60_000;

/**
 * Samples `sh -c script` until `ready` says it spent what the test reads (the CPU a process gets in
 * a given time depends on what else the machine runs, so no test waits a fixed time); returns what
 * it spent from the first sample to the last, and the wall time around them.
 */
async function spentBy(
  script: string,
  ready: (sampler: CpuSampler, stdout: ReadableStream<Uint8Array>) => Promise<void>,
): Promise<StartCpu & { wallS: number; faults: StartFaults }> {
  const child = new Deno.Command("sh", { args: ["-c", script], stdout: "piped" }).spawn();
  const sampler = new CpuSampler(child.pid, 10);
  try {
    const from = performance.now();
    sampler.start();
    // Nothing was spent before the first sample.
    assertEquals(sampler.until(-1), undefined);
    await ready(sampler, child.stdout);
    // One sample more, taken after what was waited for.
    await sampler.stop();
    const to = performance.now();
    return { ...sampler.until(to)!, wallS: (to - from) / 1000, faults: sampler.faultsUntil(to)! };
  } finally {
    child.kill();
    await child.status;
    await sampler.stop();
  }
}

/** Resolves once the sampler has seen the process's main thread spend {@linkcode BURN_S}. */
async function mainSpent(sampler: CpuSampler): Promise<void> {
  for (const end = performance.now() + GIVE_UP_MS; performance.now() < end;) {
    if ((sampler.until(performance.now())?.main ?? 0) >= BURN_S) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`the main thread was not seen spending ${BURN_S} CPU-seconds in ${GIVE_UP_MS} ms`);
}

/** Resolves once `stdout` has printed `line`. */
async function printed(stdout: ReadableStream<Uint8Array>, line: string): Promise<void> {
  let text = "";
  for await (const chunk of stdout.pipeThrough(new TextDecoderStream())) {
    text += chunk;
    if (text.split("\n").includes(line)) return;
  }
  throw new Error(`the output ended without "${line}": ${text}`);
}

Deno.test("CpuSampler puts a busy process's CPU on its main thread", async () => {
  const spent = await spentBy(LOOP, mainSpent);
  // A thread cannot spend more than the time that passed, give or take a tick of rounding.
  assert(
    spent.main >= BURN_S && spent.main <= spent.wallS + TICK_S,
    `main ${spent.main} in ${spent.wallS} s`,
  );
  // The process's figure and the thread's each round user and system time down apart: a reading's
  // difference may be a tick off either way, and the first's and the last's together two.
  assert(Math.abs(spent.threads) <= 2 * TICK_S + 1e-9, `threads ${spent.threads}`);
  assertEquals(spent.tools, 0);
});

Deno.test("CpuSampler puts the CPU of a child the process waited for on its tools", async () => {
  // The child spends a fixed amount of CPU by its own count, however long the machine takes to give it.
  const burn = `let u; while ((u = Deno.cpuUsage()).user + u.system < ${BURN_S * 1e6});`;
  const spent = await spentBy(
    `'${Deno.execPath()}' eval '${burn}'; echo burnt; exec sleep 60`,
    (_, stdout) => printed(stdout, "burnt"),
  );
  // The child's own count includes its runtime's start; the kernel's adds its exit after the count,
  // and rounds its user and system time down to ticks apart (their sum loses at most one).
  assert(spent.tools >= BURN_S - TICK_S - 1e-9 && spent.tools <= BURN_S + EXIT_S, `tools ${spent.tools}`);
  assert(spent.main <= 0.05, `main ${spent.main}`);
});

Deno.test("CpuSampler puts the CPU of a child still running (a tool kept running) on its tools", async () => {
  const burn = `let u; while ((u = Deno.cpuUsage()).user + u.system < ${BURN_S * 1e6});`;
  const dir = await Deno.makeTempDir();
  try {
    // The child stays alive (the shell waits for it) until the test ends it through its pid file.
    const spent = await spentBy(
      `'${Deno.execPath()}' eval '${burn} console.log("burnt"); setTimeout(() => {}, 60000)' & ` +
        `echo $! > ${dir}/pid; wait`,
      (_, stdout) => printed(stdout, "burnt"),
    );
    Deno.kill(Number(await Deno.readTextFile(`${dir}/pid`)), "SIGKILL");
    // Its own count includes its runtime's start; the kernel's rounds to ticks.
    assert(spent.tools >= BURN_S - TICK_S - 1e-9 && spent.tools <= BURN_S + EXIT_S, `tools ${spent.tools}`);
    assert(spent.main <= 0.05, `main ${spent.main}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("CpuSampler counts the page faults of memory the main thread first touches, and none of a process that touches none", async () => {
  const mib = 64;
  // With transparent huge pages always on, the kernel maps 2 MiB a fault.
  const thp = await Deno.readTextFile("/sys/kernel/mm/transparent_hugepage/enabled").catch(() => "");
  const pages = mib * 2 ** 20 / (thp.includes("[always]") ? 2 ** 21 : 4096);
  const touch = `const a = new Uint8Array(${mib} * 2 ** 20); a.fill(1); console.log("touched");`;
  const toucher = await spentBy(
    `exec '${Deno.execPath()}' eval '${touch} setTimeout(() => {}, 60000)'`,
    (_, stdout) => printed(stdout, "touched"),
  );
  assert(toucher.faults.main >= pages, `main ${toucher.faults.main}, ${pages} pages touched`);
  const idle = await spentBy(LOOP, mainSpent);
  assert(idle.faults.main + idle.faults.threads < pages / 8, JSON.stringify(idle.faults));
});

Deno.test("meanFaults gives the mean in thousands, a dash for no starts", () => {
  const faults = [{ main: 60_000, threads: 20_000 }, { main: 66_400, threads: 21_000 }];
  assertEquals(meanFaults(faults, "main"), "63.2k");
  assertEquals(meanFaults(faults, "threads"), "20.5k");
  assertEquals(meanFaults([], "main"), "-");
});

Deno.test("startCpuRow sums the four and sets the sum over the cores beside the cold start and 1.5x the floor", () => {
  const row = startCpuRow({
    mode: "nftables",
    size: "50,000 x 1",
    cpu: { main: 2.2, threads: 0.8, tools: 1.2, driver: 0.4 },
    coldStartS: 2.5,
    floorS: 1.28,
  }, 2);
  assertEquals(
    row,
    "| nftables | 50,000 x 1 | 2.20 s | 0.80 s | 1.20 s | 0.40 s | 4.60 s | 2.30 s | 2.50 s | 1.92 s |",
  );
  assertEquals(startCpuHeader(2)[0].split("|").length, row.split("|").length);
});
