/**
 * kube-proxy-deno: the entry point. The only module that reads `Deno.args` and `Deno.env`; it
 * parses flags, looks the chosen mode up in the registry and wires sources, servers and signals.
 * It names no mode.
 * @module
 */
import { DryRunExecutor } from "./iptables/dry_run.ts";
import { DenoExecutor, ExecError, type Executor } from "./iptables/executor.ts";
import { type Clock, realClock } from "./proxier/runtime/clock.ts";
import { retryStart } from "./proxier/runtime/start_retry.ts";
import { setConntrackSysctls } from "./proxier/conntrack/sysctls.ts";
import { SysctlRunner } from "./iptables/sysctl.ts";
import { keepListening, ListenError } from "./proxier/healthcheck/listener.ts";
import { setOwnOomScoreAdj } from "./proxier/runtime/oom_score.ts";
import { ProxyMetrics } from "./proxier/metrics.ts";
import { ApiEventRecorder, type EventRecorder, nodeRef, nullRecorder } from "./proxier/runtime/events.ts";
import type { KubeProxyConfiguration } from "./proxier/options/kube_proxy_configuration.ts";
import { encodeConfig } from "./proxier/options/write_config.ts";
import { type ApiAccess, loadApiAccess } from "./proxier/sources/api_access.ts";
import { ApiClient, prefetchLists } from "./proxier/sources/api_client.ts";
import { RateLimiter } from "./proxier/sources/rate_limiter.ts";
import { FileSource } from "./proxier/sources/file.ts";
import { KubeconfigError, ModeUnavailableError, UsageError } from "./proxier/errors.ts";
import { checkTools, onPath, PROCESS_TOOLS } from "./proxier/runtime/kernel_tools.ts";
import { serveMetrics, type StatusPages } from "./proxier/healthcheck/metrics_server.ts";
import { serveHealthz } from "./proxier/healthcheck/proxier_health.ts";
import { ServiceHealthServer } from "./proxier/healthcheck/service_health.ts";
import { flushLogging, type Logger, setupLogging, warningsOnly } from "./proxier/runtime/logger.ts";
import { type ModeProvider, newModeDeps, type ProxyModeDefinition } from "./proxier/mode_definition.ts";
import { MODES } from "./proxier/modes.ts";
import { type ProxyConfig, UPSTREAM_VERSION } from "./proxier/options/config.ts";
import { parseCommandLine } from "./proxier/options/command_line.ts";
import { VERSION } from "./proxier/runtime/version.ts";
import { runTrace } from "./proxier/trace/trace.ts";

const encoder = new TextEncoder();
function print(stream: { writeSync(p: Uint8Array): number }, text: string): void {
  const data = encoder.encode(text);
  let off = 0;
  while (off < data.length) off += stream.writeSync(data.subarray(off));
}

/**
 * Runs the program; returns the exit code. `stop` (for embedders such as the demo) ends a running
 * proxy as SIGTERM does.
 */
export async function main(argv: readonly string[], opts: { stop?: AbortSignal } = {}): Promise<number> {
  let cmd;
  try {
    cmd = parseCommandLine(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    print(Deno.stderr, `kube-proxy-deno: ${e.message}\nRun 'kube-proxy-deno --help' for usage.\n`);
    return 2;
  }
  if (cmd.command === "help") {
    print(Deno.stdout, cmd.usage);
    return 0;
  }
  if (cmd.command === "version") {
    print(Deno.stdout, `kube-proxy-deno ${VERSION}\n`);
    return 0;
  }
  const { config } = cmd;
  const log = await setupLogging(config.logging.format, config.logging.verbosity);
  for (const w of cmd.warnings) log.warn(w);
  if (cmd.command === "write-config") {
    return await writeConfig(cmd.kubeProxyConfiguration, cmd.writeConfigTo!, log);
  }
  const exec = new DenoExecutor({ timeoutMs: config.kernelToolTimeoutMs });
  if (cmd.command === "cleanup") return await cleanup(exec, log);
  // Every mode a flag or config file can name is built; parsing refused any other.
  const mode = MODES.get(config.mode)!;
  if (config.source.kind === "file") {
    try {
      await Deno.stat(config.source.path);
    } catch (e) {
      print(
        Deno.stderr,
        `kube-proxy-deno: --source: ${JSON.stringify(config.source.path)}: ${(e as Error).message}\n`,
      );
      return 2;
    }
  }
  if (cmd.command === "render") return await render(mode, config, log, cmd.renderNodeIPs);
  if (cmd.command === "trace") {
    return await runTrace({
      modes: MODES.values(),
      chosen: mode,
      config,
      query: cmd.trace!,
      exec,
      interfaceIPs: Deno.networkInterfaces().map((i) => i.address),
      stdout: (text) => print(Deno.stdout, text),
      stderr: (text) => print(Deno.stderr, text),
    });
  }
  for (const n of cmd.notApplying) log.warn(n);
  return await run(mode, config, exec, log, {
    initOnly: cmd.command === "init-only",
    stop: opts.stop,
    pages: {
      mode: config.mode,
      configuration: cmd.kubeProxyConfiguration,
      flags: cmd.flagValues,
      version: VERSION,
      emulates: `${UPSTREAM_VERSION.major}.${UPSTREAM_VERSION.minor}`,
      startedMs: performance.timeOrigin,
    },
  });
}

/** `--write-config-to`: the effective configuration in upstream's format; changes nothing else. */
async function writeConfig(c: KubeProxyConfiguration, path: string, log: Logger): Promise<number> {
  try {
    await Deno.writeTextFile(path, encodeConfig(c));
  } catch (e) {
    log.error("Cannot write the configuration", { file: path, error: (e as Error).message });
    return 1;
  }
  log.info("Wrote configuration", { file: path });
  return 0;
}

/**
 * Removes the kernel objects of every mode but `keep` (all with `--cleanup`), in both families. A
 * tool that is not installed has nothing to clean; any other failure is logged and the rest still
 * runs. Returns false when something failed.
 */
async function cleanupModes(exec: Executor, log: Logger, keep?: ProxyModeDefinition): Promise<boolean> {
  let ok = true;
  for (const family of ["IPv4", "IPv6"] as const) {
    for (const mode of MODES.values()) {
      if (mode === keep) continue;
      try {
        await mode.cleanup(exec, family, { everything: keep === undefined });
      } catch (e) {
        if (e instanceof ExecError && e.code === -1) continue; // the tool is not installed
        ok = false;
        log.error("Cleanup failed", { mode: mode.name, family, error: (e as Error).message });
      }
    }
  }
  return ok;
}

/** `--cleanup`: every mode's kernel objects, in both families; a failure does not stop the rest. */
async function cleanup(exec: Executor, log: Logger): Promise<number> {
  const ok = await cleanupModes(exec, log);
  log.info("Cleanup done", { ok });
  return ok ? 0 : 1;
}

/**
 * `render`: what a full sync would apply for the objects in --source, computed by the real proxier
 * on a dry-run executor; touches nothing.
 */
async function render(
  mode: ProxyModeDefinition,
  config: ProxyConfig,
  log: Logger,
  renderNodeIPs: readonly string[] | undefined,
): Promise<number> {
  if (config.source.kind !== "file") {
    print(Deno.stderr, "kube-proxy-deno: render needs --source=file:PATH\n");
    return 2;
  }
  if (mode.render === undefined) {
    print(Deno.stderr, `kube-proxy-deno: --proxy-mode: render does not support mode "${mode.name}"\n`);
    return 2;
  }
  const dryRun = new DryRunExecutor();
  const nodeName = config.hostnameOverride || "render";
  const renderer = await mode.render(
    // The live proxy's warnings (objects skipped, and why) on stderr; stdout stays the batches.
    newModeDeps(config, { nodeName, log: warningsOnly(log), clock: realClock, exec: dryRun, renderNodeIPs }),
    dryRun,
  );
  try {
    await new FileSource({
      path: config.source.path,
      nodeName,
      handler: renderer.handler,
      log: warningsOnly(log),
    })
      .load();
  } catch (e) {
    print(Deno.stderr, `kube-proxy-deno: --source: ${(e as Error).message}\n`);
    return 1;
  }
  print(Deno.stdout, await renderer.render());
  // Rules that depend on the node's addresses (NodePorts, a load balancer reaching itself) are only
  // as right as these: say which were used.
  print(Deno.stderr, `kube-proxy-deno: render: node addresses: ${renderer.nodeAddresses()}\n`);
  return 0;
}

/**
 * Runs the proxy (or, with `initOnly`, only its privileged set-up). Nothing touches the node until
 * the configuration, the kernel tools and the API access have been validated: a run that exits for
 * a configuration error leaves the node as it was.
 */
async function run(
  mode: ProxyModeDefinition,
  config: ProxyConfig,
  exec: Executor,
  log: Logger,
  o: { initOnly: boolean; stop?: AbortSignal; pages: StatusPages },
): Promise<number> {
  const missing = await checkTools(
    [...PROCESS_TOOLS, ...mode.tools],
    config,
    (t) => onPath(t, Deno.env.get("PATH")),
    log,
  );
  const required = missing.filter((m) => m.required);
  if (required.length > 0) {
    log.error(`${mode.name} mode cannot run: ${required.map((m) => m.tool).join(", ")} not found on PATH`, {
      tools: required.map((m) => `${m.tool}: ${m.without}`),
    });
    return 1;
  }
  const nodeName = config.hostnameOverride || Deno.hostname().toLowerCase();
  const clock = realClock;
  let access: ApiAccess | undefined;
  if (config.source.kind === "kubernetes") {
    try {
      access = await loadApiAccess({
        kubeconfig: config.kubeconfig,
        master: config.master,
        env: (name) => Deno.env.get(name),
        readFile: (path) => Deno.readTextFile(path),
      });
    } catch (e) {
      if (!(e instanceof KubeconfigError)) throw e;
      log.error("Cannot reach the API server as configured", { error: e.message });
      return 1;
    }
  }

  const metrics = new ProxyMetrics();
  const api = access === undefined ? undefined : apiClient(access, config, clock, metrics);
  const events: EventRecorder = api === undefined ? nullRecorder : new ApiEventRecorder({
    post: (p, b) => api.create(p, b),
    instance: `kube-proxy-${Deno.hostname()}`,
    log,
  });
  const node = nodeRef(nodeName);
  /** A Warning Event on this Node about starting the proxy (upstream's action `StartKubeProxy`). */
  const warnNode = (reason: string) => (note: string) =>
    events.record({ regarding: node, type: "Warning", reason, action: "StartKubeProxy", note });

  // The privileged set-up, as upstream's platformSetup: conntrack, then the mode's own sysctls.
  await tuneConntrack(config, exec, log, warnNode("FailedToSetConntrack"));
  // The proxy's health (deps below) decides the service health ports too, as upstream.
  const healthServer = new ServiceHealthServer({
    log,
    proxyHealthy: () => deps.health.status().healthy,
    events,
    nodeName,
  });
  const deps = newModeDeps(config, { nodeName, log, clock, exec, healthServer, metrics, events });
  try {
    await retryStart(config.mode, () => mode.setup?.(deps) ?? Promise.resolve(), { log, clock });
  } catch (e) {
    if (!(e instanceof ModeUnavailableError)) throw e;
    log.error(e.message);
    return 1;
  }
  if (o.initOnly) {
    log.info("System initialized and --init-only flag set; exiting");
    return 0;
  }
  await setOwnOomScoreAdj(exec, config.oomScoreAdj, log);

  const kubernetes = api === undefined ? undefined : startKubernetes(access!, api, config, nodeName, log);
  let proxier: ModeProvider;
  try {
    proxier = await retryStart(config.mode, () => mode.create(deps), { log, clock });
  } catch (e) {
    if (!(e instanceof ModeUnavailableError)) throw e;
    log.error(e.message);
    return 1;
  }
  // Switching modes: what another mode (ours or upstream's) left would shadow or fight ours. It
  // runs while the source loads; the first sync waits for it.
  const cleaned = Promise.all([cleanupModes(exec, log, mode), proxier.removeLeftovers?.()]);

  const ac = new AbortController();
  const stop = () => {
    if (!ac.signal.aborted) log.info(`Shutting down; ${proxier.onStop}`);
    ac.abort();
  };
  Deno.addSignalListener("SIGTERM", stop);
  Deno.addSignalListener("SIGINT", stop);
  o.stop?.addEventListener("abort", stop, { once: true });
  const tasks: Promise<unknown>[] = [];
  const listen = { signal: ac.signal, log, clock, hardFail: config.bindAddressHardFail };
  try {
    const hz = config.healthzBindAddress;
    if (hz !== undefined) {
      tasks.push(keepListening({
        ...listen,
        server: "Healthz",
        address: hz,
        onFailure: warnNode("FailedToStartProxierHealthcheck"),
        start: () =>
          serveHealthz(deps.health, hz, ac.signal, {
            healthz: deps.metrics.healthzTotal,
            livez: deps.metrics.livezTotal,
          }),
      }));
    }
    const m = config.metricsBindAddress;
    if (m !== undefined) {
      tasks.push(keepListening({
        ...listen,
        server: "Metrics",
        address: m,
        onFailure: warnNode("FailedToStartMetricServer"),
        start: () => serveMetrics(deps.metrics, m, ac.signal, o.pages),
      }));
    }
  } catch (e) {
    if (!(e instanceof ListenError)) throw e;
    log.error(e.message, { bindAddressHardFail: true });
    ac.abort();
    await Promise.allSettled(tasks);
    return 1;
  }
  events.record({ regarding: node, type: "Normal", reason: "Starting", action: "StartKubeProxy", note: "" });
  log.info("Starting kube-proxy-deno", {
    version: VERSION,
    mode: config.mode,
    node: nodeName,
    source: config.source.kind,
  });
  tasks.push(cleaned.then(() => proxier.syncLoop(ac.signal)));
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
    const k = await kubernetes!;
    const src = new k.KubernetesSource({
      access: access!,
      api,
      prefetched: k.prefetched,
      nodeName,
      handler: proxier,
      log,
      clock,
    });
    tasks.push(src.run(ac.signal));
  }
  await Promise.allSettled(tasks);
  proxier.close();
  healthServer.close();
  Deno.removeSignalListener("SIGTERM", stop);
  Deno.removeSignalListener("SIGINT", stop);
  return 0;
}

/**
 * Conntrack tuning (`conntrack:` / `--conntrack-*`). A setting the node refuses (a read-only
 * /proc/sys, nf_conntrack_max outside the host's namespace) is one warning naming each; the proxy
 * goes on, as upstream does when /sys is read-only.
 */
async function tuneConntrack(
  config: ProxyConfig,
  exec: Executor,
  log: Logger,
  warn: (note: string) => void,
): Promise<void> {
  const { failed } = await setConntrackSysctls(config.conntrack, {
    sysctl: new SysctlRunner({ exec }),
    cpus: navigator.hardwareConcurrency,
    log,
  });
  if (failed.length > 0) {
    log.warn("Cannot set these conntrack settings; the kernel's values stay (problems may arise later)", {
      settings: failed,
    });
    warn(`cannot modify conntrack settings, problems may arise later: ${failed.join("; ")}`);
  }
}

/**
 * Requests the first lists at once (while the informer module, the only part of the client library
 * loaded and only for this source, loads and the mode probes the kernel); every request of the
 * source goes through one `--kube-api-qps` / `--kube-api-burst` limiter.
 */
async function startKubernetes(
  access: ApiAccess,
  api: ApiClient,
  config: ProxyConfig,
  nodeName: string,
  log: Logger,
) {
  const informer = import("./proxier/sources/kubernetes.ts");
  informer.catch(() => {}); // awaited below
  const { qps, burst, contentType } = config.clientConnection;
  log.info("Using the API server", {
    server: access.server,
    from: access.origin,
    contentType: "application/json",
    ...(contentType === "application/json"
      ? {}
      : { requested: contentType, note: "this program reads JSON only" }),
    qps,
    burst,
  });
  const prefetched = prefetchLists(api, nodeName);
  const { KubernetesSource } = await informer;
  return { prefetched, KubernetesSource };
}

/**
 * The one API client of the process: every request (lists, watches, Events) passes one
 * `--kube-api-qps` / `--kube-api-burst` limiter and is counted in client-go's rest_client metrics.
 */
function apiClient(access: ApiAccess, config: ProxyConfig, clock: Clock, metrics: ProxyMetrics): ApiClient {
  const { qps, burst } = config.clientConnection;
  return new ApiClient(access, {
    limiter: new RateLimiter({ qps, burst, clock }),
    observe: (r) => {
      metrics.restClientRequestsTotal.inc({ code: r.code, host: r.host, method: r.method });
      metrics.restClientRequestDuration.observe({ host: r.host, verb: r.method }, r.seconds);
    },
  });
}

if (import.meta.main) {
  const code = await main(Deno.args);
  await flushLogging();
  Deno.exit(code);
}
