/**
 * The proxy's last phase (upstream's `ProxyServer.Run`): the OOM score, the status servers, the
 * signals, the switch from whatever programmed the node, the sync loop over the source, the settle
 * after the first sync, the `--config` watch, and the teardown. Resolves when SIGTERM (or SIGINT, or
 * the embedder's stop) ends it.
 * @module
 */
import { EXIT, type ExitCode } from "../../command_definition.ts";
import { ListenError } from "../../healthcheck/listener.ts";
import { serveStatus } from "../../healthcheck/status_servers.ts";
import type { ModeProvider } from "../../mode_definition.ts";
import { UPSTREAM_VERSION } from "../../options/config.ts";
import { watchConfigFile } from "../../options/config_watch.ts";
import { onAbort } from "../../runtime/abort.ts";
import { nodeRef } from "../../runtime/events.ts";
import { setOwnOomScoreAdj } from "../../runtime/oom_score.ts";
import { VERSION } from "../../runtime/version.ts";
import type { ProxyServer } from "./build.ts";
import { debugServices } from "./debug_services.ts";
import { sayFirstSync } from "./first_sync.ts";
import { type ModeSwitch, modeSwitch } from "./mode_switch.ts";
import { describeIdentity } from "./node_lock.ts";
import { proxyFailure } from "./proxy_failure.ts";
import { settleLoading, settleMemory } from "./settle_memory.ts";
import type { ProxySource } from "./source.ts";

/** What upstream says when the `--config` file's content changed (the supervisor starts it again). */
export const CONFIG_CHANGED = "content of the proxy server's configuration file was updated";

/**
 * Runs the proxy until it is stopped; returns {@linkcode EXIT.ok}.
 * @throws {CommandFailure} when a status server cannot listen (`--bind-address-hard-fail`), the file
 * source cannot be read, or the `--config` file changed; each after the teardown.
 */
export async function runProxy(
  s: ProxyServer,
  proxier: ModeProvider,
  source: ProxySource,
): Promise<ExitCode> {
  const { config, log } = s.c;
  // Switching modes: what another mode (ours or upstream's) left goes once this one's first sync is
  // in (new connections are this mode's from then on), its datapath once its connections drain; a
  // mode writing the same chains goes first (`mode_switch.ts`).
  const switching = modeSwitch(s.c.modes.values(), s.c.mode, {
    exec: s.c.exec,
    log,
    clock: s.clock,
    drainMs: config.migrationDrainTimeoutMs,
    nodeIPs: s.c.interfaceAddresses(),
  });
  const cleaned = Promise.all([switching.beforeFirstSync(), proxier.removeLeftovers?.()]);
  const ac = new AbortController();
  const stop = () => {
    if (!ac.signal.aborted) log.info(`Shutting down; ${proxier.onStop}`);
    ac.abort();
  };
  Deno.addSignalListener("SIGTERM", stop);
  Deno.addSignalListener("SIGINT", stop);
  if (s.c.stop !== undefined) onAbort(s.c.stop, stop);
  // Beside the start, never before it: a choom that answers late (or never) holds back neither the
  // status pages nor the first sync, and the stop ends it.
  const tasks: Promise<unknown>[] = [setOwnOomScoreAdj(s.c.exec, config.oomScoreAdj, log, ac.signal)];
  // Another start asking to take the node over (`--take-over`) stops this one as SIGTERM does.
  const serving = s.lock?.serve((by) => {
    log.info("Another kube-proxy-deno takes this node over; stopping", { by: by && describeIdentity(by) });
    stop();
  });
  let failure: unknown;
  try {
    serveStatusPages(s, proxier, ac.signal, tasks);
    say(s);
    settleLoading(log);
    tasks.push(cleaned.then(() => proxier.syncLoop(ac.signal)));
    tasks.push(afterFirstSync(s, proxier, switching, ac.signal));
    const configFile = s.c.facts.configFile;
    if (configFile !== undefined) {
      const onChange = () => {
        failure = proxyFailure("Error running ProxyServer", { err: CONFIG_CHANGED, file: configFile.path });
        stop();
      };
      tasks.push(watchConfigFile({ ...configFile, signal: ac.signal, clock: s.clock, onChange }));
    }
    tasks.push((await source.start(proxier, ac.signal)).watching);
  } catch (e) {
    failure = e;
    ac.abort();
  }
  await Promise.allSettled(tasks);
  // Held until the last sync is over: a start waiting for this node writes only after.
  s.lock?.release();
  await serving;
  proxier.close();
  s.healthServer.close();
  Deno.removeSignalListener("SIGTERM", stop);
  Deno.removeSignalListener("SIGINT", stop);
  if (failure !== undefined) throw failure;
  return EXIT.ok;
}

/**
 * Serves `/healthz`, `/livez`, `/metrics`, the z-pages and `/debug/services`.
 * @throws {CommandFailure} when an address cannot be bound and `--bind-address-hard-fail` is set.
 */
function serveStatusPages(
  s: ProxyServer,
  proxier: ModeProvider,
  signal: AbortSignal,
  tasks: Promise<unknown>[],
) {
  const { config, mode, exec, log } = s.c;
  try {
    serveStatus({
      healthz: config.healthzBindAddress,
      metricsAddress: config.metricsBindAddress,
      health: s.deps.health,
      metrics: s.metrics,
      pages: {
        mode: config.mode,
        configuration: s.c.facts.kubeProxyConfiguration,
        flags: s.c.facts.flagValues,
        version: VERSION,
        emulates: `${UPSTREAM_VERSION.major}.${UPSTREAM_VERSION.minor}`,
        startedMs: performance.timeOrigin,
        conditions: () => s.deps.health.conditions(),
      },
      debug: debugServices({
        config,
        nodeName: s.nodeName,
        mode,
        proxier,
        exec,
        signal,
        lastSyncMs: () => s.deps.health.lastSyncMs(),
      }),
      signal,
      log,
      clock: s.clock,
      hardFail: config.bindAddressHardFail,
      onFailure: s.warnNode,
    }, tasks);
  } catch (e) {
    if (!(e instanceof ListenError)) throw e;
    throw proxyFailure(e.message, { bindAddressHardFail: true }, e);
  }
}

/** The start's Event and line: what runs, in which mode, for which node, from which source. */
function say(s: ProxyServer): void {
  const { config, log } = s.c;
  const regarding = nodeRef(s.nodeName);
  s.events.record({ regarding, type: "Normal", reason: "Starting", action: "StartKubeProxy", note: "" });
  log.info("Starting kube-proxy-deno", {
    version: VERSION,
    mode: config.mode,
    node: s.nodeName,
    source: config.source.kind,
  });
}

/**
 * Once every family's first sync is in the kernel, says so; once the proxy is ready (nothing it
 * holds left unserved: `/readyz`), gives back the start's memory, removes the other modes' rules,
 * and drains what they keep for their connections. A start that cannot serve what it replaces
 * leaves the other mode's rules in place.
 */
async function afterFirstSync(
  s: ProxyServer,
  proxier: ModeProvider,
  switching: ModeSwitch,
  signal: AbortSignal,
): Promise<void> {
  const stopped = new Promise<void>((resolve) => onAbort(signal, resolve));
  const syncedMs = await Promise.race([s.deps.health.whenSynced(), stopped]);
  if (signal.aborted) return;
  sayFirstSync(s.c.log, proxier.explain.views(), s.clock.now() - (syncedMs ?? s.clock.now()));
  await Promise.race([s.deps.health.whenReady(), stopped]);
  if (signal.aborted) return;
  await settleMemory(s.c.log, () => switching.afterFirstSync());
  return switching.drain(signal);
}
