/**
 * The real program at scale, against the test API server: `deno task bench scale` (SCALE_SIZES, e.g.
 * `5000x50,50000x1,50000x10`; SCALE_CHANGES, default 110; SCALE_MODES, default `nftables`, add
 * `iptables` or `iptables-legacy` for its partial syncs on either backend).
 *
 * {@linkcode benchScale} creates two network namespaces and runs this file inside the first as the
 * driver. The driver serves N Services x E endpoints (one EndpointSlice each) and the Node from the
 * test API server, starts `main.ts` as `deno task start` does, and reads:
 * - the cold start: process start to every Service in the kernel (the program's own "First sync in
 *   the kernel" line, which it says once the first full transaction is committed), and the CPU spent
 *   until then by the program's main thread, its other threads, its kernel tools and this driver
 *   (`start_cpu.ts`): their sum over the cores is as soon as the start could end, however well its
 *   work overlapped;
 * - M single-endpoint changes 1.1-1.6 s apart (over the minimum sync period, so each is a sync of its
 *   own; the periodic sync and the drift check run meanwhile:
 *   the run spans several sync periods), each from the API write to the new endpoint in the kernel:
 *   nftables, the kernel's notification of the new element on the nftables netlink group (no polling: listing or getting one element
 *   makes nft fetch every element, seconds at scale); iptables, its endpoint chain ({@linkcode ChainWatch}:
 *   nf_tables listed every 25 ms; legacy, the restore that declared it committed);
 * - CPU of the program and its kernel tools (utime + stime + the children's) over the changes,
 *   per change; RSS after the first sync, at the end, sampled every 100 ms, and the peak (VmHWM);
 * - the kernel's floor in the second namespace: the same full transaction (the proxier's own, on a
 *   dry run) loaded by `nft -f` (or the rules as `iptables-save` prints them, restored), and one
 *   change's transaction on top of it (iptables: the smallest restore that commits; median of 6), with
 *   the netlink listener the changes were timed by open; each timed around the tool alone
 *   (`timed_run.ts`), a change with the CPU its tool spent.
 * @module
 */
import { parseArgs } from "node:util";
import { ChainWatch, sh } from "./chain_watch.ts";
import { driverResult, withNamespaces } from "./namespace_driver.ts";
import { DryRunExecutor } from "../iptables/dry_run.ts";
import type { ExecOptions, ExecResult } from "../iptables/executor.ts";
import { endpointChainName } from "../proxier/iptables/chain_name.ts";
import { LAYOUT_MARKER, TABLE } from "../proxier/nftables/layout.ts";
import { TestApiServer } from "../tests/support/api_server.ts";
import { startArgs } from "../tests/support/program.ts";
import { benchNftablesProxier } from "./nftables_proxier.ts";
import { CpuSampler, liveChildrenSeconds, type StartCpu, statSeconds } from "./start_cpu.ts";
import { median, percentile } from "./percentile.ts";
import { type TimedRun, timedRun } from "./timed_run.ts";
import { encodeListsAhead, feedGenerated, generate, serveObjects, slice } from "./objects.ts";

const METRICS = 10249;

/** One size and mode of the benchmark. */
export interface ScaleOptions {
  readonly mode: "nftables" | "iptables" | "iptables-legacy";
  readonly services: number;
  readonly endpoints: number;
  readonly changes: number;
}

/** What one run measured; times in ms unless said, memory in MiB. */
export interface ScaleResult extends ScaleOptions {
  /** Process start to every Service in the kernel, s. */
  readonly coldStartS: number;
  /** The CPU seconds spent until then, by whom (`start_cpu.ts`). */
  readonly coldStartCpu: StartCpu;
  /** The kernel loading the same full transaction into an empty namespace, s. */
  readonly floorS: number;
  /** One change's transaction loaded on top of it, ms (median of 6; iptables: the smallest restore that commits). */
  readonly floorChangeMs: number;
  /** The CPU its tool spent, ms (median of 6). */
  readonly floorChangeCpuMs: number;
  readonly change: { median: number; p99: number; max: number; missed: number; count: number };
  /** CPU of the program and its tools over the changes, per change. */
  readonly cpuPerChangeMs: number;
  /** The same, the program's own and its tools' apart. */
  readonly cpuSplitMs: { own: number; tools: number };
  readonly rss: { afterFirstSync: number; end: number; maxSampled: number; peak: number };
  readonly syncs: { partial: number; full: number; driftRepairs: number };
}

/** Runs one configuration in namespaces of its own; returns what it measured. */
export async function benchScale(o: ScaleOptions): Promise<ScaleResult> {
  const id = crypto.randomUUID().slice(0, 8);
  return await withNamespaces(
    [`kpd-scale-${id}`, `kpd-scale-${id}-floor`],
    ([node, floor]) =>
      driverResult<ScaleResult>(node, import.meta.url, [
        `--mode=${o.mode}`,
        `--services=${o.services}`,
        `--endpoints=${o.endpoints}`,
        `--changes=${o.changes}`,
        `--floor-ns=${floor}`,
      ], "scale"),
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The process's own CPU time and its children's (waited for, and still running), ms. */
function cpuMs(pid: number): { own: number; tools: number } {
  const s = statSeconds(Deno.readTextFileSync(`/proc/${pid}/stat`));
  return { own: s.own * 1000, tools: (s.children + liveChildrenSeconds(pid)) * 1000 };
}

function status(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(Deno.readTextFileSync(`/proc/${pid}/status`));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

function metric(page: string, name: string): number {
  const m = new RegExp(`^${name}(\\{ip_family="IPv4"\\})? (\\S+)$`, "m").exec(page);
  return m ? Number(m[2]) : 0;
}

/** A dry run that, after the first sync, reports the table as there (so later syncs stay partial). */
class TableKeepingDryRun extends DryRunExecutor {
  override run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    if (cmd === "nft" && opts.args.join(" ") === "-j list chains ip" && this.commands.length > 0) {
      const chain = { family: "ip", table: TABLE, name: LAYOUT_MARKER };
      return Promise.resolve({ code: 0, stdout: JSON.stringify({ nftables: [{ chain }] }), stderr: "" });
    }
    return super.run(cmd, opts);
  }
}

/** The nftables proxier's own first sync for the objects as one transaction, and one change's on top of it. */
export async function nftTransactions(n: number, e: number, i: number): Promise<[string, string]> {
  const exec = new TableKeepingDryRun();
  const p = benchNftablesProxier(exec);
  feedGenerated(p, n, e);
  await p.syncNow();
  // A new table loads in parts (proxier/nftables/commit.ts); the floor is all of them as one.
  const full = exec.commands.filter((c) => c.args.includes("-f") && !c.args.includes("-c")).map((c) =>
    c.stdin!
  )
    .join("");
  p.onEndpointSliceUpdate(slice(`svc-${i}`, i, 0, e), slice(`svc-${i}`, i, 200, e));
  await p.syncNow();
  return [full, exec.commands.filter((c) => c.args.includes("-f")).at(-1)!.stdin!];
}

/** When each new endpoint address reached the kernel, from a watch started before the changes. */
interface KernelWatch {
  /** Resolves once the watch sees events (a probe element of its own seen). */
  ready(): Promise<void>;
  /** Resolves with the time the kernel holds `address` (of service `i`), or undefined after `ms`. */
  seen(address: string, i: number, ms: number): Promise<number | undefined>;
  close(): void;
}

/** A table of the bench's own whose element events say the watch listens. */
const PROBE_TABLE = "kpd-bench-probe";

/**
 * The kernel's own notifications of new set elements (`NFT_MSG_NEWSETELEM` on the nftables netlink
 * group, as `nft monitor` reads them), each message's payload printed in hex as it arrives. Not `nft
 * monitor` itself: it reads the whole ruleset into its cache before it listens and again as the
 * table changes, and at 250,000 elements it printed nothing in 10 minutes.
 */
const NETLINK_WATCH = `
import socket, sys
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
s.bind((0, 1 << 6))  # NFNLGRP_NFTABLES (7)
while True:
    try:
        data = s.recv(1 << 20)
    except OSError as e:
        if e.errno != 105:  # ENOBUFS: notifications were lost (a full sync's); a change then waits in vain
            raise
        sys.stdout.write("overflow\\n")
        continue
    off = 0
    while off + 16 <= len(data):
        length = int.from_bytes(data[off:off + 4], "little")
        kind = int.from_bytes(data[off + 4:off + 6], "little")
        if length < 16:
            break
        if kind == 0x0a0c:  # NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWSETELEM
            sys.stdout.write(data[off + 16:off + length].hex() + "\\n")
        off += (length + 3) & ~3
    sys.stdout.flush()
`;

/** An IPv4 address as the kernel carries it in an element: four bytes, in hex. */
const hexIPv4 = (ip: string) => ip.split(".").map((b) => Number(b).toString(16).padStart(2, "0")).join("");

/** nftables: the kernel's new-element notifications, each stamped as it arrives. */
function nftWatch(): KernelWatch {
  const child = new Deno.Command("python3", {
    args: ["-u", "-c", NETLINK_WATCH],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines: Array<{ at: number; hex: string }> = [];
  const waiting = new Map<string, (t: number) => void>();
  (async () => {
    let rest = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      const now = performance.now();
      const got = (rest + chunk).split("\n");
      rest = got.pop()!;
      for (const hex of got) {
        lines.push({ at: now, hex });
        for (const [needle, resolve] of waiting) if (hex.includes(needle)) resolve(now);
      }
    }
  })().catch(() => {});
  const seenAt = (needle: string) => lines.find((l) => l.hex.includes(needle))?.at;
  const wait = (needle: string, ms: number) => {
    const t = seenAt(needle);
    if (t !== undefined) return Promise.resolve<number | undefined>(t);
    return new Promise<number | undefined>((resolve) => {
      const timer = setTimeout(() => (waiting.delete(needle), resolve(undefined)), ms);
      waiting.set(needle, (t) => (clearTimeout(timer), waiting.delete(needle), resolve(t)));
    });
  };
  return {
    async ready() {
      await sh("nft", ["add", "table", "ip", PROBE_TABLE]);
      await sh("nft", ["add", "set", "ip", PROBE_TABLE, "s", "{ type ipv4_addr; }"]);
      for (let k = 1;; k++) {
        if (k > 600) throw new Error("no element notification in 5 minutes");
        const probe = `192.0.2.${k % 250 + 1}`;
        await sh("nft", ["add", "element", "ip", PROBE_TABLE, "s", `{ ${probe} }`]);
        if (await wait(hexIPv4(probe), 500) !== undefined) break;
      }
      await sh("nft", ["delete", "table", "ip", PROBE_TABLE]);
    },
    seen: (address, _i, ms) => wait(hexIPv4(address), ms),
    close: () => {
      try {
        child.kill("SIGTERM");
      } catch { /* already closed */ }
    },
  };
}

/**
 * iptables: the endpoint's chain in the kernel, as {@linkcode ChainWatch} tells it (nf_tables: asked
 * every 25 ms; legacy: the restore that declared it committed, noted by a shim on the program's PATH).
 */
function iptablesWatch(chains: ChainWatch): KernelWatch {
  return {
    // The first sync's restores are no change's: later searches skip them.
    ready: () => chains.forget(),
    async seen(address, i, ms) {
      const chain = endpointChainName(`bench/svc-${i}:http`, "TCP", `${address}:8080`);
      const at = await chains.appeared(chain, ms);
      await chains.forget();
      return at === undefined ? undefined : performance.now() - (Date.now() - at);
    },
    close() {},
  };
}

async function driver(o: ScaleOptions & { floorNs: string }): Promise<ScaleResult> {
  const { services, slices } = generate(o.services, o.endpoints);
  const api = new TestApiServer();
  // kube-apiserver's cadence (its cacher's defaultBookmarkFrequency): the test server's own, five a
  // second for the tests' sake, would be counted as the program's cost of a change.
  api.bookmarkEveryMs = 60_000;
  serveObjects(api, services, slices);
  const backend = o.mode === "iptables-legacy" ? "legacy" : "nft";
  const logTo = Deno.env.get("SCALE_LOG");
  const keepLog = Boolean(logTo);
  const chains = await ChainWatch.create(backend, "kpd-scale-shim-");
  let spawned = 0;
  let proxy: Deno.ChildProcess;
  // Until the program runs, the shim's directory is all there is to undo (then the finally below).
  try {
    const master = api.start();
    await encodeListsAhead(master);
    spawned = performance.now();
    proxy = new Deno.Command(Deno.execPath(), {
      args: startArgs([
        `--proxy-mode=${o.mode === "nftables" ? "nftables" : "iptables"}`,
        "--hostname-override=node-a",
        "--cluster-cidr=10.0.0.0/8",
        `--metrics-bind-address=127.0.0.1:${METRICS}`,
        "--healthz-bind-address=127.0.0.1:10256",
        ...(keepLog ? ["--v=4"] : []),
        // iptables-nft-restore of 250,000 endpoints' rules takes minutes, past the default bound.
        ...(o.mode === "nftables" ? [] : [`--iptables-backend=${backend}`, "--kernel-tool-timeout=1h"]),
        `--master=${master}`,
      ]).map((a) => keepLog && a.startsWith("--v8-flags=") ? `${a},--trace-gc` : a),
      env: o.mode === "nftables" ? {} : await chains.env(),
      stdin: "null",
      // With SCALE_LOG, V8's collections (--trace-gc, on stdout) go to the log beside the program's lines.
      stdout: keepLog ? "piped" : "null",
      stderr: "piped",
    }).spawn();
  } catch (e) {
    await chains.close();
    throw e;
  }
  let log = "";
  const stamp = () => new Date().toISOString().slice(11, 23);
  const drained = Promise.all([
    (async () => {
      for await (const t of proxy.stderr.pipeThrough(new TextDecoderStream())) log += t;
    })(),
    keepLog
      ? (async () => {
        for await (const t of proxy.stdout!.pipeThrough(new TextDecoderStream())) log += `${stamp()} ${t}`;
      })()
      : undefined,
  ]).catch(() => {});
  const cpu = new CpuSampler(proxy.pid);
  cpu.start();
  let maxSampled = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      try {
        maxSampled = Math.max(maxSampled, status(proxy.pid, "VmRSS"));
      } catch { /* exited */ }
      await sleep(100);
    }
  })();
  let watch: KernelWatch | undefined;
  try {
    let coldStartS = NaN;
    for (const end = performance.now() + 30 * 60_000; performance.now() < end; await sleep(50)) {
      const m = /"First sync in the kernel" .*sinceStartMs=(\d+)/.exec(log);
      if (m !== null) {
        coldStartS = Number(m[1]) / 1000;
        break;
      }
    }
    if (Number.isNaN(coldStartS)) throw new Error(`no first sync within 30 min:\n${log.slice(-4000)}`);
    await cpu.stop();
    // The process starts just after the spawn: what was spent up to the sync's end, within a sample.
    const coldStartCpu = cpu.until(spawned + coldStartS * 1000)!;
    await sleep(3000);
    const rssAfterFirstSync = status(proxy.pid, "VmRSS");
    // Started after the first sync: its quarter million notifications would overflow any buffer.
    const kernel = o.mode === "nftables" ? nftWatch() : iptablesWatch(chains);
    watch = kernel;
    await kernel.ready();
    // A warm-up change first: the first of a run may meet caches not yet warm.
    const change = async (c: number) => {
      const i = (c * 7919) % o.services;
      const s = slice(`svc-${i}`, i, c + 1, o.endpoints);
      const address = s.endpoints![0].addresses[0];
      const t = performance.now();
      api.apply("endpointslices", { apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice", ...s });
      const seen = await kernel.seen(address, i, 120_000);
      return seen === undefined ? undefined : Math.max(0, seen - t);
    };
    if (await change(0) === undefined) {
      throw new Error(`the warm-up change never reached the kernel:\n${log.slice(-4000)}`);
    }
    const before = await (await fetch(`http://127.0.0.1:${METRICS}/metrics`)).text();
    const cpu0 = cpuMs(proxy.pid);
    const latencies: number[] = [];
    let missed = 0;
    for (let c = 1; c <= o.changes; c++) {
      // Over the minimum sync period (1 s), so each change is a sync of its own.
      await sleep(1100 + Math.random() * 500);
      const ms = await change(c);
      if (ms === undefined) missed++;
      else latencies.push(ms);
      // A slow change, with the wall clock, to be read against the program's log (SCALE_LOG).
      if (ms === undefined || ms > 50) {
        console.error(`slow change ${c} at ${new Date().toISOString()}: ${ms} ms`);
      }
    }
    await sleep(1000);
    const cpu1 = cpuMs(proxy.pid);
    const cpuSplitMs = {
      own: (cpu1.own - cpu0.own) / o.changes,
      tools: (cpu1.tools - cpu0.tools) / o.changes,
    };
    const cpuPerChangeMs = cpuSplitMs.own + cpuSplitMs.tools;
    const after = await (await fetch(`http://127.0.0.1:${METRICS}/metrics`)).text();
    const count = (name: string) => metric(after, name) - metric(before, name);
    const rss = {
      afterFirstSync: rssAfterFirstSync,
      end: status(proxy.pid, "VmRSS"),
      maxSampled,
      peak: status(proxy.pid, "VmHWM"),
    };
    // The watch's netlink listener makes every netns's nftables build notifications (the kernel's
    // listener check is per protocol, not per namespace): it would triple the floor's load below.
    kernel.close();
    proxy.kill("SIGTERM");
    await proxy.status;
    if (logTo) Deno.writeTextFileSync(logTo, log);
    sampling = false;
    await sampler;
    await drained;
    const { floorS, floorChangeMs, floorChangeCpuMs } = await floorOf(o);
    latencies.sort((a, b) => a - b);
    const r = (x: number) => Number(x.toFixed(1));
    return {
      mode: o.mode,
      services: o.services,
      endpoints: o.endpoints,
      changes: o.changes,
      coldStartS,
      coldStartCpu,
      floorS,
      floorChangeMs,
      floorChangeCpuMs,
      change: {
        median: r(percentile(latencies, 0.5)),
        p99: r(percentile(latencies, 0.99)),
        max: r(latencies.at(-1) ?? NaN),
        missed,
        count: latencies.length,
      },
      cpuPerChangeMs: r(cpuPerChangeMs),
      cpuSplitMs: { own: r(cpuSplitMs.own), tools: r(cpuSplitMs.tools) },
      rss,
      syncs: {
        partial: count("kubeproxy_sync_partial_proxy_rules_duration_seconds_count"),
        full: count("kubeproxy_sync_full_proxy_rules_duration_seconds_count"),
        driftRepairs: count("kubeproxy_sync_proxy_rules_drift_repairs_total"),
      },
    };
  } finally {
    watch?.close();
    sampling = false;
    try {
      proxy.kill("SIGKILL");
    } catch { /* exited */ }
    await cpu.stop();
    await chains.close();
  }
}

/**
 * The kernel's floor: the same full rules loaded into an empty namespace, and one change on top (the
 * median of 6, its wall time and the CPU its tool spent, each timed around the tool alone).
 */
async function floorOf(
  o: ScaleOptions & { floorNs: string },
): Promise<{ floorS: number; floorChangeMs: number; floorChangeCpuMs: number }> {
  const inFloor = (cmd: string, args: string[], stdin?: string) =>
    sh("ip", ["netns", "exec", o.floorNs, cmd, ...args], stdin);
  const changes: TimedRun[] = [];
  const floor = (loaded: TimedRun) => ({
    floorS: loaded.wallMs / 1000,
    floorChangeMs: median(changes.map((c) => c.wallMs)),
    floorChangeCpuMs: median(changes.map((c) => c.cpuMs)),
  });
  if (o.mode === "nftables") {
    const [full, change] = await nftTransactions(o.services, o.endpoints, Math.floor(o.services / 2));
    const loaded = await timedRun(o.floorNs, "nft", ["-f", "-"], full);
    if (loaded.code !== 0) throw new Error(`the floor's nft -f failed: ${loaded.err.slice(0, 300)}`);
    // The program's changes were timed with the watch's netlink listener open, and while one is open
    // every commit builds its notifications: the floor's changes are timed with one open too.
    const watch = nftWatch();
    try {
      await watch.ready();
      for (let k = 0; k < 6; k++) {
        // Deleting the port's keys, then adding them: the same transaction applies again and again.
        const r = await timedRun(o.floorNs, "nft", ["-f", "-"], change);
        if (r.code !== 0) throw new Error(`the floor's change failed: ${r.err.slice(0, 300)}`);
        changes.push(r);
      }
    } finally {
      watch.close();
    }
    return floor(loaded);
  }
  // iptables: the program's rules as iptables-save prints them, restored into the floor namespace.
  const tool = o.mode === "iptables-legacy" ? "iptables-legacy" : "iptables-nft";
  let canonical = "";
  for (const t of ["filter", "nat"]) {
    canonical += (await sh(`${tool}-save`, ["-t", t])).out.split("\n").filter((l) => !l.startsWith("#"))
      .join("\n") + "\n";
  }
  // The nfacct counters the rules name (upstream's ct_state_invalid_dropped_pkts) are the program's.
  for (const name of new Set([...canonical.matchAll(/--nfacct-name\s+(\S+)/g)].map((m) => m[1]))) {
    await inFloor("nfacct", ["add", name]);
  }
  const restored = await timedRun(o.floorNs, `${tool}-restore`, ["--noflush"], canonical);
  if (restored.code !== 0) throw new Error(`the floor's ${tool}-restore failed: ${restored.err}`);
  // One change on top: the smallest restore that commits (a chain declared, then deleted). A legacy
  // commit replaces the whole table, whatever it changes.
  for (let k = 0; k < 6; k++) {
    const r = await timedRun(
      o.floorNs,
      `${tool}-restore`,
      ["--noflush"],
      `*nat\n${k % 2 ? "-X" : ":"}KUBE-FLOOR-PROBE${k % 2 ? "" : " - [0:0]"}\nCOMMIT\n`,
    );
    if (r.code !== 0) throw new Error(`the floor's change restore failed: ${r.err}`);
    changes.push(r);
  }
  return floor(restored);
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      mode: { type: "string" },
      services: { type: "string" },
      endpoints: { type: "string" },
      changes: { type: "string" },
      "floor-ns": { type: "string" },
    },
  });
  const r = await driver({
    mode: values.mode as ScaleOptions["mode"],
    services: Number(values.services),
    endpoints: Number(values.endpoints),
    changes: Number(values.changes),
    floorNs: values["floor-ns"]!,
  });
  console.log(JSON.stringify(r));
  Deno.exit(0);
}
