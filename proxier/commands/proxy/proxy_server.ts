/**
 * The proxy (upstream's ProxyServer.Run): validates what it can before touching the node, does the
 * privileged set-up, builds the configured mode's provider, takes the node over from whatever
 * programmed it, serves health, metrics and `/debug/services`, and runs the sync loop over the
 * configured source until SIGTERM.
 * @module
 */
import { SysctlRunner } from "../../../iptables/sysctl.ts";
import type { CommandContext } from "../../command_definition.ts";
import { tuneConntrack } from "../../conntrack/sysctls.ts";
import { ListenError } from "../../healthcheck/listener.ts";
import { ServiceHealthServer } from "../../healthcheck/service_health.ts";
import { serveStatus } from "../../healthcheck/status_servers.ts";
import { ProxyMetrics } from "../../metrics.ts";
import { Counter } from "../../runtime/prometheus.ts";
import { type ModeProvider, newModeDeps } from "../../mode_definition.ts";
import { KubeconfigError, ModeUnavailableError } from "../../runtime/errors.ts";
import { UPSTREAM_VERSION } from "../../options/config.ts";
import { exitOnConfigChange } from "../../options/config_watch.ts";
import { onAbort } from "../../runtime/abort.ts";
import { realClock } from "../../runtime/clock.ts";
import { ApiEventRecorder, type EventRecorder, nodeRef, nullRecorder } from "../../runtime/events.ts";
import { modeToolsPresent } from "../../runtime/kernel_tools.ts";
import { setOwnOomScoreAdj } from "../../runtime/oom_score.ts";
import { retryStart } from "../../runtime/start_retry.ts";
import { VERSION } from "../../runtime/version.ts";
import type { ApiAccess } from "../../sources/api_access.ts";
import { newApiClient, startApiSource } from "../../sources/api_source.ts";
import { FileSource } from "../../sources/file.ts";
import type { ProxyQuery } from "./flags.ts";
import { debugServices } from "./debug_services.ts";
import { modeSwitch } from "./mode_switch.ts";
import { PROCESS_TOOLS } from "./process_tools.ts";
import { MALLOC_ARENAS, settleLoading, settleMemory } from "./settle_memory.ts";
import { nodeToActFor } from "./start_checks.ts";
import { sayFirstSync } from "./first_sync.ts";
import { limitMallocArenas } from "../../runtime/gc.ts";

/**
 * Said when the mode was left to its default, as upstream 1.37 (KEP-5343: the default moves to
 * nftables in 1.40). The wording is ours.
 */
export const DEFAULT_MODE_WARNING = "No proxy mode set (--proxy-mode, mode:): using iptables. Upstream's " +
  "default becomes nftables in Kubernetes 1.40; set the mode to keep iptables";

/**
 * Runs the proxy (or, with `initOnly`, only its privileged set-up); returns the exit code. Nothing
 * touches the node until the configuration, the kernel tools and the API access have been
 * validated: a run that exits for a configuration error leaves the node as it was.
 */
export async function runProxyServer(query: ProxyQuery, c: CommandContext): Promise<number> {
  const { config, mode, exec, log } = c;
  limitMallocArenas(MALLOC_ARENAS);
  if (!c.facts.modeChosen) log.warn(DEFAULT_MODE_WARNING);
  for (const n of c.facts.notApplying) log.warn(n);
  // Refused before anything touches the node: a source that does not parse, no one node to act for,
  // a mode this configuration cannot run.
  const acting = await nodeToActFor(c);
  if ("exit" in acting) return acting.exit;
  const nodeName = acting.node;
  const refused = mode.refuse?.(config);
  if (refused !== undefined) {
    log.error("Error running ProxyServer", { err: refused });
    return 1;
  }
  if (!await modeToolsPresent(mode, PROCESS_TOOLS, config, c.toolPath, log)) return 1;
  const clock = realClock;
  let access: ApiAccess | undefined;
  if (config.source.kind === "kubernetes") {
    try {
      access = await c.apiAccess();
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
    instance: `kube-proxy-${c.hostname}`,
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
  const deps = newModeDeps(config, {
    nodeName,
    log,
    clock,
    exec,
    healthServer,
    metrics,
    events,
    interfaceIPs: c.interfaceAddresses,
  });
  try {
    await retryStart(config.mode, () => mode.setup?.(deps) ?? Promise.resolve(), { log, clock });
  } catch (e) {
    if (!(e instanceof ModeUnavailableError)) throw e;
    log.error(e.message);
    return 1;
  }
  if (query.initOnly) {
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
  // mode writing the same chains goes first (`mode_switch.ts`).
  const switching = modeSwitch(c.modes.values(), mode, {
    exec,
    log,
    clock,
    drainMs: config.migrationDrainTimeoutMs,
    nodeIPs: c.interfaceAddresses(),
  });
  const cleaned = Promise.all([switching.beforeFirstSync(), proxier.removeLeftovers?.()]);

  const ac = new AbortController();
  const stop = () => {
    if (!ac.signal.aborted) log.info(`Shutting down; ${proxier.onStop}`);
    ac.abort();
  };
  Deno.addSignalListener("SIGTERM", stop);
  Deno.addSignalListener("SIGINT", stop);
  if (c.stop !== undefined) onAbort(c.stop, stop);
  const tasks: Promise<unknown>[] = [];
  try {
    serveStatus({
      healthz: config.healthzBindAddress,
      metricsAddress: config.metricsBindAddress,
      health: deps.health,
      metrics,
      pages: {
        mode: config.mode,
        configuration: c.facts.kubeProxyConfiguration,
        flags: c.facts.flagValues,
        version: VERSION,
        emulates: `${UPSTREAM_VERSION.major}.${UPSTREAM_VERSION.minor}`,
        startedMs: performance.timeOrigin,
      },
      debug: debugServices({ config, nodeName, mode, proxier, exec, signal: ac.signal }),
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
  settleLoading(log);
  tasks.push(cleaned.then(() => proxier.syncLoop(ac.signal)));
  const stopped = new Promise<void>((resolve) => onAbort(ac.signal, resolve));
  tasks.push(
    Promise.race([deps.health.whenReady(), stopped]).then(async () => {
      if (ac.signal.aborted) return;
      sayFirstSync(log, proxier.explain.views());
      await settleMemory(log, () => switching.afterFirstSync());
      return switching.drain(ac.signal);
    }),
  );
  let code = 0;
  const configFile = c.facts.configFile;
  if (configFile !== undefined) {
    tasks.push(exitOnConfigChange({ ...configFile, signal: ac.signal, log, stop }).then((x) => code = x));
  }
  if (config.source.kind === "file") {
    const broken = new Counter({
      name: "kubeproxy_source_file_errors_total",
      help:
        "Changes of a --source file that left it unreadable or not parsing (its previous objects are kept)",
      registers: [metrics.registry],
    });
    const src = new FileSource({
      path: config.source.path,
      nodeName,
      handler: proxier,
      log,
      onBroken: () => broken.inc(),
    });
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
