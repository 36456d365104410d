/**
 * A seeded fault schedule against the real program (started as `deno task start` starts it, the
 * shipped permissions) in a network namespace, for one kernel mode, driven by the test API server
 * (a child in the node's namespace) while Services churn. Faults:
 * - API server: watches dropped mid-stream, compaction (each watch resumes into 410 Gone), lists
 *   answering 500, a restart that loses every connection, a stall (changes keep coming meanwhile);
 * - kernel tools (a wrapper first on PATH, for the test only): fail, exit 0 having done nothing, or
 *   hang until `--kernel-tool-timeout` kills them;
 * - the xtables lock held by another process for 10 s (the program's iptables tools are pointed at
 *   a lock file of the test's own with `XTABLES_LOCKFILE`, never the host's `/run/xtables.lock`);
 *   only iptables-legacy takes it: with the nf_tables backend it must cost nothing;
 * - the process: SIGKILL at a random moment, then a restart;
 * - outside drift: a flushed table, one service's jump or element deleted.
 * The schedule opens with every fault kind once, in a seeded order between churn steps, and lasts
 * `seconds` or until that opening is done, whichever is later (at most {@linkcode OPENING_CAP_MS}
 * more per unit of slowdown): what a run covers does not depend on the machine's pace. After that,
 * seeded random steps. After the schedule, every Service must be where its final objects say (by `trace` over the live
 * rules); `/healthz` must have answered 503 only while syncs could be failing; every sync failure
 * in the log must name an injected cause. Returns the figures.
 * @module
 */
import { assertEquals } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { IN_VM, pace } from "../support/bounds.ts";
import type { Pod } from "../e2e/netns.ts";
import type { ProxyProcess } from "../support/program.ts";
import { Topology } from "../e2e/netns.ts";
import { holdXtablesLock } from "../support/namespace.ts";
import type { ApiCommand } from "./api_server_child.ts";
import type { IptablesBackendName } from "../../iptables/iptables.ts";

/** What one run did and saw. */
export interface ChaosFigures {
  readonly mode: string;
  /** iptables mode: the backend it ran with. */
  readonly iptablesBackend?: IptablesBackendName;
  readonly seed: number;
  readonly seconds: number;
  /** How much slower than the idle host the schedule ran (the VM's factor times the machine's pace). */
  readonly slowdown: number;
  /** Faults injected, by kind. */
  readonly faults: Readonly<Record<string, number>>;
  /** Fault kinds the run never reached (only when the cap ended the opening; must be none). */
  readonly notRun: readonly FaultKind[];
  /** How long the schedule ran, in ms. */
  readonly ranMs: number;
  /** Object changes written (endpoints moved, Services added and deleted). */
  readonly changes: number;
  /** Outages of the probed Service that ended (it answered again). */
  readonly recoveries: number;
  /** The longest time the probed Service did not answer, in ms. */
  readonly longestOutageMs: number;
  /** The faults injected from 2 s before that outage until it ended, in order: what caused it. */
  readonly longestOutageFaults: readonly string[];
  /** From the schedule's end until every Service was where its objects say, in ms. */
  readonly convergedMs: number;
  /** Services not where their final objects say once converged (must be 0). */
  readonly lost: number;
  /** `/healthz` answers of 503 while no sync could be failing (must be 0). */
  readonly unjustified503: number;
  /** Exits nobody asked for (the harness restarts the program, as systemd or a DaemonSet would; must be 0). */
  readonly unexpectedExits: number;
  /** Sync failures logged, and those naming no injected cause (must be 0). */
  readonly syncFailuresLogged: number;
  readonly unexplainedFailures: number;
  /** The log lines of those failures, so a failing run names them. */
  readonly unexplained: readonly string[];
}

/** Every kind of fault the schedule injects; each runs at least once in every run. */
export const FAULT_KINDS = [
  "tool-fail",
  "tool-noop",
  "tool-hang",
  "api-dropWatches",
  "api-compact",
  "api-failLists",
  "api-restart",
  "api-stall",
  "sigkill",
  "xtables-lock",
  "drift",
] as const;

/** One kind of fault of {@linkcode FAULT_KINDS}. */
export type FaultKind = typeof FAULT_KINDS[number];

/**
 * How much longer than asked a run may last to finish its opening, per unit of slowdown: the
 * opening is 11 faults between churn steps, about 25 s at the idle host's pace.
 */
export const OPENING_CAP_MS = 60_000;

/** Options of {@linkcode runChaos}. */
export interface ChaosOptions {
  /** The API server stall's length (60 s in the bench; short in CI). */
  readonly stallMs?: number;
  /** iptables mode's `--iptables-backend` (default nft, as the host's). */
  readonly iptablesBackend?: IptablesBackendName;
}

/** mulberry32: a small seeded generator, so a failing seed can be replayed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The kernel tools the wrapper stands in front of (reads included: `nft list`, `ipvsadm -S`). */
const WRAPPED_TOOLS = [
  "iptables-restore",
  "iptables-nft-restore",
  "iptables-legacy-restore",
  "nft",
  "ipvsadm",
  "ipset",
];
const INJECTED = "chaos: injected failure";
/**
 * How long the other process holds the xtables lock (10 s: twice iptables' own `-w 5`). Here a tool waiting for it
 * meets the 2 s deadline before its own `-w 5`, so its failure reads "no exit within" (as a hung
 * tool's); tests/faults/xtables_lock_test.ts sees the lock's own message at the shipped deadline.
 */
const LOCK_HOLD_MS = 10_000;
/**
 * Sync failures a fault explains once drift or a no-op tool ran: a partial sync that found the kernel
 * other than the last sync left it (the sync fails, the next is full, reads the kernel and repairs
 * it). nft: ENOENT deleting what the drift removed, "File exists" adding an element the kernel holds
 * with another value (a no-op'd delete left it), "Device or resource busy" deleting a map a chain it
 * does not know of still reads (a no-op'd sync left it); ipvsadm: "No such destination" deleting a
 * real server the drift removed; iptables and ipset: "already exists", "does not exist";
 * iptables-legacy: a jump to a chain the kernel does not hold ("Couldn't load target").
 */
const KERNEL_BEHIND =
  /Could not process rule: (No such file or directory|File exists|Device or resource busy)|No such (destination|service)|already exists|does not exist|Couldn't load target `[^']*':No such file or directory/;
const SERVICES = 12;
/**
 * In the emulated VM (ipvs) every tool and start is 10-20x slower, and a busy machine slows both:
 * the schedule's pace, the program's sync period and the bounds that wait scale with it.
 */
const SLOW = (IN_VM ? 5 : 1) * pace();
const SYNC_PERIOD_MS = Math.round(1000 * SLOW);
/** The program's --kernel-tool-timeout here: a hung tool is killed after this long. */
const TOOL_TIMEOUT_MS = Math.round(2000 * SLOW);
/** /healthz turns 503 two sync periods after a change waits (upstream's healthTimeout); slack for backoff. */
const HEALTH_GRACE_MS = 2 * SYNC_PERIOD_MS + 4000 * SLOW;

const service = (i: number) => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { namespace: "chaos", name: `svc-${i}` },
  spec: {
    type: "ClusterIP",
    clusterIP: `172.30.60.${i}`,
    clusterIPs: [`172.30.60.${i}`],
    ports: [{ name: "p", port: 80, targetPort: 8080, protocol: "TCP" }],
  },
});

const slice = (i: number, pods: readonly Pod[]) => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: { namespace: "chaos", name: `svc-${i}-1`, labels: { "kubernetes.io/service-name": `svc-${i}` } },
  addressType: "IPv4",
  ports: [{ name: "p", port: 8080, protocol: "TCP" }],
  endpoints: pods.map((p) => ({ addresses: [p.ip], conditions: { ready: true }, nodeName: "node-a" })),
});

/** The test API server in the node's namespace, driven over its stdin. */
class ApiChild {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #lines: AsyncIterator<string>;

  constructor(ns: string) {
    const root = new URL("../..", import.meta.url).pathname;
    this.#child = new Deno.Command("ip", {
      args: [
        "netns",
        "exec",
        ns,
        Deno.execPath(),
        "run",
        "--allow-net",
        `${root}tests/faults/api_server_child.ts`,
      ],
      cwd: root,
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#writer = this.#child.stdin.getWriter();
    this.#lines = lines(this.#child.stdout);
  }

  /** Resolves with the server's URL once it listens. */
  async url(): Promise<string> {
    const first = await this.#lines.next();
    return JSON.parse(first.value as string).url;
  }

  /** Sends one command; resolves when the server did it. */
  async send(c: ApiCommand): Promise<void> {
    await this.#writer.write(new TextEncoder().encode(JSON.stringify(c) + "\n"));
    const r = await this.#lines.next();
    if (r.value !== "ok") throw new Error(`test API server: ${JSON.stringify(c.op)}: ${r.value}`);
  }

  async close(): Promise<void> {
    await this.#writer.close().catch(() => {});
    await this.#child.status;
  }
}

async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let pending = "";
  for await (const text of stream.pipeThrough(new TextDecoderStream())) {
    pending += text;
    let nl;
    while ((nl = pending.indexOf("\n")) >= 0) {
      yield pending.slice(0, nl);
      pending = pending.slice(nl + 1);
    }
  }
}

/** Runs the schedule for `seconds` with `seed` in `mode` (ipvs: on a kernel with IPVS, the VM). */
export async function runChaos(
  mode: "iptables" | "nftables" | "ipvs",
  seed: number,
  seconds: number,
  o: ChaosOptions = {},
): Promise<ChaosFigures> {
  const backend = mode === "iptables" ? o.iptablesBackend ?? "nft" : undefined;
  // Only iptables-legacy waits for the lock; iptables-nft (every other run here) ignores it.
  const lockBlocks = backend === "legacy";
  const rnd = random(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)];
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const t = new Topology();
  const wrap = await Deno.makeTempDir({ prefix: "kpd-chaos-wrap-" });
  const faultFile = `${wrap}/fault`;
  const lockFile = `${wrap}/xtables.lock`;
  // The drift's own iptables: legacy's takes the lock too, the test's file, not the host's.
  const iptables = backend === "legacy"
    ? ["env", `XTABLES_LOCKFILE=${lockFile}`, "iptables-legacy"]
    : ["iptables"];
  let lockHolder: Deno.ChildProcess | undefined;
  let lockedUntil = 0;
  const faults: Record<string, number> = {};
  const injected: Array<{ atMs: number; kind: string }> = [];
  const count = (kind: string) => {
    faults[kind] = (faults[kind] ?? 0) + 1;
    injected.push({ atMs: performance.now(), kind });
  };
  // Windows in which syncs could be failing (a failing tool, a restart), for /healthz.
  const failing: Array<[number, number]> = [];
  const procs: ProxyProcess[] = [];
  let supervising = true;
  let api: ApiChild | undefined;
  try {
    await t.init();
    const pods = [await t.addPod("pod-a", 8080), await t.addPod("pod-b", 8080)];
    // The wrapper: the test's own, never the product's; the real tool runs unless a fault is set.
    await Deno.writeTextFile(faultFile, "");
    for (const tool of WRAPPED_TOOLS) {
      const real = (await new Deno.Command("sh", { args: ["-c", `command -v ${tool}`] }).output()).stdout;
      const path = new TextDecoder().decode(real).trim();
      if (path === "") continue;
      await Deno.writeTextFile(
        `${wrap}/${tool}`,
        `#!/bin/sh\ncase "$(cat ${faultFile})" in\n` +
          `fail) cat >/dev/null; echo "${INJECTED}" >&2; exit 1;;\n` +
          `noop) cat >/dev/null; exit 0;;\n` +
          // exec: the deadline's kill must reach the sleeping process itself.
          `hang) exec sleep 3600;;\nesac\nexec ${path} "$@"\n`,
      );
      await Deno.chmod(`${wrap}/${tool}`, 0o755);
    }
    api = new ApiChild(t.node);
    const url = await api.url();
    await api.send({
      op: "apply",
      resource: "nodes",
      object: {
        apiVersion: "v1",
        kind: "Node",
        metadata: { name: "node-a" },
        status: { addresses: [{ type: "InternalIP", address: t.nodeIP }] },
      } as never,
    });
    // Service i -> its endpoints; undefined: deleted.
    const want = new Map<number, Pod[] | undefined>();
    for (let i = 1; i <= SERVICES; i++) {
      want.set(i, [...pods]);
      await api.send({ op: "apply", resource: "services", object: service(i) });
      await api.send({ op: "apply", resource: "endpointslices", object: slice(i, pods) });
    }
    const env = {
      PATH: `${wrap}:${Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin"}`,
      XTABLES_LOCKFILE: lockFile,
    };
    let unexpectedExits = 0;
    const killed = new Set<ProxyProcess>();
    const start = (): ProxyProcess => {
      const p = t.startProxy(
        [
          `--proxy-mode=${mode}`,
          `--master=${url}`,
          "--hostname-override=node-a",
          "--cluster-cidr=10.180.0.0/16",
          `--${mode === "ipvs" ? "ipvs" : "iptables"}-min-sync-period=100ms`,
          `--${mode === "ipvs" ? "ipvs" : "iptables"}-sync-period=${SYNC_PERIOD_MS}ms`,
          `--kernel-tool-timeout=${TOOL_TIMEOUT_MS}ms`,
          ...backend !== undefined ? [`--iptables-backend=${backend}`] : [],
          "--healthz-bind-address=127.0.0.1:10256",
          "--metrics-bind-address=127.0.0.1:10249",
        ],
        t.node,
        env,
      );
      procs.push(p);
      // A supervisor's restart; the exit is counted and its log kept in the figures' failure.
      p.exited.then(() => {
        if (killed.has(p) || !supervising) return;
        unexpectedExits++;
        console.error(`chaos: the program exited on its own; its log ends:\n${p.log().slice(-3000)}`);
        proxy = start();
      });
      return p;
    };
    let proxy = start();
    const answered = async () => /^pod-[ab]$/.test(await t.nodeAgent.tcp("172.30.60.1", 80, 500 * SLOW));
    // Service 1 stays as it is: the probe measures how long it goes unanswered.
    await eventually(async () => assertEquals(await answered(), true), 30_000 * SLOW);
    let longest = 0, recoveries = 0, lastOk = performance.now(), down = false, probing = true;
    let longestFrom = 0, longestTo = 0;
    let unjustified503 = 0;
    const justified = (at: number) => failing.some(([a, b]) => at >= a && at <= b + HEALTH_GRACE_MS);
    const probe = (async () => {
      while (probing) {
        const ok = await answered();
        const now = performance.now();
        if (ok) {
          if (down) recoveries++;
          down = false;
          lastOk = now;
        } else {
          down = true;
          if (now - lastOk > longest) [longest, longestFrom, longestTo] = [now - lastOk, lastOk, now];
        }
        const health = await t.nodeAgent.http("127.0.0.1", 10256, 500 * SLOW, "/healthz");
        if (health.startsWith("503") && !justified(performance.now())) unjustified503++;
        await sleep(100);
      }
    })();
    let changes = 0, stalledUntil = 0;
    const churn = async () => {
      // Never the probed Service: endpoints move, or a Service goes or comes back.
      const i = 2 + Math.floor(rnd() * (SERVICES - 1));
      if (rnd() < 0.2) {
        if (want.get(i) === undefined) {
          want.set(i, [...pods]);
          await api!.send({ op: "apply", resource: "services", object: service(i) });
          await api!.send({ op: "apply", resource: "endpointslices", object: slice(i, pods) });
        } else {
          want.set(i, undefined);
          await api!.send({
            op: "delete",
            resource: "endpointslices",
            namespace: "chaos",
            name: `svc-${i}-1`,
          });
          await api!.send({ op: "delete", resource: "services", namespace: "chaos", name: `svc-${i}` });
        }
      } else if (want.get(i) !== undefined) {
        const eps = pick([[pods[0]], [pods[1]], [...pods], []]);
        want.set(i, eps);
        await api!.send({ op: "apply", resource: "endpointslices", object: slice(i, eps) });
      }
      changes++;
    };
    /** Injects one fault; false when it cannot run now (a second stall or lock holder). */
    const inject = async (kind: FaultKind): Promise<boolean> => {
      if (kind === "tool-fail" || kind === "tool-noop" || kind === "tool-hang") {
        const tool = kind.slice("tool-".length);
        count(kind);
        const from = performance.now();
        await Deno.writeTextFile(faultFile, tool);
        await sleep((300 + rnd() * 1200) * SLOW);
        await Deno.writeTextFile(faultFile, "");
        // A no-op restore makes a sync "succeed" with the kernel behind; not a failing window.
        // A tool started while hanging fails at its deadline.
        if (tool === "fail") failing.push([from, performance.now()]);
        if (tool === "hang") failing.push([from, performance.now() + TOOL_TIMEOUT_MS]);
      } else if (kind.startsWith("api-")) {
        // One stall at a time: back to back they would be one API server down for good.
        const ms = o.stallMs ?? 3000;
        if (kind === "api-stall" && performance.now() < stalledUntil) return false;
        count(kind);
        if (kind === "api-failLists") await api!.send({ op: "failLists", n: 3 });
        else if (kind === "api-stall") {
          stalledUntil = performance.now() + ms;
          await api!.send({ op: "stall", ms });
        } else await api!.send({ op: kind.slice("api-".length) as "dropWatches" | "compact" | "restart" });
      } else if (kind === "sigkill") {
        count(kind);
        const from = performance.now();
        killed.add(proxy);
        await proxy.stop("SIGKILL");
        proxy = start();
        // Until the new process has synced; the grace covers its start.
        failing.push([from, performance.now() + 5000 * SLOW]);
      } else if (kind === "xtables-lock") {
        // Held in the background while the schedule goes on; one holder at a time.
        if (performance.now() < lockedUntil) return false;
        count(kind);
        const from = performance.now();
        lockedUntil = from + LOCK_HOLD_MS;
        lockHolder = await holdXtablesLock(lockFile, LOCK_HOLD_MS / 1000);
        if (lockBlocks) failing.push([from, lockedUntil]);
      } else {
        count(kind);
        const i = 1 + Math.floor(rnd() * SERVICES);
        const drift = mode === "iptables"
          ? pick([[...iptables, "-t", "nat", "-F"], [...iptables, "-t", "nat", "-D", "KUBE-SERVICES", "1"]])
          : mode === "nftables"
          ? pick([
            ["nft", "flush", "table", "ip", "kube-proxy"],
            ["nft", "flush", "map", "ip", "kube-proxy", "service-ips"],
          ])
          : pick([
            ["ipvsadm", "-d", "-t", `172.30.60.${i}:80`, "-r", `${pick(pods).ip}:8080`],
            ["ip", "addr", "del", `172.30.60.${i}/32`, "dev", "kube-ipvs0"],
          ]);
        await t.exec(t.node, drift, { allowFail: true });
      }
      return true;
    };
    /** A random step, with the schedule's weights: mostly churn and drift, now and then a kill or the lock. */
    const randomStep = (): "churn" | FaultKind => {
      const r = rnd();
      return r < 0.45
        ? "churn"
        : r < 0.6
        ? pick(["tool-fail", "tool-noop", "tool-hang"] as const)
        : r < 0.75
        ? pick(["api-dropWatches", "api-compact", "api-failLists", "api-restart", "api-stall"] as const)
        : r < 0.8
        ? "sigkill"
        : r < 0.83
        ? "xtables-lock"
        : "drift";
    };
    // The opening: every kind once, in a seeded order, each after a churn step.
    const opening: FaultKind[] = [...FAULT_KINDS];
    for (let i = opening.length - 1; i > 0; i--) {
      const j = Math.floor(rnd() * (i + 1));
      [opening[i], opening[j]] = [opening[j], opening[i]];
    }
    const began = performance.now();
    const end = began + seconds * 1000;
    const cap = end + OPENING_CAP_MS * SLOW;
    let churnNext = true;
    for (;;) {
      const now = performance.now();
      if ((now >= end && opening.length === 0) || now >= cap) break;
      if (opening.length > 0) {
        if (churnNext) await churn();
        else await inject(opening.shift()!);
        churnNext = !churnNext;
      } else {
        const next = randomStep();
        if (next === "churn") await churn();
        else if (!await inject(next)) continue;
      }
      // The emulated VM restarts and syncs SLOW times slower: the schedule keeps its pace relative to it.
      await sleep((200 + rnd() * 300) * SLOW);
    }
    const ranMs = Math.round(performance.now() - began);
    await Deno.writeTextFile(faultFile, "");
    await api.send({ op: "stall", ms: 0 });
    await lockHolder?.status;
    const stopped = performance.now();
    // Converged: every Service where its final objects say, by trace over the live rules.
    const expected = (eps: Pod[] | undefined) =>
      eps === undefined
        ? "none"
        : eps.length === 0
        ? "REJECT"
        : `DNAT ${eps.map((p) => `${p.ip}:8080`).sort()}`;
    let lost = SERVICES;
    await eventually(async () => {
      lost = 0;
      for (const [i, eps] of want) {
        const r = await t.runProgram(["trace", `--dst=172.30.60.${i}`, "--dport=80", "--output=json"]);
        const got = r.code === 0 ? JSON.parse(r.stdout) : { verdict: `error ${r.stderr}`, endpoints: [] };
        const endpoints = got.endpoints.map((e: { endpoint: string }) => e.endpoint).sort();
        const seen = got.verdict === "DNAT" ? `DNAT ${endpoints}` : got.verdict;
        if (seen !== expected(eps)) lost++;
      }
      assertEquals(lost, 0);
    }, 30_000 * SLOW).catch(() => {});
    const convergedMs = Math.round(performance.now() - stopped);
    probing = false;
    await probe;
    const failures = procs.flatMap((p) => p.log().split("\n")).filter((l) => l.includes("Sync failed"));
    const behind = (faults["tool-noop"] ?? 0) + (faults.drift ?? 0) > 0;
    const unexplained = failures.filter((l) =>
      !l.includes(INJECTED) && !/no exit within/.test(l) && !(behind && KERNEL_BEHIND.test(l))
    );
    for (const l of unexplained) console.error(`chaos: a sync failure no fault explains: ${l}`);
    return {
      mode,
      ...backend !== undefined ? { iptablesBackend: backend } : {},
      seed,
      seconds,
      slowdown: Math.round(SLOW * 10) / 10,
      faults,
      notRun: FAULT_KINDS.filter((k) => (faults[k] ?? 0) === 0),
      ranMs,
      changes,
      recoveries,
      longestOutageMs: Math.round(longest),
      longestOutageFaults: injected.filter((f) => f.atMs >= longestFrom - 2000 && f.atMs <= longestTo)
        .map((f) => `${((f.atMs - longestFrom) / 1000).toFixed(1)} s ${f.kind}`),
      convergedMs,
      lost,
      unjustified503,
      unexpectedExits,
      syncFailuresLogged: failures.length,
      unexplainedFailures: unexplained.length,
      unexplained,
    };
  } finally {
    supervising = false;
    try {
      lockHolder?.kill();
    } catch { /* already gone */ }
    await lockHolder?.status;
    for (const p of procs) await p.stop();
    await api?.close();
    await t.close();
    await Deno.remove(wrap, { recursive: true });
  }
}
