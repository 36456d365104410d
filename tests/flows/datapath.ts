/**
 * What a mode provides to the flow table: load a set of objects into its real proxier over its
 * fakes, then say where a packet goes.
 * @module
 */
import type { Packet } from "../../proxier/trace/packet.ts";
import type { BaseProxier } from "../../proxier/base_proxier.ts";
import type { Provider } from "../../proxier/provider.ts";
import type { FamilyView } from "../../proxier/family_view.ts";
import type { ProxyMode } from "../../proxier/options/config.ts";
import { makeNode } from "../support/fixtures.ts";
import type { NodeSpec, ObjectSet } from "./objects.ts";

/** Flags that change rule shape; each adapter maps them to its mode's options. */
export interface FlowOptions {
  readonly masqueradeAll?: boolean;
  readonly localhostNodePorts?: boolean;
  readonly nodePortAddresses?: readonly string[];
  /** The cluster's ServiceCIDRs (what the ServiceCIDR objects hold); default none. */
  readonly serviceCIDRs?: readonly string[];
  /** Feature gate AllowServiceExternalIPs; default true. */
  readonly allowExternalIPs?: boolean;
  /** Feature gate KubeProxyNFTablesLocalhostNodePorts (nftables mode only); default false. */
  readonly localhostNodePortProxy?: boolean;
}

/** Everything a load depends on; rows with equal setups share one load. */
export interface FlowSetup {
  readonly objects: ObjectSet;
  readonly node: NodeSpec;
  readonly options: FlowOptions;
}

/** A packet opening a connection. */
export interface FlowPacket {
  readonly src: string;
  readonly dst: string;
  readonly port: number;
  readonly proto: "tcp" | "udp" | "sctp";
  /** Sent by a process on this node (OUTPUT) rather than arriving from a pod or another host. */
  readonly fromNode?: boolean;
  /**
   * The same client's second connection, after a first one that reached the last endpoint the
   * packet can reach (for ClientIP affinity: with it, the second goes there too).
   */
  readonly again?: boolean;
}

/** Where the packet went. */
export interface FlowResult {
  /** `ip:port` of every endpoint the packet can reach, sorted. */
  readonly endpoints: string[];
  /** The endpoint sees the node (or service) address rather than the client's. */
  readonly masquerade: boolean;
  /**
   * DNAT: it reaches `endpoints`; REJECT: refused at once; DROP: silently dropped; none: not a
   * service address, left alone.
   */
  readonly verdict: "DNAT" | "REJECT" | "DROP" | "none";
}

/** A loaded setup: where each packet goes, and the model the mode's proxier synced (`explain`'s). */
export type Loaded = ((packet: FlowPacket) => FlowResult) & { readonly view: FamilyView };

/** Returns `trace` with the IPv4 view of `proxier` (read at each call: the maps are the live ones). */
export function withView(proxier: BaseProxier, trace: (packet: FlowPacket) => FlowResult): Loaded {
  return Object.assign(trace, { view: proxier.familyView() });
}

/** One mode's adapter. */
export interface Datapath {
  /** The `--proxy-mode` name. */
  readonly mode: ProxyMode;
  /**
   * False when the mode always hides the client's address (a userspace proxy is the source of
   * every connection it makes), so rows' masquerade expectations do not apply.
   */
  readonly reportsMasquerade: boolean;
  /** Loads the setup into the mode's real proxier on fakes and syncs once. */
  load(setup: FlowSetup): Promise<Loaded>;
}

/** Feeds the setup's Node and objects to `p`, then both "synced" calls. */
export function feed(
  p: Provider,
  setup: Pick<FlowSetup, "objects" | "node"> & { options?: FlowOptions },
): void {
  const node = makeNode(setup.node.name, setup.node.labels);
  if (setup.node.internalIP !== undefined) {
    node.status = { addresses: [{ type: "InternalIP", address: setup.node.internalIP }] };
  }
  p.onNodeAdd(node);
  const { services, slices } = setup.objects.build();
  for (const s of services) p.onServiceAdd(s);
  for (const s of slices) p.onEndpointSliceAdd(s);
  if (setup.options?.serviceCIDRs !== undefined) p.onServiceCIDRsChanged(setup.options.serviceCIDRs);
  p.onServicesSynced();
  p.onEndpointSlicesSynced();
}

/** Returns the packet as the iptables tracer takes it (`returningTo`: see {@linkcode FlowPacket.again}). */
export function tracerPacket(p: FlowPacket, returningTo?: string): Packet {
  return { src: p.src, dst: p.dst, port: p.port, protocol: p.proto, fromHost: p.fromNode, returningTo };
}

/**
 * Runs `trace` for `p`; for a second connection ({@linkcode FlowPacket.again}), first for the
 * first one, then for the second, told where the first went.
 */
export function traceAgain<R extends { endpoints: readonly string[] }>(
  p: FlowPacket,
  trace: (returningTo?: string) => R,
): R {
  if (p.again !== true) return trace();
  const first = trace();
  return trace(first.endpoints.at(-1));
}
