/**
 * What every proxier is given, whatever its mode (`mode_definition.ts`'s `proxierOptions` fills it
 * from the configuration), and how often a full sync comes.
 * @module
 */
import type { Conntrack } from "../iptables/conntrack.ts";
import type { ProxyHealth } from "./healthcheck/proxier_health.ts";
import type { ServiceHealthServer } from "./healthcheck/service_health.ts";
import type { ProxyMetrics } from "./metrics.ts";
import type { NodeManagerOptions } from "./node_manager.ts";
import type { ObjectWarnings } from "./model/object_warnings.ts";
import type { Clock } from "./runtime/clock.ts";
import type { EventRecorder } from "./runtime/events.ts";
import type { Logger } from "./runtime/logger.ts";
import type { SyncMemory } from "./runtime/sync_memory.ts";
import type { SchedulerPolicy } from "./scheduler_policy.ts";
import type { ServicePortsOptions } from "./model/service_port.ts";
import type { IPFamily } from "./model/types.ts";

/** Full resyncs once an hour, as upstream's FullSyncPeriod (a constant there too). */
export const FULL_SYNC_PERIOD_MS = 3_600_000;

/** Options shared by every proxier; those about the Node are {@linkcode NodeManagerOptions}'s. */
export interface BaseProxierOptions extends
  Pick<
    NodeManagerOptions,
    "nodeWaitMs" | "saidOfNode" | "localDetection" | "nodeIPs" | "nodeIPsFromNode" | "nodePortAddresses"
  >,
  Pick<ServicePortsOptions, "allowExternalIPs" | "portNotice"> {
  readonly family: IPFamily;
  /** This node's name: decides which endpoints are local. */
  readonly nodeName: string;
  readonly log: Logger;
  readonly clock: Clock;
  readonly metrics: ProxyMetrics;
  readonly health: ProxyHealth;
  readonly minSyncPeriodMs: number;
  readonly syncPeriodMs: number;
  /** Object problems, logged once per object version; shared by the families. Default: its own. */
  readonly warnings?: ObjectWarnings;
  /**
   * Longest time between full syncs, from the end of one to the start of the next; default
   * `syncPeriodMs` (modes without partial syncs). Modes with partial syncs pass
   * {@linkcode FULL_SYNC_PERIOD_MS}; their periodic syncs are then partial.
   */
  readonly fullSyncPeriodMs?: number;
  /** What the mode does with scheduler annotations; default: no word on them (tests). */
  readonly schedulers?: SchedulerPolicy;
  /** Kubernetes Events about Services and the Node; default: none. */
  readonly events?: EventRecorder;
  /** The conntrack reconciler's table after each sync (modes that NAT in the kernel); default: none. */
  readonly conntrack?: Conntrack;
  /** Health check node ports, updated after each sync; default: none. */
  readonly healthServer?: ServiceHealthServer;
  /** Who writes the rules (the running proxy's identity), written into them; default none (`render`, tests). */
  readonly writer?: string;
  /** Gives malloc's free memory back after a sync (`runtime/gc.ts`); default glibc's malloc_trim. */
  readonly trim?: () => void;
  /** The memory step the node's families share (`runtime/sync_memory.ts`); default one of its own. */
  readonly memory?: SyncMemory;
}
