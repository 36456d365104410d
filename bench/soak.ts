/**
 * The soak: `deno task bench soak`. The real program (the start task's command and permissions) in
 * a fresh network namespace, fed by the test API server (N Services x 10 endpoints, the own Node),
 * runs for an hour under churn: 10 one-endpoint changes a second and, every 5 s, a Service added
 * and the previous one removed. Every interval it samples what a leak would grow: RSS and file
 * descriptors (from /proc, outside the program), the V8 heap and the timers held (its /metrics),
 * and the network programming latency the program itself reports (upstream's histogram) for the
 * changes of that interval.
 *
 * Run as a driver inside the namespace ({@linkcode benchSoak} starts it).
 * @module
 */
import { parseArgs } from "node:util";
import { TestApiServer } from "../tests/support/api_server.ts";
import { startArgs } from "../tests/support/program.ts";
import { generate, serveObjects, slice } from "./objects.ts";
import { statSeconds } from "./start_cpu.ts";

const ROOT = new URL("..", import.meta.url).pathname;

/** One soak. */
export interface SoakOptions {
  /** ipvs runs in the VM (tests/vm/run.sh): this machine's kernel has no IPVS. */
  readonly mode: "iptables" | "nftables" | "ipvs" | "userspace";
  readonly services: number;
  readonly seconds: number;
  readonly intervalSeconds: number;
  /** One-endpoint changes a second; default 10. */
  readonly changesPerSecond?: number;
  /** A Service added and the previous one removed every 5 s; default true. */
  readonly serviceChurn?: boolean;
}

/** One interval's sample. */
export interface SoakSample {
  readonly minute: number;
  /**
   * The median and the largest of the interval's RSS readings (one every 10 s): one reading falls
   * anywhere on the V8 heap's sawtooth, the median does not.
   */
  readonly rssMiB: number;
  readonly rssMaxMiB: number;
  /** Of the RSS, anonymous memory (heap, malloc, stacks); the rest is mapped files (the binary). */
  readonly anonMiB: number;
  /** Of the anonymous memory, V8's heap pages (256 KiB mappings each). */
  readonly v8PagesMiB: number;
  /** Of the anonymous memory, malloc's main arena (`[heap]`). */
  readonly mallocMainMiB: number;
  /** The smallest V8 heap in use of the interval's readings: about the live objects, after a collection. */
  readonly heapUsedMinMiB: number;
  readonly heapUsedMaxMiB: number;
  readonly heapTotalMiB: number;
  /** Memory V8 counts outside its heap (buffers). */
  readonly externalMiB: number;
  readonly fds: number;
  readonly timers: number;
  /** The program's network programming latency over this interval (bucket bounds), seconds. */
  readonly nplMedianS: number;
  readonly nplMaxS: number;
  readonly changes: number;
}

/** Where a process's resident memory goes, MiB. */
export interface MemoryBreakdown {
  readonly rss: number;
  /** Mapped files (the binary's text and data, libraries). */
  readonly files: number;
  /** V8's heap pages (256 KiB anonymous mappings), and of its heap the bytes in use and in total. */
  readonly v8Pages: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
  /** Compiled code: anonymous executable mappings (V8's code space). */
  readonly code: number;
  /** Buffers V8 counts outside its heap (ArrayBuffers). */
  readonly external: number;
  /** malloc's main arena (`[heap]`). */
  readonly mallocMain: number;
  /** The rest of the anonymous memory: other malloc arenas (one per thread), stacks, mmap'd buffers. */
  readonly otherAnon: number;
}

/** The whole soak. */
export interface SoakResult extends SoakOptions {
  readonly firstSyncS: number;
  /** CPU seconds the program used until its first sync was seen done, and over the changes. */
  readonly firstSyncCpuS: number;
  readonly changesCpuS: number;
  /** RSS when the first full sync was seen done. */
  readonly firstSyncRssMiB: number;
  /** Where the memory is at the first sync and after the changes. */
  readonly firstSyncMemory: MemoryBreakdown;
  readonly endMemory: MemoryBreakdown;
  /** RSS when the last change was made. */
  readonly endRssMiB: number;
  /** The largest RSS of the whole run (the kernel's high-water mark, VmHWM). */
  readonly peakRssMiB: number;
  readonly samples: SoakSample[];
}

/**
 * Runs the soak's driver in a fresh network namespace (ipvs: in the VM, whose whole network stack
 * is fresh); resolves with its samples.
 */
export async function benchSoak(o: SoakOptions, onSample?: (s: SoakSample) => void): Promise<SoakResult> {
  const driver = [
    Deno.execPath(),
    "run",
    "-A",
    "--config",
    `${ROOT}deno.json`,
    new URL(import.meta.url).pathname,
    `--mode=${o.mode}`,
    `--services=${o.services}`,
    `--seconds=${o.seconds}`,
    `--interval=${o.intervalSeconds}`,
    `--rate=${o.changesPerSecond ?? 10}`,
    `--service-churn=${o.serviceChurn ?? true}`,
  ];
  if (o.mode === "ipvs") {
    // The emulated guest is slow to start and to sync: an hour on top of the soak's own time.
    const vm = [`${ROOT}tests/vm/run.sh`, "--mem", "3072", "--timeout", String(o.seconds + 3600), "--"];
    return await follow(vm, ["env", "KPD_IN_VM=1", ...driver], onSample);
  }
  const ns = `kpd-soak-${crypto.randomUUID().slice(0, 8)}`;
  await run("ip", ["netns", "add", ns]);
  try {
    await run("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
    return await follow(["ip", "netns", "exec", ns], driver, onSample);
  } finally {
    await run("ip", ["netns", "del", ns]);
  }
}

/** Runs the driver under `wrapper`, passing each sample it prints to `onSample`; its result. */
async function follow(
  wrapper: string[],
  driver: string[],
  onSample?: (s: SoakSample) => void,
): Promise<SoakResult> {
  const child = new Deno.Command(wrapper[0], {
    args: [...wrapper.slice(1), ...driver],
    cwd: ROOT,
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  let result: SoakResult | undefined;
  let pending = "";
  for await (const text of child.stdout.pipeThrough(new TextDecoderStream())) {
    pending += text;
    let nl;
    while ((nl = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      if (!line.startsWith("{")) continue;
      const x = JSON.parse(line);
      if ("samples" in x) result = x;
      else onSample?.(x);
    }
  }
  const status = await child.status;
  if (result === undefined) throw new Error(`the soak driver printed no result (exit ${status.code})`);
  return result;
}

async function run(cmd: string, args: string[]): Promise<void> {
  const r = await new Deno.Command(cmd, { args, stderr: "piped" }).output();
  if (!r.success) throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(r.stderr)}`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `series` in a Prometheus page, or NaN. */
function metric(page: string, series: string): number {
  const m = new RegExp(`^${series.replace(/[{}]/g, "\\$&")} (\\S+)$`, "m").exec(page);
  return m ? Number(m[1]) : NaN;
}

/** The cumulative buckets of upstream's network programming histogram: [upper bound, count]. */
function nplBuckets(page: string): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const re = /^kubeproxy_network_programming_duration_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} (\S+)$/gm;
  for (const m of page.matchAll(re)) {
    // IPv4 only (the changes are); a page without the label has one family's buckets.
    if (m[0].includes('ip_family="IPv6"')) continue;
    out.push([m[1] === "+Inf" ? Infinity : Number(m[1]), Number(m[2])]);
  }
  return out;
}

/** Median and max (as bucket upper bounds) of the observations between two scrapes. */
function nplBetween(before: Array<[number, number]>, after: Array<[number, number]>): [number, number] {
  const delta = after.map(([le, n], k) => [le, n - (before[k]?.[1] ?? 0)] as [number, number]);
  const total = delta.at(-1)?.[1] ?? 0;
  if (total === 0) return [NaN, NaN];
  const median = delta.find(([, n]) => n >= total / 2)![0];
  const max = delta.find(([, n]) => n >= total)![0];
  return [median, max];
}

/** A `/proc/PID/status` memory field (VmRSS, VmHWM) in MiB. */
function procStatusMiB(pid: number, field: string): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(Deno.readTextFileSync(`/proc/${pid}/status`));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

const procRssMiB = (pid: number) => procStatusMiB(pid, "VmRSS");

function procAnonMiB(pid: number): number {
  const m = /^Anonymous:\s+(\d+) kB/m.exec(Deno.readTextFileSync(`/proc/${pid}/smaps_rollup`));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

/**
 * Of a process's resident memory, V8's heap pages (it maps each 256 KiB page on its own) and
 * malloc's main arena (`[heap]`), MiB: which of the two grows tells a V8 heap that is kept from a
 * malloc that is not trimmed.
 */
function procMemoryParts(pid: number): { v8PagesMiB: number; mallocMainMiB: number } {
  let v8 = 0, main = 0, into: "v8" | "main" | undefined;
  for (const line of Deno.readTextFileSync(`/proc/${pid}/smaps`).split("\n")) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (m !== null) {
      const kib = (parseInt(m[2], 16) - parseInt(m[1], 16)) / 1024;
      into = m[3] === "[heap]" ? "main" : m[3] === "" && kib === 256 ? "v8" : undefined;
    } else if (into !== undefined && line.startsWith("Rss:")) {
      const kib = Number(line.split(/\s+/)[1]);
      if (into === "v8") v8 += kib;
      else main += kib;
    }
  }
  return { v8PagesMiB: Math.round(v8 / 1024), mallocMainMiB: Math.round(main / 1024) };
}

/** Where process `pid`'s resident memory goes (`/proc/PID/smaps`, and its `/metrics` page `p`). */
function memoryBreakdown(pid: number, p: string): MemoryBreakdown {
  let files = 0, v8 = 0, code = 0, main = 0, anon = 0;
  let kind: "file" | "v8" | "code" | "main" | "anon" = "anon";
  for (const line of Deno.readTextFileSync(`/proc/${pid}/smaps`).split("\n")) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\S+)\s*(.*)$/.exec(line);
    if (m !== null) {
      const kib = (parseInt(m[2], 16) - parseInt(m[1], 16)) / 1024;
      const path = m[5];
      kind = path === "[heap]"
        ? "main"
        : path.startsWith("/")
        ? "file"
        : m[3].includes("x")
        ? "code"
        : path === "" && kib === 256
        ? "v8"
        : "anon";
    } else if (line.startsWith("Rss:")) {
      const kib = Number(line.split(/\s+/)[1]);
      if (kind === "file") files += kib;
      else if (kind === "v8") v8 += kib;
      else if (kind === "code") code += kib;
      else if (kind === "main") main += kib;
      else anon += kib;
    }
  }
  const mib = (kib: number) => Math.round(kib / 1024);
  const bytes = (name: string) => Math.round(metric(p, name) / 2 ** 20);
  return {
    rss: procRssMiB(pid),
    files: mib(files),
    v8Pages: mib(v8),
    heapUsed: bytes("nodejs_heap_size_used_bytes"),
    heapTotal: bytes("nodejs_heap_size_total_bytes"),
    code: mib(code),
    external: bytes("nodejs_external_memory_bytes"),
    mallocMain: mib(main),
    otherAnon: mib(anon),
  };
}

/** CPU seconds process `pid` has used (user and system, `/proc/PID/stat`). */
function procCpuS(pid: number): number {
  return statSeconds(Deno.readTextFileSync(`/proc/${pid}/stat`)).own;
}

function procFds(pid: number): number {
  let n = 0;
  for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) n++;
  return n;
}

async function driver(o: SoakOptions): Promise<SoakResult> {
  const { services, slices } = generate(o.services + 1);
  const extra = { service: services.pop()!, slice: slices.pop()! };
  const api = serveObjects(new TestApiServer(), services, slices);
  // Copied before the clock starts: the first sync's time is the program's alone.
  const runtime = await ownRuntime();
  const url = api.start();
  const t0 = performance.now();
  // An experiment's V8 flags in place of the start task's (`SOAK_V8_FLAGS`), to weigh each lever.
  const v8 = Deno.env.get("SOAK_V8_FLAGS");
  const command = startArgs([
    `--proxy-mode=${o.mode}`,
    "--hostname-override=node-a",
    "--cluster-cidr=10.0.0.0/8",
    "--metrics-bind-address=127.0.0.1:10249",
    "--healthz-bind-address=127.0.0.1:10256",
    `--master=${url}`,
    // The start's give-back is said at 2: "after the first sync" is measured once it is done.
    "--v=2",
  ]);
  const proxy = new Deno.Command(runtime.path, {
    args: v8 === undefined
      ? command
      : command.map((a) => a.startsWith("--v8-flags=") ? `--v8-flags=${v8}` : a),
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const log: string[] = [];
  (async () => {
    for await (const t of proxy.stderr.pipeThrough(new TextDecoderStream())) {
      log.push(t);
      if (log.length > 200) log.shift();
    }
  })().catch(() => {});
  const page = async () => {
    try {
      return await (await fetch("http://127.0.0.1:10249/metrics")).text();
    } catch {
      return "";
    }
  };
  try {
    let firstSyncS = NaN;
    for (const end = t0 + 30 * 60_000; performance.now() < end;) {
      if (
        metric(await page(), 'kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"}') >= 1
      ) {
        firstSyncS = (performance.now() - t0) / 1000;
        break;
      }
      await sleep(100);
    }
    if (Number.isNaN(firstSyncS)) throw new Error(`no first sync within 30 min:\n${log.join("")}`);
    const samples: SoakSample[] = [];
    let changes = 0, sampledChanges = 0, extraIn = false;
    let buckets = nplBuckets(await page());
    const start = performance.now();
    let nextSample = start + o.intervalSeconds * 1000;
    let nextReading = start;
    const rss: number[] = [], heap: number[] = [];
    // The first sync's own post-sync step (the other modes' leftovers removed, then a thorough
    // collection and the start's code pages given back): "after the first sync" is once it is done.
    while (!log.join("").includes('"Gave back what the start alone used"')) {
      if (performance.now() > t0 + 30 * 60_000) {
        throw new Error(`no give-back within 30 min:\n${log.join("")}`);
      }
      await sleep(100);
    }
    const firstSyncRssMiB = procRssMiB(proxy.pid);
    const firstSyncMemory = memoryBreakdown(proxy.pid, await page());
    const firstSyncCpuS = procCpuS(proxy.pid);
    const gapMs = 1000 / (o.changesPerSecond ?? 10);
    let nextExtra = (o.serviceChurn ?? true) ? start + 5000 : Infinity;
    for (let c = 0; performance.now() - start < o.seconds * 1000; c++) {
      // 10 a second, on schedule: distinct Services in turn (7919 is prime), one endpoint each.
      await sleep(Math.max(0, start + c * gapMs - performance.now()));
      const i = (c * 7919) % o.services;
      const s = slice(`svc-${i}`, i, Math.floor(c / o.services) % 200 + 1);
      s.metadata!.annotations = {
        "endpoints.kubernetes.io/last-change-trigger-time": new Date().toISOString(),
      };
      api.apply("endpointslices", { apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice", ...s });
      changes++;
      if (performance.now() >= nextExtra) {
        nextExtra += 5000;
        // One Service comes, the one before goes: the set of Services churns, its size does not.
        const name = extra.service.metadata!.name!;
        if (extraIn) {
          api.delete("endpointslices", "bench", extra.slice.metadata!.name!);
          api.delete("services", "bench", name);
        } else {
          api.apply("services", { apiVersion: "v1", kind: "Service", ...extra.service });
          api.apply("endpointslices", {
            apiVersion: "discovery.k8s.io/v1",
            kind: "EndpointSlice",
            ...extra.slice,
          });
        }
        extraIn = !extraIn;
      }
      if (performance.now() >= nextReading) {
        nextReading += 10_000;
        rss.push(procRssMiB(proxy.pid));
        heap.push(Math.round(metric(await page(), "nodejs_heap_size_used_bytes") / 2 ** 20));
      }
      if (performance.now() >= nextSample) {
        nextSample += o.intervalSeconds * 1000;
        const p = await page();
        const sorted = rss.sort((a, b) => a - b);
        const now = nplBuckets(p);
        const [median, max] = nplBetween(buckets, now);
        buckets = now;
        const sample: SoakSample = {
          minute: Math.round((performance.now() - start) / 6_000) / 10,
          rssMiB: sorted[Math.floor(sorted.length / 2)],
          rssMaxMiB: sorted.at(-1)!,
          anonMiB: procAnonMiB(proxy.pid),
          ...procMemoryParts(proxy.pid),
          heapUsedMinMiB: Math.min(...heap),
          heapUsedMaxMiB: Math.max(...heap),
          heapTotalMiB: Math.round(metric(p, "nodejs_heap_size_total_bytes") / 2 ** 20),
          externalMiB: Math.round(metric(p, "nodejs_external_memory_bytes") / 2 ** 20),
          fds: procFds(proxy.pid),
          timers: metric(p, 'nodejs_active_resources{type="Timeout"}') || 0,
          nplMedianS: median,
          nplMaxS: max,
          changes: changes - sampledChanges,
        };
        sampledChanges = changes;
        rss.length = heap.length = 0;
        samples.push(sample);
        console.log(JSON.stringify(sample));
      }
    }
    return {
      ...o,
      firstSyncS: Math.round(firstSyncS * 10) / 10,
      firstSyncCpuS,
      changesCpuS: Math.round((procCpuS(proxy.pid) - firstSyncCpuS) * 100) / 100,
      firstSyncRssMiB,
      firstSyncMemory,
      endMemory: memoryBreakdown(proxy.pid, await page()),
      endRssMiB: procRssMiB(proxy.pid),
      peakRssMiB: procStatusMiB(proxy.pid, "VmHWM"),
      samples,
    };
  } finally {
    try {
      proxy.kill("SIGTERM");
    } catch { /* gone */ }
    await proxy.status;
    await api.stop();
    await runtime.remove();
  }
}

/**
 * A copy of this Deno binary for the proxy alone. On a node the compiled program runs from its own
 * file, which no other process maps; the proxy gives the pages of it that only its start touched back
 * to the kernel (`runtime/page_out.ts`). Run from the binary the bench driver and the test API server
 * run too, those pages are shared and the kernel keeps them, so the proxy's RSS would count the other
 * processes' code.
 */
async function ownRuntime(): Promise<{ path: string; remove: () => Promise<void> }> {
  const dir = await Deno.makeTempDir({ prefix: "kpd-runtime-" });
  const path = `${dir}/deno`;
  await Deno.copyFile(Deno.execPath(), path);
  await Deno.chmod(path, 0o755);
  return { path, remove: () => Deno.remove(dir, { recursive: true }) };
}

if (import.meta.main) {
  const { values: v } = parseArgs({
    args: Deno.args,
    options: {
      mode: { type: "string", default: "nftables" },
      services: { type: "string", default: "10000" },
      seconds: { type: "string", default: "3600" },
      interval: { type: "string", default: "300" },
      rate: { type: "string", default: "10" },
      "service-churn": { type: "string", default: "true" },
    },
  });
  const r = await driver({
    mode: v.mode as SoakOptions["mode"],
    services: Number(v.services),
    seconds: Number(v.seconds),
    intervalSeconds: Number(v.interval),
    changesPerSecond: Number(v.rate),
    serviceChurn: v["service-churn"] === "true",
  });
  console.log(JSON.stringify(r));
}
