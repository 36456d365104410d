/**
 * Network programming latency of the real program, without a cluster: `deno task bench npl`.
 *
 * {@linkcode benchNpl} creates two network namespaces and runs this file inside the first as the
 * driver. The driver serves N Services x 10 endpoints from the test API server (or writes them as
 * one file per object), starts `main.ts` in iptables mode as `deno task start` does, waits for the
 * first sync, then makes M single-endpoint changes spread over the run and times each from the
 * change to the new endpoint's chain being in the kernel (asked every 25 ms). It reads sync counts from `/metrics` and RSS from /proc, stops the program
 * (timing SIGTERM to exit), and last measures the kernel's floor in the second namespace: the
 * rules as `iptables-save` prints them, restored with `--noflush` into an empty namespace, and a
 * one-endpoint partial restore (the proxier's own text for it) on top of them.
 * @module
 */
import { ChainWatch, sh } from "./chain_watch.ts";
import { DryRunExecutor } from "../iptables/dry_run.ts";
import { inputText } from "../iptables/executor.ts";
import type { IptablesBackendName, RestoreInput, RestoreOptions } from "../iptables/iptables.ts";
import { endpointChainName } from "../proxier/iptables/chain_name.ts";
import { IptablesProxier } from "../proxier/iptables/proxier.ts";
import { newModeDeps, proxierOptions } from "../proxier/mode_definition.ts";
import { iptablesMode } from "../proxier/iptables/mode.ts";
import { realClock } from "../proxier/runtime/clock.ts";
import { nullLogger } from "../proxier/runtime/logger.ts";
import { TestApiServer } from "../tests/support/api_server.ts";
import { startArgs } from "../tests/support/program.ts";
import { driverResult, withNamespaces } from "./namespace_driver.ts";
import { benchConfig, feedGenerated, generate, serveObjects, slice } from "./objects.ts";
import { median, percentile } from "./percentile.ts";
import { parseArgs } from "node:util";

const CLUSTER_CIDR = "10.0.0.0/8";

/** One configuration of the benchmark. */
export interface NplOptions {
  readonly services: number;
  readonly backend: IptablesBackendName;
  readonly source: "api" | "file";
  /** Single-endpoint changes made after the first sync. */
  readonly changes: number;
  /** Seconds the changes are spread over (more than two sync periods: > 60). */
  readonly spreadS: number;
}

/** What one run measured; times in seconds. */
export interface NplResult extends NplOptions {
  readonly firstSyncS: number;
  /** The proxy's own time for that first sync (from its full-sync histogram). */
  readonly firstSyncOwnS: number;
  readonly floorS: number | string;
  readonly partialFloorS: number | string;
  readonly npl: { median: number; p90: number; max: number; missed: number };
  /** The proxy's own network programming histogram: observations and sum. */
  readonly nplMetric: { count: number; sum: number };
  readonly fullSyncs: number;
  readonly partialSyncs: number;
  readonly rssAfterFirstSyncMiB: number;
  readonly rssEndMiB: number;
  readonly peakRssMiB: number;
  readonly stopS: number;
}

/** Runs one configuration in fresh namespaces (deleted afterwards, even on failure). */
export async function benchNpl(o: NplOptions): Promise<NplResult> {
  const id = crypto.randomUUID().slice(0, 8);
  return await withNamespaces(
    [`kpd-npl-${id}`, `kpd-npl-${id}-floor`],
    ([node, floor]) =>
      driverResult<NplResult>(node, import.meta.url, [
        `--services=${o.services}`,
        `--backend=${o.backend}`,
        `--source=${o.source}`,
        `--changes=${o.changes}`,
        `--spread=${o.spreadS}`,
        `--floor-ns=${floor}`,
      ], "npl"),
  );
}

/** The value of `name{ip_family="IPv4"}` in a Prometheus text page, or 0. */
function metric(page: string, name: string): number {
  const m = new RegExp(`^${name}\\{ip_family="IPv4"\\} (\\S+)$`, "m").exec(page);
  return m ? Number(m[1]) : 0;
}

function procStatus(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(Deno.readTextFileSync(`/proc/${pid}/status`));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The proxier's own partial restore text for one endpoint change of service `i`, both ways. */
async function partialTexts(n: number, i: number): Promise<[string, string]> {
  const texts: string[] = [];
  const recorder = {
    family: "IPv4" as const,
    save: () => Promise.resolve(""),
    tables: () => Promise.resolve(new Set<"nat">()),
    restoreAll: (input: RestoreInput, _o: RestoreOptions) => {
      texts.push(inputText(input));
      return Promise.resolve();
    },
    ensureChain: () => Promise.resolve(true),
    ensureRule: () => Promise.resolve(true),
    deleteRule: () => Promise.resolve(),
    chainExists: () => Promise.resolve(true),
    existingChains: () => Promise.resolve([]),
    listRules: () => Promise.resolve([]),
    deleteChain: () => Promise.resolve(),
  };
  const config = benchConfig({ clusterCIDRs: [CLUSTER_CIDR] });
  const deps = newModeDeps(config, {
    nodeName: "node-a",
    log: nullLogger,
    clock: realClock,
    exec: new DryRunExecutor(),
  });
  const p = new IptablesProxier({
    ...proxierOptions(deps, "IPv4", iptablesMode.schedulers(deps.config)),
    iptables: recorder,
    masqueradeAll: false,
    masqueradeBit: 14,
    nodePortAddresses: [],
    localhostNodePorts: true,
    nodeIPs: [],
  });
  feedGenerated(p, n);
  await p.syncNow();
  p.onEndpointSliceUpdate(slice(`svc-${i}`, i, 0), slice(`svc-${i}`, i, 1));
  await p.syncNow();
  p.onEndpointSliceUpdate(slice(`svc-${i}`, i, 1), slice(`svc-${i}`, i, 0));
  await p.syncNow();
  return [texts[1], texts[2]];
}

/** Times `tool --noflush` of `text` in namespace `ns`; a string says why there is no figure. */
async function timedRestore(ns: string, tool: string, text: string): Promise<number | string> {
  const t = performance.now();
  const r = await sh("ip", ["netns", "exec", ns, tool, "--noflush", "-w", "5"], text);
  const s = (performance.now() - t) / 1000;
  return r.code === 0 ? Number(s.toFixed(2)) : `failed: ${r.err.trim().slice(0, 200)}`;
}

async function driver(o: NplOptions & { floorNs: string }): Promise<NplResult> {
  const { services, slices } = generate(o.services);
  const metricsPort = 10249;
  let source: string[];
  let api: TestApiServer | undefined;
  let dir: string | undefined;
  let watch: ChainWatch | undefined;
  let proxy: Deno.ChildProcess | undefined;
  try {
    if (o.source === "api") {
      api = serveObjects(new TestApiServer(), services, slices);
      source = [`--master=${api.start()}`];
    } else {
      dir = await Deno.makeTempDir({ prefix: "kpd-npl-" });
      for (const s of services) {
        await Deno.writeTextFile(
          `${dir}/${s.metadata!.name}.json`,
          JSON.stringify({ apiVersion: "v1", kind: "Service", ...s }),
        );
      }
      for (const s of slices) {
        await Deno.writeTextFile(
          `${dir}/${s.metadata!.name}.json`,
          JSON.stringify({ apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice", ...s }),
        );
      }
      source = [`--source=file:${dir}`];
    }
    watch = await ChainWatch.create(o.backend, "kpd-npl-shim-");
    const t0 = performance.now();
    if (Deno.env.get("NPL_LOG")) console.error("spawn at", new Date().toISOString());
    proxy = new Deno.Command(Deno.execPath(), {
      args: startArgs([
        "--proxy-mode=iptables",
        `--iptables-backend=${o.backend}`,
        "--hostname-override=node-a",
        `--cluster-cidr=${CLUSTER_CIDR}`,
        `--metrics-bind-address=127.0.0.1:${metricsPort}`,
        "--healthz-bind-address=127.0.0.1:10256",
        ...(Deno.env.get("NPL_LOG") ? ["--v=4"] : []),
        ...source,
      ]),
      env: await watch.env(),
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    if (Deno.env.get("NPL_RSSWATCH")) {
      new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", Deno.env.get("NPL_RSSWATCH")!, String(proxy.pid)],
      }).spawn();
    }
    const logChunks: string[] = [];
    const drained = (async () => {
      for await (const t of proxy.stderr.pipeThrough(new TextDecoderStream())) {
        logChunks.push(t);
        if (Deno.env.get("NPL_LOG")) Deno.stderr.writeSync(new TextEncoder().encode(t));
      }
    })().catch(() => {});
    const page = async () => {
      try {
        return await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      } catch (e) {
        if (Deno.env.get("NPL_LOG")) console.error("metrics:", String(e));
        return "";
      }
    };
    // Start to programmed: the first full sync is observed once its restore returned.
    let firstSyncS = NaN;
    let firstSyncOwnS = NaN;
    for (const end = t0 + 30 * 60_000; performance.now() < end;) {
      const p = await page();
      if (metric(p, "kubeproxy_sync_full_proxy_rules_duration_seconds_count") >= 1) {
        firstSyncS = (performance.now() - t0) / 1000;
        firstSyncOwnS = metric(p, "kubeproxy_sync_full_proxy_rules_duration_seconds_sum");
        break;
      }
      await sleep(10);
    }
    if (Number.isNaN(firstSyncS)) throw new Error(`no first sync within 30 min:\n${logChunks.join("")}`);
    await sleep(2000);
    const rssAfterFirstSyncMiB = procStatus(proxy.pid, "VmRSS");

    // Single-endpoint changes, one at a time, spread evenly; each timed to its chain in the kernel.
    const latencies: number[] = [];
    let missed = 0;
    const spacingMs = (o.spreadS * 1000) / o.changes;
    const start = performance.now();
    let settled = start;
    for (let c = 0; c < o.changes; c++) {
      // On schedule, but never before the previous change reached the kernel (a miss must not
      // turn the rest into a burst).
      await sleep(Math.max(0, start + c * spacingMs - performance.now(), settled + 250 - performance.now()));
      // Distinct services (7919 is prime), each moved once from generation 0.
      const i = (c * 7919) % o.services;
      const g = c + 1;
      const s = slice(`svc-${i}`, i, g);
      const ep = `${s.endpoints![0].addresses[0]}:8080`;
      const chain = endpointChainName(`bench/svc-${i}:http`, "TCP", ep);
      // As the EndpointSlice controller does, so the program's own latency metric has a start.
      s.metadata!.annotations = {
        "endpoints.kubernetes.io/last-change-trigger-time": new Date().toISOString(),
      };
      const body = { apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice", ...s };
      await watch.forget();
      const at = Date.now();
      if (api !== undefined) api.apply("endpointslices", body);
      else {
        // As operators should (README, file source): write aside, then rename into place. A file
        // written in place is applied only once quiet for 600 ms.
        const tmp = `${dir}/.${s.metadata!.name}.json.tmp`;
        await Deno.writeTextFile(tmp, JSON.stringify(body));
        await Deno.rename(tmp, `${dir}/${s.metadata!.name}.json`);
      }
      const seen = await watch.appeared(chain, 60_000);
      settled = performance.now();
      if (seen === undefined) missed++;
      else latencies.push(Math.max(0, seen - at) / 1000);
    }
    await sleep(1000);
    const p = await page();
    const rssEndMiB = procStatus(proxy.pid, "VmRSS");
    const peakRssMiB = procStatus(proxy.pid, "VmHWM");
    const tStop = performance.now();
    proxy.kill("SIGTERM");
    await proxy.status;
    const stopS = Number(((performance.now() - tStop) / 1000).toFixed(2));
    await drained;

    // The floor, after the program stopped: its rules in iptables-save's form into an empty namespace.
    const tool = `iptables-${o.backend}`;
    let canonical = "";
    for (const t of ["filter", "nat"]) {
      const r = await sh(`${tool}-save`, ["-t", t]);
      canonical += r.out.split("\n").filter((l) => !l.startsWith("#")).join("\n");
    }
    const floorS = await timedRestore(o.floorNs, `${tool}-restore`, canonical);
    // One partial restore on top (median of 6, alternating there and back so each applies cleanly).
    const [there, back] = await partialTexts(o.services, Math.floor(o.services / 3));
    const partials: number[] = [];
    let partialFloorS: number | string = "not run";
    if (typeof floorS === "number") {
      for (let k = 0; k < 6; k++) {
        const r = await timedRestore(o.floorNs, `${tool}-restore`, k % 2 === 0 ? there : back);
        if (typeof r !== "number") {
          partialFloorS = r;
          break;
        }
        partials.push(r);
      }
      if (partials.length === 6) partialFloorS = median(partials);
    }
    latencies.sort((a, b) => a - b);
    const r3 = (x: number) => Number(x.toFixed(3));
    return {
      ...o,
      firstSyncS: r3(firstSyncS),
      firstSyncOwnS: r3(firstSyncOwnS),
      floorS,
      partialFloorS,
      npl: {
        median: r3(percentile(latencies, 0.5)),
        p90: r3(percentile(latencies, 0.9)),
        max: r3(latencies.at(-1) ?? NaN),
        missed,
      },
      nplMetric: {
        count: metric(p, "kubeproxy_network_programming_duration_seconds_count"),
        sum: r3(metric(p, "kubeproxy_network_programming_duration_seconds_sum")),
      },
      fullSyncs: metric(p, "kubeproxy_sync_full_proxy_rules_duration_seconds_count"),
      partialSyncs: metric(p, "kubeproxy_sync_partial_proxy_rules_duration_seconds_count"),
      rssAfterFirstSyncMiB,
      rssEndMiB,
      peakRssMiB,
      stopS,
    };
  } finally {
    try {
      proxy?.kill("SIGKILL");
    } catch { /* exited */ }
    await api?.stop();
    if (dir !== undefined) await Deno.remove(dir, { recursive: true });
    await watch?.close();
  }
}

if (import.meta.main) {
  const { values: v } = parseArgs({
    args: Deno.args,
    options: {
      services: { type: "string", default: "1000" },
      backend: { type: "string", default: "nft" },
      source: { type: "string", default: "api" },
      changes: { type: "string", default: "60" },
      spread: { type: "string", default: "180" },
      "floor-ns": { type: "string" },
    },
  });
  const o: NplOptions = {
    services: Number(v.services),
    backend: v.backend as IptablesBackendName,
    source: v.source as "api" | "file",
    changes: Number(v.changes),
    spreadS: Number(v.spread),
  };
  const r = v["floor-ns"] === undefined ? await benchNpl(o) : await driver({ ...o, floorNs: v["floor-ns"] });
  console.log(JSON.stringify(r));
}
