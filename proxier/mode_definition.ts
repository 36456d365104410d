/**
 * What a mode provides to the program (create, render, cleanup) and what it receives: the
 * contract between `main.ts` and the folders under `proxier/` that implement the datapaths.
 * @module
 */
import type { DryRunExecutor } from "../iptables/dry_run.ts";
import type { Executor } from "../iptables/executor.ts";
import type { BaseProxier } from "./base_proxier.ts";
import type { Provider } from "./provider.ts";
import type { BaseProxierOptions } from "./proxier_options.ts";
import { type EventRecorder, nullRecorder } from "./runtime/events.ts";
import { MetaProxier } from "./meta_proxier.ts";
import type { Clock } from "./runtime/clock.ts";
import { ProxyHealth } from "./healthcheck/proxier_health.ts";
import type { ServiceHealthServer } from "./healthcheck/service_health.ts";
import type { ToolNeed } from "./runtime/kernel_tools.ts";
import type { Logger } from "./runtime/logger.ts";
import { SyncMemory } from "./runtime/sync_memory.ts";
import { ProxyMetrics } from "./metrics.ts";
import { ObjectWarnings } from "./model/object_warnings.ts";
import type { ProxyConfig, ProxyMode } from "./options/config.ts";
import { ALLOW_SERVICE_EXTERNAL_IPS } from "./options/feature_gates.ts";
import type { ModeTracer } from "./trace/packet.ts";
import type { IPFamily } from "./model/types.ts";
import type { SchedulerPolicy } from "./scheduler_policy.ts";
import type { Connection, DatapathAnswer, ExplainSource } from "./family_view.ts";
import type { DatapathTraits } from "./datapath_traits.ts";

/** Everything the program hands a mode. */
export interface ModeDeps {
  readonly config: ProxyConfig;
  /** This node's name: decides which endpoints are local. */
  readonly nodeName: string;
  readonly log: Logger;
  readonly clock: Clock;
  readonly metrics: ProxyMetrics;
  readonly health: ProxyHealth;
  /** Runs the kernel tools (a dry run for `render`). */
  readonly exec: Executor;
  /** Health check node ports of externalTrafficPolicy=Local services; undefined serves none. */
  readonly healthServer?: ServiceHealthServer;
  /** Object problems, logged once per object version whichever family's proxier finds them. */
  readonly warnings: ObjectWarnings;
  /** Kubernetes Events (none with the file source). */
  readonly events: EventRecorder;
  /** For `render`: `--node-ip`'s addresses; undefined takes the Node object's from the source. */
  readonly renderNodeIPs?: readonly string[];
  /** This machine's interface addresses (a live node's; none for `render`). */
  readonly interfaceIPs: () => readonly string[];
  /**
   * Who writes the rules, as the running proxy writes itself into them (`nftables/5f3a9c1e pid
   * 42`), so another writer is told from a drift; undefined for `render`.
   */
  readonly writer?: string;
  /** The memory step every family's syncs share: one heap, collected once no sync is in flight. */
  readonly memory: SyncMemory;
}

/**
 * Returns deps with health (the health timeout is 2 x syncPeriod, as upstream) and, unless given,
 * fresh metrics and no Events; `warnAbout` limits the object warnings to the objects it accepts.
 */
export function newModeDeps(
  config: ProxyConfig,
  o:
    & Pick<ModeDeps, "nodeName" | "log" | "clock" | "exec" | "healthServer" | "renderNodeIPs" | "writer">
    & Partial<Pick<ModeDeps, "metrics" | "events" | "interfaceIPs">>
    & { readonly warnAbout?: (key: string, o: object) => boolean },
): ModeDeps {
  const { warnAbout, ...rest } = o;
  return {
    config,
    ...rest,
    warnings: new ObjectWarnings(o.log, o.events, warnAbout),
    metrics: o.metrics ?? new ProxyMetrics(),
    events: o.events ?? nullRecorder,
    interfaceIPs: o.interfaceIPs ?? (() => []),
    health: new ProxyHealth({ clock: o.clock, timeoutMs: 2 * config.syncPeriodMs }),
    memory: new SyncMemory({ now: () => o.clock.now() }),
  };
}

/** How long the first sync waits for the own Node from the API (upstream's NodeManager waits too). */
export const NODE_WAIT_MS = 30_000;
/** In NodeCIDR mode, for its pod CIDRs: upstream waits 5 minutes for an allocator to assign them. */
export const NODE_CIDR_WAIT_MS = 300_000;

/** What has been said of the Node, per node's set of proxiers (one per family), so it is said once. */
const nodeLines = new WeakMap<ModeDeps, Set<string>>();

/** Returns the options every proxier of `family` shares; `schedulers` is the mode's own policy. */
export function proxierOptions(
  d: ModeDeps,
  family: IPFamily,
  schedulers: SchedulerPolicy,
): BaseProxierOptions {
  return {
    family,
    nodeName: d.nodeName,
    log: d.log,
    clock: d.clock,
    metrics: d.metrics,
    health: d.health,
    warnings: d.warnings,
    events: d.events,
    minSyncPeriodMs: d.config.minSyncPeriodMs,
    nodePortAddresses: d.config.nodePortAddresses,
    allowExternalIPs: d.config.features.enabled(ALLOW_SERVICE_EXTERNAL_IPS),
    schedulers,
    writer: d.writer,
    memory: d.memory,
    syncPeriodMs: d.config.syncPeriodMs,
    saidOfNode: nodeLines.get(d) ?? nodeLines.set(d, new Set()).get(d)!,
    nodeWaitMs: d.config.source.kind === "kubernetes"
      ? (d.config.detectLocalMode === "NodeCIDR" ? NODE_CIDR_WAIT_MS : NODE_WAIT_MS)
      : 0,
    localDetection: {
      mode: d.config.detectLocalMode,
      clusterCIDRs: d.config.clusterCIDRs,
      ...d.config.detectLocal,
    },
  };
}

/**
 * Returns the node's addresses a `render` proxier takes: `--node-ip`'s, else the Node object's
 * InternalIP and ExternalIP addresses from the source, as the live node would hold them.
 */
export function renderNodeAddresses(d: ModeDeps): Pick<BaseProxierOptions, "nodeIPs" | "nodeIPsFromNode"> {
  return d.renderNodeIPs !== undefined
    ? { nodeIPs: d.renderNodeIPs }
    : { nodeIPs: [], nodeIPsFromNode: true };
}

/** A mode's provider on a live node. */
export interface ModeProvider extends Provider {
  /** Releases what the process holds (listeners); the kernel datapath stays, as upstream. */
  close(): void;
  /** What stopping the program does to traffic, for the shutdown line. */
  readonly onStop: string;
  /** What `explain` and `/debug/services` read. */
  readonly explain: ExplainSource;
  /**
   * Removes what an earlier run of this same mode left that this run does not own (our rules in
   * the other iptables backend); run at start beside the other modes' cleanup, before the first
   * sync. Failures are logged, not thrown.
   */
  removeLeftovers?(): Promise<void>;
}

/** A mode's provider on a dry run: feed it objects, then ask for what a full sync applies. */
export interface ModeRenderer {
  readonly handler: Provider;
  /** Runs one full sync on the dry run; returns the batches it would apply, each under a heading. */
  render(): Promise<string>;
  /** Which node addresses the render used, and where they came from (after {@linkcode render}). */
  nodeAddresses(): string;
  /** What `explain` reads (after {@linkcode render}): each family's view and its rendered rules. */
  readonly explain: ExplainSource & { rendered(family: IPFamily): string | undefined };
}

/**
 * Returns the provider of a kernel mode over its per-family proxiers (one or both, behind a
 * {@linkcode MetaProxier}); the kernel datapath stays on close, and `sockets`, when the mode also
 * listens (nftables' localhost NodePorts), says how to close those and what closing does.
 */
export function familyProvider(
  families: readonly BaseProxier[],
  removeLeftovers?: () => Promise<void>,
  sockets?: {
    close(): void;
    onStop: string;
    answer(c: Connection, family: IPFamily): DatapathAnswer | undefined;
  },
): ModeProvider {
  // Always a wrapper, also for one family: the provider's `close` and `explain` assigned onto the
  // proxier itself would replace its own (its `close` would then call itself).
  return Object.assign(new MetaProxier(families), {
    close: sockets?.close ?? (() => {}),
    removeLeftovers,
    onStop: "the kernel rules stay in place and keep serving" + (sockets ? `; ${sockets.onStop}` : ""),
    explain: { views: () => families.map((f) => f.familyView()), answer: sockets?.answer },
  });
}

/**
 * Returns a renderer over one proxier per family: `render()` syncs each once and prints `section(p)`,
 * the IPv6 one only when some Service has an IPv6 cluster IP.
 */
export function familyRenderer<P extends BaseProxier>(
  families: readonly P[],
  section: (p: P) => string,
  own?: Pick<ExplainSource, "answer">,
): ModeRenderer {
  const rendered = new Map<IPFamily, string>();
  return {
    handler: new MetaProxier(families),
    async render() {
      let out = "";
      for (const p of families) {
        await p.syncNow();
        rendered.set(p.family, section(p));
        if (p.family === "IPv6" && p.serviceCount === 0) continue;
        out += rendered.get(p.family);
      }
      return out;
    },
    nodeAddresses: () => families[0].describeNodeIPs(),
    explain: {
      views: () => families.map((f) => f.familyView()),
      rendered: (family) => rendered.get(family),
      answer: own?.answer,
    },
  };
}

/** How far a cleanup goes. */
export interface CleanupOptions {
  /**
   * True (`--cleanup`, the default): everything kube-proxy's modes create. False (another mode
   * starting): chain names modes share (nat KUBE-SERVICES, KUBE-MARK-MASQ...) are only removed where
   * this mode's own chains show it ran, so a running mode never loses them.
   */
  readonly everything: boolean;
  /** Keep what {@linkcode ProxyModeDefinition.drain} keeps (its datapath); remove the rest. */
  readonly keepDatapath?: boolean;
  /** This machine's interface addresses, where a mode's NodePorts answered (none given: none known). */
  readonly interfaceIPs?: readonly string[];
}

/** A mode's datapath kept for the connections only it carries while another mode takes over. */
export interface ModeDrain {
  /** Connections it still carries. */
  connections(): Promise<number>;
  /** Removes what was kept. */
  finish(): Promise<void>;
}

/** For `migrate`: what keeps today's behaviour when a node moves to a mode, per cause it can keep. */
export interface MigrationAdvice {
  /** NodePorts answered on loopback today. */
  readonly localhostNodePorts?: string;
  /** A Service's balancing today. */
  readonly scheduler?: string;
}

/** One datapath, as the program sees it; its tracer (`trace`, `recognizes`) as {@linkcode ModeTracer}. */
export interface ProxyModeDefinition extends ModeTracer {
  readonly name: ProxyMode;
  /** What its datapath does where the modes differ (`explain`'s expectation follows it). */
  readonly traits: DatapathTraits;
  /** What it does with a Service's scheduler annotation, under `config`. */
  schedulers(config: ProxyConfig): SchedulerPolicy;
  /**
   * It writes kube-proxy's shared iptables chains (nat KUBE-SERVICES, KUBE-POSTROUTING...): another
   * such mode's start removes its rules before its own first sync, which writes those chains.
   */
  readonly sharesKubeChains?: boolean;
  /** What `migrate` tells a node moving to this mode; absent: nothing to keep with. */
  readonly migrationAdvice?: MigrationAdvice;
  /**
   * What another mode taking the node over keeps of this one for the connections only its datapath
   * carries (ipvs: the virtual servers and kube-ipvs0), undefined when there is nothing; its cleanup
   * then runs with `keepDatapath`, and the drain ends with {@linkcode ModeDrain.finish}.
   */
  drain?(exec: Executor, nodeIPs: readonly string[]): Promise<ModeDrain | undefined>;
  /**
   * Returns why this configuration cannot run the mode at all (a feature gate that turns it off),
   * checked before anything touches the node; undefined when it can.
   */
  refuse?(config: ProxyConfig): string | undefined;
  /** The kernel tools it runs: checked at start, each missing one reported once. */
  readonly tools: readonly ToolNeed<ProxyConfig>[];
  /**
   * The privileged set-up this mode needs before any rule (its sysctls, kernel checks), run at start
   * and by `--init-only`; writes no rule.
   * @throws {ModeUnavailableError} when the node lacks what the mode needs (the message says what).
   */
  setup?(deps: ModeDeps): Promise<void>;
  /**
   * Builds the provider for this node (after {@linkcode setup}); starts nothing.
   * @throws {ModeUnavailableError} when the node lacks what the mode needs (the message says what).
   */
  create(deps: ModeDeps): Promise<ModeProvider>;
  /** Builds the provider on `dryRun` (which is `deps.exec`); absent when the mode has no render. */
  render?(deps: ModeDeps, dryRun: DryRunExecutor): Promise<ModeRenderer>;
  /**
   * Removes every kernel object this mode (or upstream kube-proxy's same mode) creates in `family`;
   * succeeds when there is nothing to remove. Returns what it removed, for people (`12 chains`,
   * `table ip kube-proxy (30 chains)`); empty when there was nothing.
   */
  cleanup(exec: Executor, family: IPFamily, opts?: CleanupOptions): Promise<readonly string[]>;
}

/** Returns what a cleanup removed, for people: `3 chains`, `1 ipset`, each count above zero. */
export function removedText(counts: ReadonlyArray<readonly [number, string]>): string[] {
  return counts.filter(([n]) => n > 0).map(([n, what]) => `${n} ${what}${n === 1 ? "" : "s"}`);
}
