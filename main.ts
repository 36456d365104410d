/**
 * kube-proxy-deno: the entry point. The only module that reads `Deno.args` and `Deno.env`; it
 * parses flags, builds the proxier of the chosen mode and wires sources, servers and signals.
 * @module
 */
import { KubeConfig } from "@kubernetes/client-node";
import { ConntrackRunner } from "./iptables/conntrack.ts";
import { DenoExecutor, type Executor } from "./iptables/executor.ts";
import { type IPTables, IptablesRunner } from "./iptables/iptables.ts";
import { FakeIPTables } from "./iptables/testing/fake_iptables.ts";
import { type Clock, realClock } from "./proxier/clock.ts";
import { FileSource } from "./proxier/config/file.ts";
import { KubernetesSource } from "./proxier/config/kubernetes.ts";
import { ProxyHealth, serveHealthz } from "./proxier/healthcheck/proxier_health.ts";
import { cleanupIptables, IptablesProxier } from "./proxier/iptables/proxier.ts";
import { flushLogging, type Logger, nullLogger, setupLogging } from "./proxier/logger.ts";
import { MetaProxier } from "./proxier/meta_proxier.ts";
import { ProxyMetrics } from "./proxier/metrics.ts";
import { cidrContains } from "./proxier/net.ts";
import { UsageError } from "./proxier/errors.ts";
import type { ProxyConfig } from "./proxier/options/config.ts";
import { parseCommandLine, USAGE, VERSION } from "./proxier/options/flags.ts";
import type { BaseProxierOptions, Provider } from "./proxier/base_proxier.ts";
import { ServiceHealthServer } from "./proxier/healthcheck/service_health.ts";
import type { IPFamily } from "./proxier/types.ts";
import { cleanupUserspace } from "./proxier/userspace/portals.ts";
import { UserspaceProxier } from "./proxier/userspace/proxier.ts";

const encoder = new TextEncoder();
function print(stream: { writeSync(p: Uint8Array): number }, text: string): void {
  const data = encoder.encode(text);
  let off = 0;
  while (off < data.length) off += stream.writeSync(data.subarray(off));
}

/** Runs the program; returns the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  let cmd;
  try {
    cmd = parseCommandLine(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    print(Deno.stderr, `kube-proxy-deno: ${e.message}\nRun 'kube-proxy-deno --help' for usage.\n`);
    return 2;
  }
  if (cmd.command === "help") {
    print(Deno.stdout, USAGE);
    return 0;
  }
  if (cmd.command === "version") {
    print(Deno.stdout, `kube-proxy-deno ${VERSION}\n`);
    return 0;
  }
  const { config } = cmd;
  const log = await setupLogging(config.loggingFormat, config.verbosity);
  for (const w of cmd.warnings) log.warn(w);
  const exec = new DenoExecutor();
  if (cmd.command === "cleanup") return await cleanup(exec, log);
  if (cmd.command === "render") return await render(config, log);
  return await run(config, exec, log);
}

async function cleanup(exec: Executor, log: Logger): Promise<number> {
  let failed = false;
  for (const family of ["IPv4", "IPv6"] as const) {
    const ipt = new IptablesRunner({ exec, family });
    try {
      await cleanupUserspace(ipt);
      await cleanupIptables(ipt);
    } catch (e) {
      failed = true;
      log.error("Cleanup failed", { family, error: (e as Error).message });
    }
  }
  log.info("Cleanup done", { ok: !failed });
  return failed ? 1 : 0;
}

/** Returns an iptables runner for `family` when we are root and the tool works, else undefined. */
async function probeIptables(
  exec: Executor,
  log: Logger,
  family: IPFamily,
): Promise<IptablesRunner | undefined> {
  const ipt = new IptablesRunner({ exec, family });
  if (Deno.uid() !== 0) return undefined;
  try {
    const version = await ipt.version();
    await ipt.save("nat");
    log.info("Using iptables", { family, version });
    return ipt;
  } catch (e) {
    log.warn("iptables is not usable", { family, error: (e as Error).message });
    return undefined;
  }
}

/** Options shared by the proxiers of every family. */
interface ProxierDeps {
  readonly config: ProxyConfig;
  readonly nodeName: string;
  readonly log: Logger;
  readonly clock: Clock;
  readonly metrics: ProxyMetrics;
  readonly health: ProxyHealth;
}

/** Returns the options every proxier of `family` shares. */
function proxierBase(d: ProxierDeps, family: IPFamily): BaseProxierOptions {
  return {
    family,
    nodeName: d.nodeName,
    log: d.log,
    clock: d.clock,
    metrics: d.metrics,
    health: d.health,
    minSyncPeriodMs: d.config.minSyncPeriodMs,
    syncPeriodMs: d.config.syncPeriodMs,
  };
}

/** Builds one family's iptables proxier. */
function iptablesProxier(
  d: ProxierDeps,
  family: IPFamily,
  iptables: IPTables,
  extra: { conntrack?: ConntrackRunner; healthServer?: ServiceHealthServer; nodeIPs: string[] },
): IptablesProxier {
  const c = d.config;
  return new IptablesProxier({
    ...proxierBase(d, family),
    iptables,
    masqueradeAll: c.masqueradeAll,
    masqueradeBit: c.masqueradeBit,
    clusterCIDRs: c.clusterCIDRs,
    detectLocalMode: c.detectLocalMode,
    nodePortAddresses: c.nodePortAddresses,
    localhostNodePorts: c.localhostNodePorts,
    ...extra,
  });
}

/**
 * `render`: the restore input a full sync would apply for the objects in --source, computed by
 * the real proxier on a fake iptables; touches nothing.
 */
async function render(config: ProxyConfig, log: Logger): Promise<number> {
  if (config.source.kind !== "file") {
    print(Deno.stderr, "kube-proxy-deno: render needs --source=file:PATH\n");
    return 2;
  }
  if (config.mode !== "iptables") {
    print(Deno.stderr, `kube-proxy-deno: render supports --proxy-mode=iptables only\n`);
    return 2;
  }
  const clock = realClock;
  const metrics = new ProxyMetrics();
  const d: ProxierDeps = {
    config,
    nodeName: config.hostnameOverride || "render",
    log: nullLogger,
    clock,
    metrics,
    health: new ProxyHealth({ clock, timeoutMs: 2 * config.syncPeriodMs }),
  };
  const fakes = { IPv4: new FakeIPTables("IPv4"), IPv6: new FakeIPTables("IPv6") };
  const proxiers = (["IPv4", "IPv6"] as const).map((f) => iptablesProxier(d, f, fakes[f], { nodeIPs: [] }));
  const meta = new MetaProxier(proxiers);
  try {
    await new FileSource({ path: config.source.path, nodeName: d.nodeName, handler: meta, log }).load();
  } catch (e) {
    print(Deno.stderr, `kube-proxy-deno: --source: ${(e as Error).message}\n`);
    return 1;
  }
  for (const p of proxiers) {
    await p.syncNow();
    // The IPv6 rule set is printed only when some Service has an IPv6 cluster IP.
    if (p.family === "IPv6" && p.serviceCount === 0) continue;
    const tool = p.family === "IPv4" ? "iptables" : "ip6tables";
    print(Deno.stdout, `# ${tool}-restore --noflush input\n${p.lastRestore}`);
  }
  return 0;
}

/** The local addresses NodePorts answer on: those inside `--nodeport-addresses`, or all. */
function nodePortAddresses(cidrs: readonly string[]): string[] {
  if (cidrs.length === 0) return ["0.0.0.0"];
  return Deno.networkInterfaces()
    .filter((i) => i.family === "IPv4" && cidrs.some((c) => cidrContains(c, i.address)))
    .map((i) => i.address);
}

async function run(config: ProxyConfig, exec: Executor, log: Logger): Promise<number> {
  const nodeName = config.hostnameOverride || Deno.hostname().toLowerCase();
  const clock = realClock;
  const metrics = new ProxyMetrics();
  const health = new ProxyHealth({ clock, timeoutMs: 2 * config.syncPeriodMs });
  let proxier: Provider & { close?(): void };
  let healthServer: ServiceHealthServer | undefined;
  const d: ProxierDeps = { config, nodeName, log, clock, metrics, health };
  if (config.mode === "iptables") {
    const nodeIPs = Deno.networkInterfaces().map((i) => i.address);
    healthServer = new ServiceHealthServer({ log });
    const families: IptablesProxier[] = [];
    for (const family of ["IPv4", "IPv6"] as const) {
      const ipt = await probeIptables(exec, log, family);
      if (ipt === undefined) continue;
      families.push(iptablesProxier(d, family, ipt, {
        conntrack: new ConntrackRunner({ exec, family }),
        healthServer,
        nodeIPs,
      }));
    }
    if (families.length === 0) {
      log.error("iptables mode needs root and a working iptables; try --proxy-mode=userspace");
      return 1;
    }
    if (config.localhostNodePorts && families[0].family === "IPv4") await enableRouteLocalnet(log);
    proxier = families.length === 1 ? families[0] : new MetaProxier(families);
  } else if (config.mode === "userspace") {
    proxier = new UserspaceProxier({
      ...proxierBase(d, "IPv4"),
      iptables: config.userspacePortals ? await probeIptables(exec, log, "IPv4") : undefined,
      listenAddress: config.bindAddress,
      nodePortAddresses: nodePortAddresses(config.nodePortAddresses),
      portRange: config.portRange,
      udpIdleTimeoutMs: config.udpIdleTimeoutMs,
    });
  } else {
    print(Deno.stderr, `kube-proxy-deno: --proxy-mode: mode "${config.mode}" is not built yet\n`);
    return 2;
  }

  const ac = new AbortController();
  const stop = () => {
    if (!ac.signal.aborted) log.info("Shutting down; the datapath stays in place");
    ac.abort();
  };
  Deno.addSignalListener("SIGTERM", stop);
  Deno.addSignalListener("SIGINT", stop);
  const tasks: Promise<unknown>[] = [];
  try {
    if (config.healthzBindAddress !== undefined) {
      tasks.push(serveHealthz(health, config.healthzBindAddress, ac.signal).finished);
    }
    if (config.metricsBindAddress !== undefined) {
      tasks.push(
        Deno.serve({ ...config.metricsBindAddress, signal: ac.signal, onListen() {} }, async (req) => {
          if (new URL(req.url).pathname !== "/metrics") return new Response("not found\n", { status: 404 });
          return new Response(await metrics.registry.metrics(), {
            headers: { "content-type": metrics.registry.contentType },
          });
        }).finished,
      );
    }
  } catch (e) {
    log.error("Cannot listen", { error: (e as Error).message });
    return 1;
  }
  log.info("Starting kube-proxy-deno", {
    version: VERSION,
    mode: config.mode,
    node: nodeName,
    source: config.source.kind,
  });
  tasks.push(proxier.syncLoop(ac.signal));
  if (config.source.kind === "file") {
    const src = new FileSource({ path: config.source.path, nodeName, handler: proxier, log });
    try {
      await src.load();
    } catch (e) {
      log.error("Cannot read --source", { path: config.source.path, error: (e as Error).message });
      ac.abort();
      await Promise.allSettled(tasks);
      return 1;
    }
    tasks.push(src.watch(ac.signal));
  } else {
    const kc = new KubeConfig();
    try {
      if (config.kubeconfig !== "") kc.loadFromFile(config.kubeconfig);
      else if (config.master !== "") {
        kc.loadFromOptions({
          clusters: [{ name: "master", server: config.master, skipTLSVerify: false }],
          users: [{ name: "anonymous" }],
          contexts: [{ name: "master", cluster: "master", user: "anonymous" }],
          currentContext: "master",
        });
      } else kc.loadFromDefault();
      if (config.master !== "" && config.kubeconfig !== "") {
        const cluster = kc.getCurrentCluster();
        if (cluster) (cluster as { server: string }).server = config.master;
      }
    } catch (e) {
      log.error("Cannot load kubeconfig", { error: (e as Error).message });
      ac.abort();
      await Promise.allSettled(tasks);
      return 1;
    }
    tasks.push(
      new KubernetesSource({ kubeConfig: kc, nodeName, handler: proxier, log, clock }).run(ac.signal),
    );
  }
  await Promise.allSettled(tasks);
  proxier.close?.();
  healthServer?.close();
  Deno.removeSignalListener("SIGTERM", stop);
  Deno.removeSignalListener("SIGINT", stop);
  return 0;
}

if (import.meta.main) {
  const code = await main(Deno.args);
  await flushLogging();
  Deno.exit(code);
}

/** NodePorts on 127.0.0.1 need the kernel to route localnet traffic, as upstream sets. */
async function enableRouteLocalnet(log: Logger): Promise<void> {
  const path = "/proc/sys/net/ipv4/conf/all/route_localnet";
  try {
    if ((await Deno.readTextFile(path)).trim() !== "1") await Deno.writeTextFile(path, "1");
  } catch (e) {
    log.warn("Cannot enable route_localnet; NodePorts on 127.0.0.1 will not work", {
      error: (e as Error).message,
    });
  }
}
