/**
 * Cold starts of checkouts side by side: `deno task bench cold` (COLD_ROOTS, the checkouts to
 * compare, this one by default; COLD_ROUNDS, default 12; COLD_SIZE, default 50000x1; COLD_STACK=dual:
 * every Service dual-stack, with a second slice of IPv6 endpoints). One start
 * varies by a tenth of a second or two from the next, more than most changes to the start gain;
 * starts of the checkouts interleaved against one API server, the order turned every round, let a
 * change of tens of ms show: as the mean, and as the rounds in which each checkout started sooner
 * than the first.
 *
 * {@linkcode benchColdStarts} creates a network namespace and runs this file inside it as the
 * driver. The driver serves N Services x E endpoints (one EndpointSlice each) and the Node from the
 * test API server and, round by round, starts each checkout's main.ts as its `deno task start` does
 * (its own permission set and runtime flags) into an empty ruleset, reads the program's "First sync
 * in the kernel" line and the CPU it spent until then (`start_cpu.ts`), and stops it. Each round, in
 * the same namespace and in turn with the starts (the machine's speed drifts within minutes), it
 * also loads the kernel's floor once: the first sync's transaction of this checkout's nftables mode
 * for the same objects, as one `nft -f` into an empty ruleset (single-stack only: the transaction is
 * the IPv4 family's), whose median over the rounds the scale bench's cold-start target is a ratio
 * of; starts the lean start once (`lean_start.ts`: the same lists and the same transaction,
 * loaded as the program loads a new table, with no model between them), whose median is what a
 * start costs before any of the program's own work; and starts each way of the direct start once
 * (`direct_start.ts`: the same lists into the nftables proxier's own first sync, straight into its
 * maps or through its handlers and change trackers), whose medians split the program's work.
 * @module
 */
import { parseArgs } from "node:util";
import { sh } from "./chain_watch.ts";
import { driverResult, withNamespaces } from "./namespace_driver.ts";
import { leanParts, writeLeanParts } from "./lean_start.ts";
import { DIRECT_WAYS, type DirectWay } from "./direct_start.ts";
import { encodeListsAhead, generate, serveObjects } from "./objects.ts";
import { median } from "./percentile.ts";
import { nftTransactions } from "./scale.ts";
import { CpuSampler, type StartCpu, type StartFaults } from "./start_cpu.ts";
import { TestApiServer } from "../tests/support/api_server.ts";
import { startArgs } from "../tests/support/program.ts";

/** Between one start's end and the next start. */
const SETTLE_MS = 1000;

/** What one checkout's starts measured. */
export interface ColdStarts {
  readonly root: string;
  /** Process start to every Service in the kernel, ms, round by round. */
  readonly startsMs: readonly number[];
  /** The CPU each spent until then. */
  readonly cpu: readonly StartCpu[];
  /** The minor page faults each took until then. */
  readonly faults: readonly StartFaults[];
}

/**
 * What the cold bench measured: each checkout's starts, the kernel's floor, the lean start's median
 * and each direct start's (the last three undefined for a dual-stack cluster).
 */
export interface ColdBench {
  readonly starts: readonly ColdStarts[];
  readonly floorMs?: number;
  readonly leanMs?: number;
  readonly directMs?: Readonly<Record<DirectWay, number>>;
}

/** Starts every checkout of `roots` (paths ending in `/`) `rounds` times at `services` x `endpoints`, in a namespace of their own. */
export async function benchColdStarts(
  o: { roots: readonly string[]; rounds: number; services: number; endpoints: number; dualStack?: boolean },
): Promise<ColdBench> {
  const ns = `kpd-cold-${crypto.randomUUID().slice(0, 8)}`;
  return await withNamespaces([ns], () =>
    driverResult<ColdBench>(ns, import.meta.url, [
      `--rounds=${o.rounds}`,
      `--services=${o.services}`,
      `--endpoints=${o.endpoints}`,
      ...(o.dualStack ? ["--dual-stack"] : []),
      ...o.roots.map((r) => `--root=${r}`),
    ], "cold-start"));
}

/** How the starts of `b` compare with those of `a`, round by round: see {@linkcode againstFirst}. */
export interface PairedStarts {
  /** The rounds in which `b` started sooner. */
  readonly sooner: number;
  /** The rounds both finished. */
  readonly of: number;
  /** The mean of `b`'s start less `a`'s in the same round, ms (negative: `b` sooner). */
  readonly meanMs: number;
  /**
   * Twice the standard error of that mean, ms (NaN under two rounds): a mean difference within it
   * is as likely the machine's drift as the change.
   */
  readonly twoSeMs: number;
}

/**
 * Compares `b`'s starts with `a`'s round by round, of the rounds both finished: in how many `b` was
 * sooner, and the mean of the differences with twice its standard error. A round's two starts share
 * the machine's speed at that moment, so their difference carries less of its drift than the two
 * means do.
 */
export function againstFirst(a: readonly number[], b: readonly number[]): PairedStarts {
  const diffs: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (!Number.isNaN(a[i]) && !Number.isNaN(b[i])) diffs.push(b[i] - a[i]);
  }
  const of = diffs.length;
  const meanMs = diffs.reduce((x, y) => x + y, 0) / of;
  const variance = diffs.reduce((x, d) => x + (d - meanMs) ** 2, 0) / (of - 1);
  return {
    sooner: diffs.filter((d) => d < 0).length,
    of,
    meanMs,
    twoSeMs: of < 2 ? NaN : 2 * Math.sqrt(variance / of),
  };
}

/** The driver, inside the namespace: see the module doc. */
async function driver(
  roots: readonly string[],
  rounds: number,
  n: number,
  e: number,
  dualStack: boolean,
): Promise<ColdBench> {
  const { services, slices } = generate(n, e, { dualStack });
  const api = new TestApiServer();
  // kube-apiserver's watch bookmark cadence: the test server's default would cost the program CPU.
  api.bookmarkEveryMs = 60_000;
  serveObjects(api, services, slices);
  const master = api.start();
  const results = roots.map((root) => ({
    root,
    startsMs: [] as number[],
    cpu: [] as StartCpu[],
    faults: [] as StartFaults[],
  }));
  // The floor and the lean start take turns with the starts, round by round: the machine's speed
  // drifts by a fifth within minutes, and a ratio of figures taken minutes apart would carry it.
  const floors: number[] = [];
  const leans: number[] = [];
  const directs = Object.fromEntries(DIRECT_WAYS.map((w) => [w, [] as number[]])) as Record<
    DirectWay,
    number[]
  >;
  const turns: Array<() => Promise<unknown>> = results.map((r) => async () => {
    const { ms, cpu, faults } = await coldStart(r.root, master);
    r.startsMs.push(ms);
    r.cpu.push(cpu);
    r.faults.push(faults);
  });
  let dir: string | undefined;
  try {
    const [full] = dualStack ? [] : await nftTransactions(n, e, Math.floor(n / 2));
    if (full !== undefined) {
      const parts = dir = await Deno.makeTempDir({ prefix: "kpd-lean-" });
      await writeLeanParts(parts, leanParts(full));
      turns.push(
        async () => floors.push(await floorMs(full)),
        async () => leans.push(await leanMs(parts, master)),
        ...DIRECT_WAYS.map((way) => async () => directs[way].push(await directStartMs(way, master))),
      );
    }
    for (let round = 0; round < rounds; round++) {
      for (const turn of round % 2 === 0 ? turns : [...turns].reverse()) await turn();
    }
    await emptyRuleset();
    if (full === undefined) return { starts: results };
    const directMs = Object.fromEntries(DIRECT_WAYS.map((w) => [w, median(directs[w])])) as Record<
      DirectWay,
      number
    >;
    return { starts: results, floorMs: median(floors), leanMs: median(leans), directMs };
  } finally {
    if (dir !== undefined) await Deno.remove(dir, { recursive: true });
    await api.stop();
  }
}

/** Returns how long `run` took (ms), begun on an empty ruleset after `prepare` (not timed). */
async function timedOnEmpty(run: () => Promise<void>, prepare = async () => {}): Promise<number> {
  await prepare();
  await emptyRuleset();
  const t = performance.now();
  await run();
  return performance.now() - t;
}

/** The kernel's floor: `full`, the first sync's transaction, as one `nft -f` (see the module doc). */
function floorMs(full: string): Promise<number> {
  return timedOnEmpty(async () => {
    const loaded = await sh("nft", ["-f", "-"], full);
    if (loaded.code !== 0) throw new Error(`the floor's nft -f failed: ${loaded.err.slice(0, 300)}`);
  });
}

/** One lean start of the parts in `dir` against `master` (`lean_start.ts`), from its process's spawn to its exit. */
function leanMs(dir: string, master: string): Promise<number> {
  return referenceStartMs("lean", "./lean_start.ts", master, [dir]);
}

/** One direct start of `way` against `master` (`direct_start.ts`), from its process's spawn to its exit. */
function directStartMs(way: DirectWay, master: string): Promise<number> {
  // The program's runtime flags: its heap's shape decides a start's collections.
  const flags = startArgs().filter((a) => a.startsWith("--v8-flags="));
  return referenceStartMs(way, "./direct_start.ts", master, [way], flags);
}

/**
 * One start of the bench's own `script` (beside this file) against `master`, then `args`, runtime
 * `flags` before it, from its process's spawn to its exit; `name` names it in an error. Its lanes write each
 * transaction to a temporary file of its own, as the program's do.
 */
function referenceStartMs(
  name: string,
  script: string,
  master: string,
  args: string[],
  flags: string[] = [],
): Promise<number> {
  const path = new URL(script, import.meta.url).pathname;
  const run = [
    "run",
    "-q",
    "--allow-net",
    "--allow-read",
    "--allow-write",
    "--allow-run=nft",
    ...flags,
    path,
    master,
    ...args,
  ];
  return timedOnEmpty(async () => {
    const started = await sh(Deno.execPath(), run);
    if (started.code !== 0) throw new Error(`the ${name} start failed: ${started.err.slice(0, 300)}`);
  }, () => encodeListsAhead(master));
}

/**
 * Flushes the namespace's ruleset and waits: the kernel frees a flushed table's elements after the
 * flush returns, and the last start's process its memory after it exits, so whatever is timed next
 * would share the cores with both.
 */
async function emptyRuleset(): Promise<void> {
  const flushed = await sh("nft", ["flush", "ruleset"]);
  if (flushed.code !== 0) throw new Error(`nft flush ruleset failed: ${flushed.err}`);
  await new Promise((r) => setTimeout(r, SETTLE_MS));
}

/** One start of `root` into an empty ruleset: when its first sync was in, the CPU spent and the page faults taken until then. */
async function coldStart(
  root: string,
  master: string,
): Promise<{ ms: number; cpu: StartCpu; faults: StartFaults }> {
  await encodeListsAhead(master);
  await emptyRuleset();
  const spawned = performance.now();
  const proxy = new Deno.Command(Deno.execPath(), {
    args: startArgs([
      "--proxy-mode=nftables",
      "--hostname-override=node-a",
      "--cluster-cidr=10.0.0.0/8",
      "--metrics-bind-address=127.0.0.1:10249",
      "--healthz-bind-address=127.0.0.1:10256",
      `--master=${master}`,
    ], root),
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const sampler = new CpuSampler(proxy.pid);
  sampler.start();
  let log = "";
  const drained = (async () => {
    for await (const t of proxy.stderr.pipeThrough(new TextDecoderStream())) log += t;
  })().catch(() => {});
  try {
    for (const end = performance.now() + 10 * 60_000; performance.now() < end;) {
      const m = /"First sync in the kernel" .*sinceStartMs=(\d+)/.exec(log);
      if (m !== null) {
        await sampler.stop();
        const ms = Number(m[1]);
        return { ms, cpu: sampler.until(spawned + ms)!, faults: sampler.faultsUntil(spawned + ms)! };
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`${root}: no first sync within 10 min:\n${log.slice(-4000)}`);
  } finally {
    try {
      proxy.kill("SIGTERM");
    } catch { /* exited */ }
    await proxy.status;
    await sampler.stop();
    await drained;
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      rounds: { type: "string" },
      services: { type: "string" },
      endpoints: { type: "string" },
      "dual-stack": { type: "boolean" },
      root: { type: "string", multiple: true },
    },
  });
  const r = await driver(
    values.root ?? [],
    Number(values.rounds),
    Number(values.services),
    Number(values.endpoints),
    values["dual-stack"] === true,
  );
  console.log(JSON.stringify(r));
  Deno.exit(0);
}
