/**
 * The proxy's first phase (upstream's `newProxyServer`): everything the start can check and build
 * without touching the node. The source's one node, the mode's refusals, the kernel tools, the API
 * access, then the metrics, the API client, Events and the service health server. A failure here
 * exits with the node as it was.
 * @module
 */
import type { CommandContext } from "../../command_definition.ts";
import { ServiceHealthServer } from "../../healthcheck/service_health.ts";
import { type ModeDeps, newModeDeps } from "../../mode_definition.ts";
import { ProxyMetrics } from "../../metrics.ts";
import { type Clock, realClock } from "../../runtime/clock.ts";
import { KubeconfigError } from "../../runtime/errors.ts";
import { ApiEventRecorder, type EventRecorder, nodeRef, nullRecorder } from "../../runtime/events.ts";
import { limitMallocArenas } from "../../runtime/gc.ts";
import { missingModeTools } from "../../runtime/kernel_tools.ts";
import type { ApiAccess } from "../../sources/api_access.ts";
import type { ApiClient } from "../../sources/api_client.ts";
import { newApiClient } from "../../sources/api_source.ts";
import type { ProxyQuery } from "./flags.ts";
import { PROCESS_TOOLS } from "./process_tools.ts";
import { proxyFailure } from "./proxy_failure.ts";
import { MALLOC_ARENAS } from "./settle_memory.ts";
import { nodeToActFor } from "./start_checks.ts";
import {
  describeIdentity,
  type Identity,
  newIdentity,
  NodeLock,
  takeNodeLock,
  writerOf,
} from "./node_lock.ts";
import { EXIT } from "../../command_definition.ts";
import { VERSION } from "../../runtime/version.ts";

/**
 * Said when the mode was left to its default, as upstream 1.37 (KEP-5343: the default moves to
 * nftables in 1.40). The wording is ours.
 */
export const DEFAULT_MODE_WARNING = "No proxy mode set (--proxy-mode, mode:): using iptables. Upstream's " +
  "default becomes nftables in Kubernetes 1.40; set the mode to keep iptables";

/** The proxy as built: what the later phases run with. Building it touched nothing on the node. */
export interface ProxyServer {
  readonly query: ProxyQuery;
  /** The command's context: the configuration, the modes, the executor, the logger. */
  readonly c: CommandContext;
  /** The node the proxy acts for (the file source's one Node, else the context's). */
  readonly nodeName: string;
  readonly clock: Clock;
  /** The API access and client; undefined with a file source. */
  readonly access?: ApiAccess;
  readonly api?: ApiClient;
  readonly metrics: ProxyMetrics;
  readonly events: EventRecorder;
  /** Records a Warning Event on this Node about starting the proxy (upstream's action `StartKubeProxy`). */
  readonly warnNode: (reason: string, note: string) => void;
  readonly healthServer: ServiceHealthServer;
  /** What the mode's setup and proxiers are built with. */
  readonly deps: ModeDeps;
  /** This process, as it says itself to another start and writes itself into the rules. */
  readonly identity: Identity;
  /** The node's one-proxy lock; undefined for `--init-only`, which programs no rule. */
  readonly lock?: NodeLock;
}

/**
 * Returns the proxy built for `c`'s configuration, holding the node's one-proxy lock.
 * @throws {CommandFailure} for a source without one node to act for, a mode this configuration
 * cannot run, a kernel tool that is missing, an API access that cannot be used, or another
 * instance of this program that keeps the node (exit 2, naming it).
 */
export async function buildProxyServer(query: ProxyQuery, c: CommandContext): Promise<ProxyServer> {
  const { config, mode, log } = c;
  limitMallocArenas(MALLOC_ARENAS);
  if (!c.facts.modeChosen) log.warn(DEFAULT_MODE_WARNING);
  for (const n of c.facts.notApplying) log.warn(n);
  const nodeName = await nodeToActFor(c);
  const refused = mode.refuse?.(config);
  if (refused !== undefined) throw proxyFailure("Error running ProxyServer", { err: refused });
  const missing = await missingModeTools(mode, PROCESS_TOOLS, config, c.toolPath, log);
  if (missing !== undefined) throw proxyFailure(missing.message, missing.fields);
  const access = config.source.kind === "kubernetes" ? await apiAccess(c) : undefined;
  const clock = realClock;
  const identity = newIdentity({ mode: config.mode, node: nodeName, version: VERSION });
  const lock = query.initOnly ? undefined : await nodeLock(identity, query.takeOver, c, clock);
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
  const warnNode = (reason: string, note: string) =>
    events.record({ regarding: node, type: "Warning", reason, action: "StartKubeProxy", note });
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
    exec: c.exec,
    healthServer,
    metrics,
    events,
    interfaceIPs: c.interfaceAddresses,
    writer: writerOf(identity),
  });
  return {
    query,
    c,
    nodeName,
    clock,
    access,
    api,
    metrics,
    events,
    warnNode,
    healthServer,
    deps,
    identity,
    lock,
  };
}

/**
 * Takes the node's one-proxy lock (`node_lock.ts`).
 * @throws {CommandFailure} exit 2 when another instance keeps it, naming that instance.
 */
async function nodeLock(me: Identity, takeOver: boolean, c: CommandContext, clock: Clock): Promise<NodeLock> {
  const taken = await takeNodeLock({ me, takeOver, log: c.log, clock });
  if (taken instanceof NodeLock) return taken;
  const who = taken.heldBy === undefined ? "a process that does not answer" : describeIdentity(taken.heldBy);
  throw proxyFailure(
    "Another kube-proxy-deno keeps this node; nothing on it was changed",
    { other: who, fix: "stop it, or start this one with --take-over" },
    undefined,
    EXIT.usage,
  );
}

/** The API access the configuration gives. @throws {CommandFailure} naming what is wrong with it. */
async function apiAccess(c: CommandContext): Promise<ApiAccess> {
  try {
    return await c.apiAccess();
  } catch (e) {
    if (!(e instanceof KubeconfigError)) throw e;
    throw proxyFailure("Cannot reach the API server as configured", { error: e.message }, e);
  }
}
