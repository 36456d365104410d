import { assert, assertEquals } from "../tests/support/assert.ts";
import { CpuSampler, startCpuHeader, startCpuRow, statSeconds } from "./start_cpu.ts";

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

/** Samples `sh -c script` for `ms`; returns what it spent. */
async function spentBy(script: string, ms: number) {
  const child = new Deno.Command("sh", { args: ["-c", script] }).spawn();
  const sampler = new CpuSampler(child.pid, 10);
  try {
    sampler.start();
    // Nothing was spent before the first sample.
    assertEquals(sampler.until(-1), undefined);
    await new Promise((r) => setTimeout(r, ms));
    return sampler.until(performance.now())!;
  } finally {
    child.kill();
    await child.status;
    await sampler.stop();
  }
}

Deno.test("CpuSampler puts a busy process's CPU on its main thread", async () => {
  const spent = await spentBy(LOOP, 600);
  assert(spent.main >= 0.2 && spent.main <= 0.7, `main ${spent.main}`);
  assertEquals([spent.threads, spent.tools], [0, 0]);
});

Deno.test("CpuSampler puts the CPU of a child the process waited for on its tools", async () => {
  const spent = await spentBy(`timeout 0.4 sh -c '${LOOP}'; sleep 5`, 1000);
  assert(spent.tools >= 0.2 && spent.tools <= 0.5, `tools ${spent.tools}`);
  assert(spent.main <= 0.05, `main ${spent.main}`);
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
