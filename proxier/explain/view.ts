/**
 * What `explain` reads of a running (or rendered) proxier: one IP family's model as of its last
 * sync, and the node facts the rules were written from. Every proxier gives one
 * (`BaseProxier.explainView`); the model (`model.ts`) answers from it alone.
 * @module
 */
import type { LocalDetector } from "../_common/local_detector.ts";
import type { NodeTopology } from "../topology.ts";
import type { EndpointInfo, IPFamily, ServicePortInfo } from "../types.ts";

/** When a Service's last change was seen and when a sync put it in the kernel (ms since the epoch). */
export interface ServiceTiming {
  /** The first event of the change the last applying sync took (a Service or EndpointSlice event). */
  readonly changedMs: number;
  /** The EndpointSlice controller's `endpoints.kubernetes.io/last-change-trigger-time`, when given. */
  readonly triggerMs?: number;
  /** The end of the sync that applied it; undefined while it waits for one. */
  readonly appliedMs?: number;
}

/** How a family serves NodePorts on its loopback address (127.0.0.0/8, ::1). */
export type LoopbackNodePorts =
  /** Not at all (ipvs mode; nftables without the gate; `--nodeport-addresses` without loopback). */
  | "none"
  /** In the kernel's rules, as any node address (iptables with route_localnet). */
  | "rules"
  /** By a socket proxy beside the rules (nftables' KubeProxyNFTablesLocalhostNodePorts). */
  | "socket"
  /** By the mode's own listeners (userspace). */
  | "listener";

/** One family's model and node facts; see the module doc. */
export interface FamilyView {
  readonly family: IPFamily;
  /** Every service port of the family, by service port key. */
  readonly services: ReadonlyMap<string, ServicePortInfo>;
  /** Every endpoint of each service port (whatever its conditions), by service port key. */
  readonly endpoints: ReadonlyMap<string, readonly EndpointInfo[]>;
  readonly topology: NodeTopology;
  /** This node's addresses of the family (not loopback): where the node's own connections come from. */
  readonly nodeIPs: readonly string[];
  /** The node addresses NodePorts answer on (not loopback; see {@linkcode loopbackNodePorts}). */
  readonly nodePortIPs: readonly string[];
  /** Every address of the node answers NodePorts (`--nodeport-addresses` names no CIDR of the family). */
  readonly nodePortsOnEveryAddress: boolean;
  readonly loopbackNodePorts: LoopbackNodePorts;
  /** How pod traffic is told apart; undefined when it cannot be (no CIDR of this family). */
  readonly localDetector?: LocalDetector;
  /** `--masquerade-all`. */
  readonly masqueradeAll: boolean;
  /** The cluster's ServiceCIDRs of this family. */
  readonly serviceCIDRs: readonly string[];
  /**
   * False when cluster, external and load-balancer IPs are not served on this node, only NodePorts
   * (the userspace mode without its portal rules). Default true.
   */
  readonly servesServiceIPs?: boolean;
  /** The default IPVS scheduler (`--ipvs-scheduler`), in ipvs mode. */
  readonly ipvsScheduler?: string;
  /** Maglev's table size (`--maglev-table-size`), in nftables mode. */
  readonly maglevTableSize?: number;
  /** Per Service (`namespace/name`): when it last changed and was applied. */
  timing(service: string): ServiceTiming | undefined;
}
