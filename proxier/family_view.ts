/**
 * What every proxier shows the read side (`explain`, `/debug/services`): one IP family's model as
 * of its last sync and the node facts its rules were written from (`BaseProxier.familyView`), and,
 * where a mode's own sockets decide where a connection goes, their answer. The explain command's
 * expectation answers from a view alone.
 * @module
 */
import type { LocalDetector } from "./_common/local_detector.ts";
import type { NodeTopology } from "./model/topology.ts";
import type { EndpointInfo, IPFamily, ServicePortInfo } from "./model/types.ts";

/** A new connection, as `explain` and the flow table ask about it. */
export interface Connection {
  readonly src: string;
  readonly dst: string;
  readonly port: number;
  readonly protocol: "tcp" | "udp" | "sctp";
  /** Opened by a process on this node. */
  readonly fromNode?: boolean;
  /** The interface it comes in on (interface-based local detection). */
  readonly inInterface?: string;
}

/** What the datapath itself does with one connection. */
export interface DatapathAnswer {
  readonly verdict: "DNAT" | "REJECT" | "DROP" | "none" | "UNKNOWN";
  /** `ip:port` of every endpoint it can reach, sorted. */
  readonly endpoints: string[];
  /** Undefined where the datapath does not say (a socket proxy, or paths that differ). */
  readonly masquerade?: boolean;
  /** The rules the connection went through, as the tools print them. */
  readonly rules: string[];
  /** What checked it: `iptables rules`, `the loopback socket proxy`... */
  readonly by: string;
  /** Why the answer is incomplete (a rule the tracer does not understand). */
  readonly note?: string;
  /**
   * Where a hash picks the endpoint (the sh, dh and mh schedulers): the index or Maglev slot this
   * connection gets and its endpoint, one line per pick.
   */
  readonly picks?: string[];
  /** This client's ClientIP affinity entry pins it to one endpoint, for `expiresSeconds` more. */
  readonly pinned?: { readonly endpoint: string; readonly expiresSeconds?: number };
  /**
   * A socket proxy carries the connection (the userspace mode, a loopback NodePort's socket proxy):
   * it opens its own, so the backend sees the node's address (`masquerade` true), and it refuses by
   * accepting and closing at once.
   */
  readonly proxied?: boolean;
}

/** What the read side reads of a mode's proxiers: one view per family, and its sockets' own answers. */
export interface ExplainSource {
  views(): FamilyView[];
  /**
   * Where the mode's own sockets send `c` (a socket proxy: the userspace mode, nftables' loopback
   * NodePorts); undefined where the kernel's rules decide (`trace` answers).
   */
  answer?(c: Connection, family: IPFamily): DatapathAnswer | undefined;
}

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
  /** The Node's pod CIDRs of this family (`spec.podCIDRs`), where this node's pods have their addresses. */
  readonly podCIDRs: readonly string[];
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
  /**
   * How this family balances new connections of `svc`, in a few words (the IPVS scheduler, the
   * nftables pick, what a mode does instead of an annotation it does not honour); null where there
   * is nothing to say (the mode's one way, no annotation asked for another).
   */
  scheduler(svc: ServicePortInfo): string | null;
  /** What the mode cannot do of `svc`'s fields here, each said as its warning says it (none: it does them all). */
  limits(svc: ServicePortInfo): string[];
  /** Per Service (`namespace/name`): when it last changed and was applied. */
  timing(service: string): ServiceTiming | undefined;
}
