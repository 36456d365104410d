/**
 * ONE table of packet flows for every mode: each row loads a set of objects on a node, sends one
 * packet and says where it must go. A mode's adapter (`*_datapath.ts`) runs every row that applies
 * to it; a row that does not apply names the mode and the reason, so a behaviour difference between
 * modes is either a failing row or a stated one.
 * @module
 */
import type { ProxyMode } from "../../proxier/options/config.ts";
import type { FlowOptions, FlowPacket, FlowResult } from "./datapath.ts";
import type { ExclusionReason } from "../../proxier/read_side/expectation.ts";
import {
  ETP_LOCAL_ELSEWHERE,
  LOCALHOST_NODE_PORTS,
  NODE_A,
  NODE_A_TWO_IPS,
  NODE_A_TWO_IPS_PRIMARY,
  NODE_A_ZONE_A,
  NODE_IP,
  type NodeSpec,
  type ObjectSet,
  REPRESENTATIVE,
  SCHEDULERS,
  TOPOLOGY,
} from "./objects.ts";

/** One flow. */
export interface FlowRow {
  readonly name: string;
  readonly objects: ObjectSet;
  /** Default node-a without labels. */
  readonly node?: NodeSpec;
  readonly options?: FlowOptions;
  readonly packet: FlowPacket;
  /**
   * For DNAT, the endpoints and (where the mode reports it) whether the packet is masqueraded;
   * `sticky`: exactly one of `endpoints` (a returning client's, under ClientIP affinity).
   */
  readonly expect:
    | {
      readonly verdict: "DNAT";
      readonly endpoints: string[];
      readonly masquerade: boolean;
      readonly sticky?: boolean;
    }
    | { readonly verdict: Exclude<FlowResult["verdict"], "DNAT"> };
  /**
   * The service port's endpoints the connection does not reach, each with `explain`'s reason
   * (`proxier/read_side/expectation.ts`); none when it reaches them all or the address is no Service's.
   */
  readonly excluded?: Readonly<Record<string, ExclusionReason>>;
  /** The same where a mode differs (merged over {@linkcode excluded}; null: reached in that mode). */
  readonly excludedIn?: Readonly<
    Partial<Record<ProxyMode, Readonly<Record<string, ExclusionReason | null>>>>
  >;
  /**
   * The expectation where a mode does otherwise, with the reason in {@linkcode differs} (a
   * scheduler annotation one mode honours and another does not).
   */
  readonly expectIn?: Readonly<Partial<Record<ProxyMode, FlowRow["expect"]>>>;
  /** Why the modes in {@linkcode expectIn} differ. */
  readonly differs?: string;
  /** Modes the row does not apply to, each with the reason (a misspelt mode does not compile). */
  readonly doesNotApplyIn?: Readonly<Partial<Record<ProxyMode, string>>>;
}

const POD = "10.180.5.5";
const OUTSIDE = "192.168.0.10";
const tcp = (src: string, dst: string, port: number, fromNode = false): FlowPacket => ({
  src,
  dst,
  port,
  proto: "tcp",
  fromNode,
});
const dnat = (endpoints: string[], masquerade: boolean) => ({
  verdict: "DNAT" as const,
  endpoints,
  masquerade,
});

const USERSPACE_NO_SHORT_CIRCUIT = "a userspace proxy cannot tell a pod's or the node's connection through " +
  "an external address from an outside one: with externalTrafficPolicy Local every client gets this node's " +
  "endpoints only, and one that has none is refused (the connection closed at once)";
const USERSPACE_CLOSES = "a userspace proxy accepts the connection and closes it at once; it cannot drop " +
  "the packet";
const NFT_REJECTS_UNSERVED_PORTS =
  "upstream's nftables mode rejects traffic to ports a cluster IP does not serve";
const NFT_NO_LOCALHOST_NODEPORTS = "upstream's nftables mode serves NodePorts on 127.0.0.1 only when asked " +
  "(--nodeport-addresses=localhost, feature gate KubeProxyNFTablesLocalhostNodePorts; the rows below)";
const IPVS_NO_SHORT_CIRCUIT = "upstream's ipvs mode has one virtual server per node port or LB IP: with " +
  "externalTrafficPolicy Local every client, pods and the node included, gets the local endpoints only";
const IPVS_REJECTS_UNSERVED_PORTS =
  "upstream's ipvs mode rejects new connections to ports a service address does not serve (KUBE-IPVS-FILTER)";
const IPVS_NO_LOCALHOST = "upstream's ipvs mode serves NodePorts on the node's addresses, never on loopback";
const IPTABLES_LOCALHOST_SHORT_CIRCUIT = "iptables serves loopback NodePorts in the kernel: the node's own " +
  "traffic short-circuits to every endpoint, as upstream's";
/** Loopback NodePorts asked for, and (nftables) the gate that serves them. */
const LOCALHOST = { nodePortAddresses: ["primary", "localhost"], localhostNodePortProxy: true } as const;
const NO_SERVICE_CIDRS = "upstream drops traffic to unallocated cluster IPs in nftables mode only; " +
  "the other modes leave it to the node's routes";
const NO_DROP_USERSPACE = "a userspace proxy accepts the connection and then closes it; it cannot drop or " +
  "reject the packet";

/** The table. */
export const FLOWS: readonly FlowRow[] = [
  {
    name: "ClusterIP from a pod",
    objects: REPRESENTATIVE,
    packet: tcp(POD, "172.30.0.41", 80),
    expect: dnat(["10.180.0.1:80"], false),
  },
  {
    name: "ClusterIP from outside the cluster CIDR is masqueraded",
    objects: REPRESENTATIVE,
    packet: tcp(OUTSIDE, "172.30.0.41", 80),
    expect: dnat(["10.180.0.1:80"], true),
  },
  {
    name: "ClusterIP from the host",
    objects: REPRESENTATIVE,
    packet: tcp(NODE_IP, "172.30.0.41", 80, true),
    expect: dnat(["10.180.0.1:80"], true),
  },
  {
    name: "hairpin: the endpoint itself is masqueraded",
    objects: REPRESENTATIVE,
    packet: tcp("10.180.0.1", "172.30.0.41", 80),
    expect: dnat(["10.180.0.1:80"], true),
    doesNotApplyIn: {
      nftables: "10.180.0.1 runs on node-b, whose proxy handles its traffic; nftables mode marks hairpin " +
        "traffic of this node's endpoints only (the next row)",
      ipvs:
        "10.180.0.1 runs on node-b; ipvs mode masquerades hairpin traffic of this node's endpoints only " +
        "(KUBE-LOOP-BACK; the next row)",
    },
  },
  {
    name: "hairpin: a local endpoint reaching itself through its service is masqueraded",
    objects: TOPOLOGY,
    node: NODE_A_ZONE_A,
    packet: tcp("10.180.1.7", "172.30.1.4", 80),
    expect: dnat(["10.180.1.7:80"], true),
    excluded: { "10.180.1.8:80": "topology-node" },
  },
  {
    name: "ClusterIP wrong port",
    objects: REPRESENTATIVE,
    packet: tcp(POD, "172.30.0.41", 81),
    expect: { verdict: "none" },
    doesNotApplyIn: { nftables: NFT_REJECTS_UNSERVED_PORTS, ipvs: IPVS_REJECTS_UNSERVED_PORTS },
  },
  {
    name: "ClusterIP wrong port is rejected (as upstream's nftables and ipvs modes)",
    objects: REPRESENTATIVE,
    packet: tcp(POD, "172.30.0.41", 81),
    expect: { verdict: "REJECT" },
    doesNotApplyIn: {
      iptables: "upstream's iptables mode leaves unserved cluster IP ports alone",
      userspace: "the userspace mode has no listener there, so nothing is done with the packet",
    },
  },
  {
    name: "ETP Local NodePort from outside: local endpoint only, source kept",
    objects: REPRESENTATIVE,
    packet: tcp(OUTSIDE, NODE_IP, 3001),
    expect: dnat(["10.180.0.2:80"], false),
    excluded: { "10.180.0.3:80": "remote-external-local" },
  },
  {
    name: "ETP Local NodePort from a pod: short-circuit to all endpoints",
    objects: REPRESENTATIVE,
    packet: tcp(POD, NODE_IP, 3001),
    expect: dnat(["10.180.0.2:80", "10.180.0.3:80"], false),
    doesNotApplyIn: { ipvs: IPVS_NO_SHORT_CIRCUIT },
    expectIn: { userspace: dnat(["10.180.0.2:80"], true) },
    excludedIn: { userspace: { "10.180.0.3:80": "remote-external-local" } },
    differs: USERSPACE_NO_SHORT_CIRCUIT,
  },
  {
    name: "ETP Local NodePort from the host: all endpoints, masqueraded",
    objects: REPRESENTATIVE,
    packet: tcp(NODE_IP, NODE_IP, 3001, true),
    expect: dnat(["10.180.0.2:80", "10.180.0.3:80"], true),
    doesNotApplyIn: { ipvs: IPVS_NO_SHORT_CIRCUIT },
    expectIn: { userspace: dnat(["10.180.0.2:80"], true) },
    excludedIn: { userspace: { "10.180.0.3:80": "remote-external-local" } },
    differs: USERSPACE_NO_SHORT_CIRCUIT,
  },
  {
    name: "ETP Local NodePort on localhost",
    objects: REPRESENTATIVE,
    packet: tcp("127.0.0.1", "127.0.0.1", 3001, true),
    expect: dnat(["10.180.0.2:80", "10.180.0.3:80"], true),
    doesNotApplyIn: {
      nftables: NFT_NO_LOCALHOST_NODEPORTS,
      ipvs: "upstream's ipvs mode serves NodePorts on the node's addresses, never on 127.0.0.1",
    },
    expectIn: { userspace: dnat(["10.180.0.2:80"], true) },
    excludedIn: { userspace: { "10.180.0.3:80": "remote-external-local" } },
    differs: USERSPACE_NO_SHORT_CIRCUIT,
  },
  {
    name: "no NodePorts on 127.0.0.1 (as upstream's nftables and ipvs modes)",
    objects: REPRESENTATIVE,
    packet: tcp("127.0.0.1", "127.0.0.1", 3001, true),
    expect: { verdict: "none" },
    doesNotApplyIn: {
      iptables: "--iptables-localhost-nodeports (default true) serves NodePorts on 127.0.0.1",
      userspace: "userspace NodePorts listen on every address by default",
    },
  },
  // Loopback NodePorts asked for by name (upstream 1.37's keyword): iptables and userspace serve
  // them as any NodePort; nftables through its socket proxy with KubeProxyNFTablesLocalhostNodePorts.
  {
    name: "localhost NodePort (--nodeport-addresses=primary,localhost): TCP reaches every endpoint",
    objects: LOCALHOST_NODE_PORTS,
    node: NODE_A_ZONE_A,
    options: LOCALHOST,
    packet: tcp("127.0.0.1", "127.0.0.1", 3101, true),
    expect: dnat(["10.180.2.1:80", "10.180.2.2:80"], true),
    doesNotApplyIn: { ipvs: IPVS_NO_LOCALHOST },
  },
  {
    name: "localhost NodePort: UDP too (upstream's nftables proxy: TCP only)",
    objects: LOCALHOST_NODE_PORTS,
    node: NODE_A_ZONE_A,
    options: LOCALHOST,
    packet: { ...tcp("127.0.0.1", "127.0.0.1", 3102, true), proto: "udp" },
    expect: dnat(["10.180.2.3:53"], true),
    doesNotApplyIn: { ipvs: IPVS_NO_LOCALHOST },
  },
  {
    name: "localhost NodePort: ClientIP affinity keeps the client on one endpoint",
    objects: LOCALHOST_NODE_PORTS,
    node: NODE_A_ZONE_A,
    options: LOCALHOST,
    packet: { ...tcp("127.0.0.1", "127.0.0.1", 3105, true), again: true },
    expect: { ...dnat(["10.180.2.7:80", "10.180.2.8:80"], true), sticky: true },
    doesNotApplyIn: { ipvs: IPVS_NO_LOCALHOST },
  },
  {
    name: "localhost NodePort: trafficDistribution picks the zone's endpoint",
    objects: LOCALHOST_NODE_PORTS,
    node: NODE_A_ZONE_A,
    options: LOCALHOST,
    packet: tcp("127.0.0.1", "127.0.0.1", 3106, true),
    expect: dnat(["10.180.2.9:80"], true),
    excluded: { "10.180.2.10:80": "topology-zone" },
    doesNotApplyIn: { ipvs: IPVS_NO_LOCALHOST },
  },
  {
    name:
      "localhost NodePort through nftables' socket proxy, externalTrafficPolicy Local: this node's endpoints only",
    objects: LOCALHOST_NODE_PORTS,
    node: NODE_A_ZONE_A,
    options: LOCALHOST,
    packet: tcp("127.0.0.1", "127.0.0.1", 3103, true),
    expect: dnat(["10.180.2.4:80"], true),
    excluded: { "10.180.2.5:80": "remote-external-local" },
    doesNotApplyIn: {
      iptables: IPTABLES_LOCALHOST_SHORT_CIRCUIT,
      ipvs: IPVS_NO_LOCALHOST,
    },
  },
  {
    name:
      "localhost NodePort through nftables' socket proxy, externalTrafficPolicy Local without a local endpoint: refused",
    objects: LOCALHOST_NODE_PORTS,
    node: NODE_A_ZONE_A,
    options: LOCALHOST,
    packet: tcp("127.0.0.1", "127.0.0.1", 3104, true),
    expect: { verdict: "REJECT" },
    excluded: { "10.180.2.6:80": "remote-external-local" },
    doesNotApplyIn: {
      iptables: IPTABLES_LOCALHOST_SHORT_CIRCUIT,
      ipvs: IPVS_NO_LOCALHOST,
    },
  },
  {
    name:
      "nftables without KubeProxyNFTablesLocalhostNodePorts: localhost named, nothing served there (as upstream)",
    objects: LOCALHOST_NODE_PORTS,
    node: NODE_A_ZONE_A,
    options: { nodePortAddresses: ["primary", "localhost"] },
    packet: tcp("127.0.0.1", "127.0.0.1", 3101, true),
    expect: { verdict: "none" },
    doesNotApplyIn: {
      iptables: "iptables serves loopback NodePorts in the kernel (route_localnet); the gate is nftables'",
      userspace: "userspace NodePorts listen on every address --nodeport-addresses names",
      ipvs: IPVS_NO_LOCALHOST,
    },
  },
  {
    name: "ETP Local external IP from outside",
    objects: REPRESENTATIVE,
    packet: tcp(OUTSIDE, "192.168.99.2", 80),
    expect: dnat(["10.180.0.2:80"], false),
    excluded: { "10.180.0.3:80": "remote-external-local" },
  },
  {
    name: "AllowServiceExternalIPs=false: the external IP is not served",
    objects: REPRESENTATIVE,
    options: { allowExternalIPs: false },
    packet: tcp(OUTSIDE, "192.168.99.2", 80),
    expect: { verdict: "none" },
  },
  {
    name: "AllowServiceExternalIPs=false: the same Service's cluster IP still is",
    objects: REPRESENTATIVE,
    options: { allowExternalIPs: false },
    packet: tcp(POD, "172.30.0.42", 80),
    expect: dnat(["10.180.0.2:80", "10.180.0.3:80"], false),
  },
  {
    name: "ETP Local cluster IP keeps both endpoints",
    objects: REPRESENTATIVE,
    packet: tcp(POD, "172.30.0.42", 80),
    expect: dnat(["10.180.0.2:80", "10.180.0.3:80"], false),
  },
  {
    name: "LB IP from an admitted source",
    objects: REPRESENTATIVE,
    packet: tcp("192.168.99.5", "192.168.99.33", 80),
    expect: dnat(["10.180.0.4:80", "10.180.0.5:80"], true),
  },
  {
    name: "LB IP from a source outside loadBalancerSourceRanges",
    objects: REPRESENTATIVE,
    packet: tcp("192.168.99.100", "192.168.99.33", 80),
    expect: { verdict: "DROP" },
    excluded: { "10.180.0.4:80": "source-range", "10.180.0.5:80": "source-range" },
    expectIn: { userspace: { verdict: "REJECT" } },
    differs: USERSPACE_CLOSES,
  },
  {
    name: "NodePort of a firewalled LB is not subject to source ranges",
    objects: REPRESENTATIVE,
    packet: tcp("192.168.99.100", NODE_IP, 3003),
    expect: dnat(["10.180.0.4:80", "10.180.0.5:80"], true),
  },
  {
    name: "affinity service cluster IP",
    objects: REPRESENTATIVE,
    packet: tcp(POD, "172.30.0.43", 80),
    expect: dnat(["10.180.0.4:80", "10.180.0.5:80"], false),
  },
  {
    name: "ClientIP affinity: a returning client goes to the endpoint its first connection reached",
    objects: REPRESENTATIVE,
    packet: { ...tcp(POD, "172.30.0.43", 80), again: true },
    expect: { ...dnat(["10.180.0.4:80", "10.180.0.5:80"], false), sticky: true },
  },
  {
    name: "no affinity (control): a returning client still reaches every endpoint",
    objects: REPRESENTATIVE,
    packet: { ...tcp(POD, "172.30.0.42", 80), again: true },
    expect: dnat(["10.180.0.2:80", "10.180.0.3:80"], false),
  },
  {
    name: "a cluster IP inside a ServiceCIDR that no Service holds is dropped",
    objects: REPRESENTATIVE,
    options: { serviceCIDRs: ["172.30.0.0/16", "fd00:30::/108"] },
    packet: tcp(POD, "172.30.0.50", 80),
    expect: { verdict: "DROP" },
    doesNotApplyIn: {
      iptables: NO_SERVICE_CIDRS,
      ipvs: NO_SERVICE_CIDRS,
      userspace: NO_SERVICE_CIDRS,
    },
  },
  {
    name: "ServiceCIDRs (control): an allocated cluster IP inside one still reaches its endpoints",
    objects: REPRESENTATIVE,
    options: { serviceCIDRs: ["172.30.0.0/16"] },
    packet: tcp(POD, "172.30.0.41", 80),
    expect: dnat(["10.180.0.1:80"], false),
  },
  {
    name: "UDP service without endpoints rejects",
    objects: REPRESENTATIVE,
    packet: { src: POD, dst: "172.30.0.44", port: 53, proto: "udp" },
    expect: { verdict: "REJECT" },
    doesNotApplyIn: { userspace: "a userspace proxy has no endpoint to send the datagram to and drops it" },
  },
  {
    name: "UDP service without endpoints rejects the host too",
    objects: REPRESENTATIVE,
    packet: { src: NODE_IP, dst: "172.30.0.44", port: 53, proto: "udp", fromNode: true },
    expect: { verdict: "REJECT" },
    doesNotApplyIn: { userspace: "a userspace proxy has no endpoint to send the datagram to and drops it" },
  },
  {
    name: "ITP Local without local endpoints drops",
    objects: REPRESENTATIVE,
    packet: tcp(POD, "172.30.0.45", 80),
    expect: { verdict: "DROP" },
    excluded: { "10.180.0.6:80": "remote-internal-local" },
    doesNotApplyIn: { userspace: NO_DROP_USERSPACE },
  },
  {
    name: "SCTP with only a serving+terminating endpoint",
    objects: REPRESENTATIVE,
    packet: { src: POD, dst: "172.30.0.46", port: 7777, proto: "sctp" },
    expect: dnat(["10.180.0.7:7777"], false),
    excluded: { "10.180.0.8:7777": "not-ready" },
    doesNotApplyIn: { userspace: "userspace mode proxies TCP and UDP only" },
  },
  {
    name: "ETP Local LB without local endpoints drops external traffic",
    objects: REPRESENTATIVE,
    packet: tcp(OUTSIDE, "192.168.99.77", 80),
    expect: { verdict: "DROP" },
    excluded: { "10.180.0.9:80": "remote-external-local" },
    expectIn: { userspace: { verdict: "REJECT" } },
    differs: USERSPACE_CLOSES,
  },
  {
    name: "ETP Local LB without local endpoints: NodePort drops too",
    objects: REPRESENTATIVE,
    packet: tcp(OUTSIDE, NODE_IP, 3007),
    expect: { verdict: "DROP" },
    excluded: { "10.180.0.9:80": "remote-external-local" },
    expectIn: { userspace: { verdict: "REJECT" } },
    differs: USERSPACE_CLOSES,
  },
  {
    name: "ETP Local LB without local endpoints: pods still reach it",
    objects: REPRESENTATIVE,
    packet: tcp(POD, "192.168.99.77", 80),
    expect: dnat(["10.180.0.9:80"], false),
    expectIn: { userspace: { verdict: "REJECT" } },
    excludedIn: { userspace: { "10.180.0.9:80": "remote-external-local" } },
    differs: USERSPACE_NO_SHORT_CIRCUIT,
  },
  {
    name: "ETP Local external IP, endpoint only elsewhere: the node reaches it, masqueraded",
    objects: ETP_LOCAL_ELSEWHERE,
    packet: tcp(NODE_IP, "192.168.99.22", 80, true),
    expect: dnat(["10.180.0.2:80"], true),
    expectIn: { userspace: { verdict: "REJECT" } },
    excludedIn: { userspace: { "10.180.0.2:80": "remote-external-local" } },
    differs: USERSPACE_NO_SHORT_CIRCUIT,
    doesNotApplyIn: {
      nftables: "upstream's nftables mode checks no-endpoint-services in filter output, before DNAT: the " +
        "node's own connection is dropped too (its iptables and ipvs modes let the node through)",
    },
  },
  {
    name: "ETP Local external IP, endpoint only elsewhere: a pod reaches it",
    objects: ETP_LOCAL_ELSEWHERE,
    packet: tcp(POD, "192.168.99.22", 80),
    expect: dnat(["10.180.0.2:80"], false),
    expectIn: { userspace: { verdict: "REJECT" } },
    excludedIn: { userspace: { "10.180.0.2:80": "remote-external-local" } },
    differs: USERSPACE_NO_SHORT_CIRCUIT,
  },
  {
    name: "ETP Local external IP, endpoint only elsewhere: a client elsewhere is dropped",
    objects: ETP_LOCAL_ELSEWHERE,
    packet: tcp(OUTSIDE, "192.168.99.22", 80),
    expect: { verdict: "DROP" },
    excluded: { "10.180.0.2:80": "remote-external-local" },
    expectIn: { userspace: { verdict: "REJECT" } },
    differs: USERSPACE_CLOSES,
  },
  {
    name: "ETP Local LB cluster IP unaffected",
    objects: REPRESENTATIVE,
    packet: tcp(POD, "172.30.0.47", 80),
    expect: dnat(["10.180.0.9:80"], false),
  },
  // Flags.
  {
    name: "--masquerade-all masquerades pod traffic to a cluster IP",
    objects: REPRESENTATIVE,
    options: { masqueradeAll: true },
    packet: tcp(POD, "172.30.0.41", 80),
    expect: dnat(["10.180.0.1:80"], true),
    doesNotApplyIn: {
      userspace: "the userspace proxy is the source of every connection; there is nothing to masquerade",
    },
  },
  {
    name: "--iptables-localhost-nodeports=false refuses NodePorts on 127.0.0.1",
    objects: REPRESENTATIVE,
    options: { localhostNodePorts: false },
    packet: tcp("127.0.0.1", "127.0.0.1", 3001, true),
    expect: { verdict: "none" },
    doesNotApplyIn: {
      userspace: "an iptables-mode flag; userspace NodePorts listen on --nodeport-addresses",
    },
  },
  {
    name: "--nodeport-addresses: an address inside answers",
    objects: REPRESENTATIVE,
    node: NODE_A_TWO_IPS,
    options: { nodePortAddresses: ["192.168.0.0/24"] },
    packet: tcp(OUTSIDE, NODE_IP, 3003),
    expect: dnat(["10.180.0.4:80", "10.180.0.5:80"], true),
  },
  {
    name: "--nodeport-addresses=primary before the Node's address is known: every node address answers",
    objects: REPRESENTATIVE,
    node: NODE_A_TWO_IPS,
    options: { nodePortAddresses: ["primary"] },
    packet: tcp(OUTSIDE, "10.99.0.1", 3003),
    expect: dnat(["10.180.0.4:80", "10.180.0.5:80"], true),
  },
  {
    name: "--nodeport-addresses=primary: the Node's InternalIP answers",
    objects: REPRESENTATIVE,
    node: NODE_A_TWO_IPS_PRIMARY,
    options: { nodePortAddresses: ["primary"] },
    packet: tcp(OUTSIDE, "10.99.0.1", 3003),
    expect: dnat(["10.180.0.4:80", "10.180.0.5:80"], true),
  },
  {
    name: "--nodeport-addresses=primary: another node address does not",
    objects: REPRESENTATIVE,
    node: NODE_A_TWO_IPS_PRIMARY,
    options: { nodePortAddresses: ["primary"] },
    packet: tcp(OUTSIDE, NODE_IP, 3003),
    expect: { verdict: "none" },
  },
  {
    name: "--nodeport-addresses: an address outside does not",
    objects: REPRESENTATIVE,
    node: NODE_A_TWO_IPS,
    options: { nodePortAddresses: ["192.168.0.0/24"] },
    packet: tcp(OUTSIDE, "10.99.0.1", 3003),
    expect: { verdict: "none" },
  },
  // Topology-aware routing (upstream's topology.go).
  {
    name: "zone hints: only the endpoint hinted for this node's zone",
    objects: TOPOLOGY,
    node: NODE_A_ZONE_A,
    packet: tcp(POD, "172.30.1.1", 80),
    expect: dnat(["10.180.1.1:80"], false),
    excluded: { "10.180.1.2:80": "topology-zone" },
  },
  {
    name: "zone hints ignored when the node has no zone label",
    objects: TOPOLOGY,
    node: NODE_A,
    packet: tcp(POD, "172.30.1.1", 80),
    expect: dnat(["10.180.1.1:80", "10.180.1.2:80"], false),
  },
  {
    name: "zone hints ignored when a ready endpoint has no hint",
    objects: TOPOLOGY,
    node: NODE_A_ZONE_A,
    packet: tcp(POD, "172.30.1.2", 80),
    expect: dnat(["10.180.1.3:80", "10.180.1.4:80"], false),
  },
  {
    name: "zone hints ignored when no endpoint is hinted for this zone",
    objects: TOPOLOGY,
    node: NODE_A_ZONE_A,
    packet: tcp(POD, "172.30.1.3", 80),
    expect: dnat(["10.180.1.5:80", "10.180.1.6:80"], false),
  },
  {
    name: "node hints (PreferSameNode) win over zone hints",
    objects: TOPOLOGY,
    node: NODE_A_ZONE_A,
    packet: tcp(POD, "172.30.1.4", 80),
    expect: dnat(["10.180.1.7:80"], false),
    excluded: { "10.180.1.8:80": "topology-node" },
  },
  {
    name: "serving+terminating fallback ignores hints",
    objects: TOPOLOGY,
    node: NODE_A_ZONE_A,
    packet: tcp(POD, "172.30.1.5", 80),
    expect: dnat(["10.180.1.10:80", "10.180.1.9:80"], false),
  },
  {
    name: "ETP Local with hints: internal traffic follows the hints",
    objects: TOPOLOGY,
    node: NODE_A_ZONE_A,
    packet: tcp(POD, "172.30.1.6", 80),
    expect: dnat(["10.180.1.12:80"], false),
    excluded: { "10.180.1.11:80": "topology-zone" },
  },
  {
    name: "ETP Local with hints: external traffic uses the local endpoint whatever its hint",
    objects: TOPOLOGY,
    node: NODE_A_ZONE_A,
    packet: tcp(OUTSIDE, NODE_IP, 3016),
    expect: dnat(["10.180.1.11:80"], false),
    excluded: { "10.180.1.12:80": "remote-external-local" },
  },
  {
    name: "ETP Local with hints: a pod's NodePort traffic short-circuits to the hinted endpoints",
    objects: TOPOLOGY,
    node: NODE_A_ZONE_A,
    packet: tcp(POD, NODE_IP, 3016),
    expect: dnat(["10.180.1.12:80"], false),
    excluded: { "10.180.1.11:80": "topology-zone" },
    doesNotApplyIn: { ipvs: IPVS_NO_SHORT_CIRCUIT },
    expectIn: { userspace: dnat(["10.180.1.11:80"], true) },
    excludedIn: { userspace: { "10.180.1.11:80": null, "10.180.1.12:80": "remote-external-local" } },
    differs: USERSPACE_NO_SHORT_CIRCUIT,
  },
  ...schedulerRows(),
];

/**
 * The scheduler annotations: nftables hashes sh, dh and mh to one endpoint per client (the row's
 * `sticky`: exactly one of them); the ipvs mode hands them to IPVS (its adapter reports the virtual
 * server's real servers, not the kernel's pick); iptables and userspace do not honour them.
 */
function schedulerRows(): FlowRow[] {
  const three = (n: number) => [1, 2, 3].map((i) => `10.180.3.${n * 10 + i}:80`);
  const all = (n: number) => dnat(three(n), false);
  const hashed = (n: number, masquerade = false) => ({ ...dnat(three(n), masquerade), sticky: true });
  const notHashed = "only the nftables mode's tracer tells the one endpoint a hash picks; " +
    "the others reach (or report) every endpoint: iptables and userspace do not honour the annotation, " +
    "and the ipvs adapter reports the virtual server's real servers";
  const hashedRow = (name: string, n: number, packet: FlowPacket, masquerade = false): FlowRow => ({
    name,
    objects: SCHEDULERS,
    packet,
    expect: hashed(n, masquerade),
    expectIn: {
      iptables: dnat(three(n), masquerade),
      userspace: dnat(three(n), masquerade),
      ipvs: dnat(three(n), masquerade),
    },
    differs: notHashed,
  });
  return [
    {
      name: "scheduler rr: connections go to each endpoint in turn",
      objects: SCHEDULERS,
      packet: tcp(POD, "172.30.3.1", 80),
      expect: all(1),
    },
    hashedRow("scheduler sh: a client's connections all go to one endpoint", 2, tcp(POD, "172.30.3.2", 80)),
    hashedRow(
      "scheduler sh with flag-2: one endpoint per source address and port",
      3,
      tcp(POD, "172.30.3.3", 80),
    ),
    hashedRow(
      "scheduler dh: every connection to the address goes to one endpoint",
      4,
      tcp(POD, "172.30.3.4", 80),
    ),
    hashedRow(
      "scheduler mh (Maglev): a connection's 5-tuple picks one endpoint",
      5,
      tcp(POD, "172.30.3.5", 80),
    ),
    hashedRow(
      "scheduler mh: the NodePort, from outside, picks one endpoint by the same table",
      5,
      tcp(OUTSIDE, NODE_IP, 3205),
      true,
    ),
    hashedRow(
      "scheduler mh with flags but not flag-2: the source address picks (3-tuple)",
      6,
      tcp(POD, "172.30.3.6", 80),
    ),
    {
      name: "scheduler lc: needs IPVS's connection counts; elsewhere connections go to any endpoint",
      objects: SCHEDULERS,
      packet: tcp(POD, "172.30.3.7", 80),
      expect: all(7),
    },
  ];
}
