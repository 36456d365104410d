/**
 * Where the modes' datapaths differ, as upstream's do, said once per mode (its definition's
 * `traits`): `explain`'s expectation follows these, and the flow table holds each mode's rules to
 * the same answers. A new difference is a new field here, set by every mode.
 * @module
 */

/** What one mode's datapath does where the modes differ. */
export interface DatapathTraits {
  /**
   * How a new connection reaches an endpoint: rewritten by the kernel's NAT (`kernel`), or proxied by
   * the mode's own sockets (`sockets`: a second connection from the node, so no masquerading to
   * decide; TCP and UDP only; what has nowhere to go is refused, TCP closed and a UDP datagram
   * dropped, never silently dropped as a rule would).
   */
  readonly carrier: "kernel" | "sockets";
  /** A load-balancer IP drops sources outside `loadBalancerSourceRanges`. */
  readonly enforcesSourceRanges: boolean;
  /**
   * externalTrafficPolicy Local:
   * - `short-circuit`: external clients reach this node's endpoints only; pods and the node reach
   *   every endpoint, as if through the load balancer (iptables);
   * - `short-circuit-node-drops`: the same, but the node's own connection is dropped when no
   *   endpoint is local (nftables: the drop comes before the short-circuit);
   * - `local-first`: every client reaches this node's endpoints; pods and the node reach the
   *   cluster's only when none is local (ipvs), and the client's address is kept for pods too;
   * - `local-for-all`: every client of an external address reaches this node's endpoints only, and
   *   nothing without one (a socket proxy cannot tell a pod's connection through the node from an
   *   outside one; nor can it keep the client's address).
   */
  readonly externalLocal: "short-circuit" | "short-circuit-node-drops" | "local-first" | "local-for-all";
  /**
   * A port no Service serves on a service address: `none` lets it pass (not a service), else it is
   * rejected on cluster IPs (`cluster-ips`, nftables) or on every service address (`service-ips`,
   * ipvs, whose addresses are local).
   */
  readonly rejectsUnservedPorts: "none" | "cluster-ips" | "service-ips";
  /** An address of a ServiceCIDR that no Service holds is dropped (nftables). */
  readonly dropsUnallocatedServiceIPs: boolean;
  /**
   * Forwarded packets conntrack finds INVALID (out-of-window TCP) are dropped, as upstream's iptables
   * mode does (its nftables mode does not), unless `conntrack.tcpBeLiberal` makes none INVALID.
   */
  readonly dropsInvalid: boolean;
  /**
   * Which endpoints are masqueraded when they reach themselves through the Service (hairpin):
   * any (`every-endpoint`, iptables marks by source) or this node's only (`local-endpoints`).
   */
  readonly hairpin: "every-endpoint" | "local-endpoints";
}
