/**
 * kube-proxy-deno: the entry point. The only module that reads `Deno.args` and `Deno.env`; it
 * parses flags, looks the chosen mode up in the registry and wires sources, servers and signals.
 * It names no mode.
 * @module
 */
import { DenoExecutor, type Executor } from "./iptables/executor.ts";
import { realClock } from "./proxier/runtime/clock.ts";
import { retryStart } from "./proxier/runtime/start_retry.ts";
import { tuneConntrack } from "./proxier/conntrack/sysctls.ts";
import { modeSwitch, runCleanup } from "./proxier/commands/cleanup/cleanup.ts";
import { runRender } from "./proxier/commands/render/render.ts";
import { SysctlRunner } from "./iptables/sysctl.ts";
import { ListenError } from "./proxier/healthcheck/listener.ts";
import { setOwnOomScoreAdj } from "./proxier/runtime/oom_score.ts";
import { ProxyMetrics } from "./proxier/metrics.ts";
import { ApiEventRecorder, type EventRecorder, nodeRef, nullRecorder } from "./proxier/runtime/events.ts";
import { writeConfigFile } from "./proxier/options/write_config.ts";
import { exitOnConfigChange } from "./proxier/options/config_watch.ts";
import { type ApiAccess, type ApiAccessInputs, loadApiAccess } from "./proxier/sources/api_access.ts";
import { listOnce } from "./proxier/sources/list_once.ts";
import { runMigrate } from "./proxier/commands/migrate/migrate.ts";
import type { EventHandler } from "./proxier/sources/handlers.ts";
import { newApiClient, startApiSource } from "./proxier/sources/api_source.ts";
import { FileSource } from "./proxier/sources/file.ts";
import { KubeconfigError, ModeUnavailableError, UsageError } from "./proxier/errors.ts";
import { modeToolsPresent } from "./proxier/runtime/kernel_tools.ts";
import type { StatusPages } from "./proxier/healthcheck/metrics_server.ts";
import { serveStatus } from "./proxier/healthcheck/status_servers.ts";
import { ServiceHealthServer } from "./proxier/healthcheck/service_health.ts";
import { flushLogging, type Logger, setupLogging } from "./proxier/runtime/logger.ts";
import { type ModeProvider, newModeDeps, type ProxyModeDefinition } from "./proxier/mode_definition.ts";
import { MODES } from "./proxier/modes.ts";
import { type ProxyConfig, UPSTREAM_VERSION } from "./proxier/options/config.ts";
import { parseCommandLine } from "./proxier/cli/command_line.ts";
import { runExplain } from "./proxier/commands/explain/explain.ts";
import { onAbort } from "./proxier/runtime/abort.ts";
import { debugServices } from "./proxier/commands/explain/debug_services.ts";
import { VERSION } from "./proxier/runtime/version.ts";
import { writeText } from "./proxier/runtime/output.ts";
import { runTrace } from "./proxier/commands/trace/trace.ts";

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
    writeText(Deno.stderr, `kube-proxy-deno: ${e.message}\nRun 'kube-proxy-deno --help' for usage.\n`);
    return 2;
  }
  if (cmd.command === "help") {
    writeText(Deno.stdout, cmd.usage);
    return 0;
  }
  if (cmd.command === "version") {
    writeText(Deno.stdout, `kube-proxy-deno ${VERSION}\n`);
    return 0;
  }
  const { config } = cmd;
  const log = await setupLogging(config.logging.format, config.logging.verbosity);
  for (const w of [...cmd.warnings, ...cmd.config.features.warnings]) log.warn(w);
  if (cmd.command === "write-config") {
    return await writeConfigFile(cmd.kubeProxyConfiguration, cmd.writeConfigTo!, log);
  }
  const exec = new DenoExecutor({ timeoutMs: config.kernelToolTimeoutMs });
  if (cmd.command === "cleanup") return await runCleanup(MODES.values(), exec, log);
  // Every mode a flag or config file can name is built; parsing refused any other.
  const mode = MODES.get(config.mode)!;
  if (config.source.kind === "file") {
    try {
      await Deno.stat(config.source.path);
    } catch (e) {
      writeText(
        Deno.stderr,
        `kube-proxy-deno: --source: ${JSON.stringify(config.source.path)}: ${(e as Error).message}\n`,
      );
      return 2;
    }
  }
  const stdout = (text: string) => writeText(Deno.stdout, text);
  const stderr = (text: string) => writeText(Deno.stderr, text);
  if (cmd.command === "render") {
    return await runRender({ mode, config, log, nodeIPs: cmd.renderNodeIPs, stdout, stderr });
  }
  if (cmd.command === "trace") {
    return await runTrace({
      modes: MODES.values(),
      chosen: mode,
      config,
      query: cmd.trace!,
      exec,
      log,
      interfaceIPs: Deno.networkInterfaces().map((i) => i.address),
      stdout,
      stderr,
    });
  }
  if (cmd.command === "explain") {
    return await runExplain({ mode, config, query: cmd.explain!, exec, log, stdout, stderr });
  }
  if (cmd.command === "migrate") {
    const nodeName = config.hostnameOverride || Deno.hostname().toLowerCase();
    const listApi = async (node: string, h: EventHandler) =>
      listOnce(await loadApiAccess(apiInputs(config)), node, h);
    return await runMigrate({
      modes: MODES,
      query: cmd.migrate!,
      configFor: cmd.configFor,
      nodeName,
      listApi,
      exec,
      log,
      stdout,
      stderr,
    });
  }
  for (const n of cmd.notApplying) log.warn(n);
  return await run(mode, config, exec, log, {
    initOnly: cmd.command === "init-only",
    configFile: cmd.configFile,
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
  o: {
    initOnly: boolean;
    stop?: AbortSignal;
    pages: StatusPages;
    configFile?: { readonly path: string; readonly text: string };
  },
): Promise<number> {
  // Refused before anything touches the node, as any other mode this run cannot use.
  const refused = mode.refuse?.(config);
  if (refused !== undefined) {
    log.error("Error running ProxyServer", { err: refused });
    return 1;
  }
  if (!await modeToolsPresent(mode, config, Deno.env.get("PATH"), log)) return 1;
  const nodeName = config.hostnameOverride || Deno.hostname().toLowerCase();
  const clock = realClock;
  let access: ApiAccess | undefined;
  if (config.source.kind === "kubernetes") {
    try {
      access = await loadApiAccess(apiInputs(config));
    } catch (e) {
      if (!(e instanceof KubeconfigError)) throw e;
      log.error("Cannot reach the API server as configured", { error: e.message });
      return 1;
    }
  }

  const metrics = new ProxyMetrics();
  metrics.recordFeatures(config.features.all());
  const api = access === undefined
    ? undefined
    : newApiClient(access, config.clientConnection, { clock, metrics });
  const events: EventRecorder = api === undefined ? nullRecorder : new ApiEventRecorder({
    post: (p, b) => api.create(p, b),
    instance: `kube-proxy-${Deno.hostname()}`,
    log,
  });
  const node = nodeRef(nodeName);
  /** A Warning Event on this Node about starting the proxy (upstream's action `StartKubeProxy`). */
  const warnNode = (reason: string, note: string) =>
    events.record({ regarding: node, type: "Warning", reason, action: "StartKubeProxy", note });

  // The privileged set-up, as upstream's platformSetup: conntrack, then the mode's own sysctls.
  await tuneConntrack(config.conntrack, {
    sysctl: new SysctlRunner({ exec }),
    cpus: navigator.hardwareConcurrency,
    log,
    warn: warnNode,
  });
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

  const kubernetes = api === undefined
    ? undefined
    : startApiSource(access!, api, config.clientConnection, { nodeName, log });
  let proxier: ModeProvider;
  try {
    proxier = await retryStart(config.mode, () => mode.create(deps), { log, clock });
  } catch (e) {
    if (!(e instanceof ModeUnavailableError)) throw e;
    log.error(e.message);
    return 1;
  }
  // Switching modes: what another mode (ours or upstream's) left goes once this one's first sync is
  // in (new connections are this mode's from then on), its datapath once its connections drain; a
  // mode writing the same chains goes first (`commands/cleanup/cleanup.ts`).
  const drainMs = config.migrationDrainTimeoutMs;
  const nodeIPs = Deno.networkInterfaces().map((i) => i.address);
  const switching = modeSwitch(MODES.values(), mode, { exec, log, clock, drainMs, nodeIPs });
  const cleaned = Promise.all([switching.beforeFirstSync(), proxier.removeLeftovers?.()]);

  const ac = new AbortController();
  const stop = () => {
    if (!ac.signal.aborted) log.info(`Shutting down; ${proxier.onStop}`);
    ac.abort();
  };
  Deno.addSignalListener("SIGTERM", stop);
  Deno.addSignalListener("SIGINT", stop);
  if (o.stop !== undefined) onAbort(o.stop, stop);
  const tasks: Promise<unknown>[] = [];
  try {
    serveStatus({
      healthz: config.healthzBindAddress,
      metricsAddress: config.metricsBindAddress,
      health: deps.health,
      metrics,
      pages: o.pages,
      debug: debugServices({ config, nodeName, mode, proxier, signal: ac.signal }),
      signal: ac.signal,
      log,
      clock,
      hardFail: config.bindAddressHardFail,
      onFailure: warnNode,
    }, tasks);
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
  const stopped = new Promise<void>((resolve) => onAbort(ac.signal, resolve));
  tasks.push(
    Promise.race([deps.health.whenReady(), stopped]).then(() =>
      ac.signal.aborted ? undefined : switching.afterFirstSync(ac.signal)
    ),
  );
  let code = 0;
  if (o.configFile !== undefined) {
    tasks.push(exitOnConfigChange({ ...o.configFile, signal: ac.signal, log, stop }).then((c) => code = c));
  }
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
  return code;
}

/** What the API access is read from: the flags' kubeconfig or master, this process's environment and files. */
function apiInputs(config: ProxyConfig): ApiAccessInputs {
  return {
    kubeconfig: config.kubeconfig,
    master: config.master,
    env: (name) => Deno.env.get(name),
    readFile: (path) => Deno.readTextFile(path),
  };
}

if (import.meta.main) {
  const code = await main(Deno.args);
  await flushLogging();
  Deno.exit(code);
}
