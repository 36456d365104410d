/**
 * The nftables mode's layout: table `kube-proxy` (upstream's name) in family `ip` or `ip6` with a
 * FIXED set of chains, sets and maps. Services and endpoints exist only as map and set elements,
 * so the kernel's cost grows with the number of elements, not of chains (it grows superlinearly
 * with chains). The only chains that depend on the objects are `lb-N` / `lbc-N` (one per distinct
 * endpoint count N: `numgen random mod N` needs a constant, and one per scheduler a Service asks
 * for: `lb-rr-N`, `lb-sh-N`...) and `affinity-T` / `affinity-record-T` (one per distinct ClientIP
 * timeout T); neither grows with the number of services or endpoints. Maglev Services alone have a
 * chain and map of their own (`mh-...`, `maglev_maps.ts`): their lookup table.
 *
 * Packet path (every lookup keyed by destination address . protocol . port, "the entry"):
 * - filter, before DNAT: `firewall-check` (loadBalancerSourceRanges), as upstream;
 * - nat: `services` -> `@service-ips` -> `internal` (cluster IPs), `external` (externalTrafficPolicy
 *   Cluster) or `external-local` (Local, with upstream's short-circuits for pods and the node)
 *   -> `@affinity-check` (a client already pinned) -> `@lb` -> `lb-N`, which DNATs to
 *   `@backends[entry . index]` with `index = numgen random mod N`;
 * - filter, after DNAT: `service-endpoints-check` (REJECT / DROP for services without usable
 *   endpoints) and `cluster-ips-check` (REJECT for ports a cluster IP does not serve), as upstream,
 *   and `affinity-record` (pins the client to the endpoint the DNAT chose);
 * - nat postrouting: `masquerading` (the masquerade mark, and hairpin via `@hairpin`).
 *
 * Every rule is written in the form `nft list` prints it, so a listing reads back as sent.
 * @module
 */
import { type LocalDetector, nftLocalMatch } from "../_common/local_detector.ts";
import type { NftHook, NftSetKind, NftTransaction } from "../../iptables/nft_transaction.ts";
import type { NftChainInfo } from "../../iptables/nft.ts";
import { type NftBaseHook, priorityValue } from "../../iptables/nft_priority.ts";
import type { IPFamily } from "../model/types.ts";

/** A chain, set or map name in our table. */
export type NftName = string;

/** Our table, in both families (upstream's name: switching from its nftables mode cleans up). */
export const TABLE: NftName = "kube-proxy";
/**
 * An empty chain that marks the table as ours and names the layout version: a `kube-proxy` table
 * without it (upstream's, an older layout) is replaced whole at the first full sync, as is one
 * holding it beside what this layout never writes ({@linkcode foreignLayout}).
 */
export const LAYOUT_MARKER: NftName = "kube-proxy-deno-layout-2";

/** filter, prerouting, before DNAT: source-range firewall. */
export const FILTER_PREROUTING_PRE_DNAT: NftName = "filter-prerouting-pre-dnat";
/** filter, output, before DNAT: source-range firewall of the node's own traffic. */
export const FILTER_OUTPUT_PRE_DNAT: NftName = "filter-output-pre-dnat";
/** filter, input (after DNAT): services without endpoints (NodePorts on node addresses too), affinity recording. */
export const FILTER_INPUT: NftName = "filter-input";
/** filter, forward (after DNAT): services without endpoints, unserved cluster IP ports, affinity recording. */
export const FILTER_FORWARD: NftName = "filter-forward";
/** filter, output (after DNAT): services without endpoints, unserved cluster IP ports, affinity recording. */
export const FILTER_OUTPUT: NftName = "filter-output";
/** nat, prerouting: service dispatch. */
export const NAT_PREROUTING: NftName = "nat-prerouting";
/** nat, output: service dispatch for the node's own traffic. */
export const NAT_OUTPUT: NftName = "nat-output";
/** nat, postrouting: masquerade. */
export const NAT_POSTROUTING: NftName = "nat-postrouting";
/** Service dispatch by entry. */
export const SERVICES: NftName = "services";
/** Masquerades marked and hairpin traffic. */
export const MASQUERADING: NftName = "masquerading";
/** Sets the masquerade mark. */
export const MARK_MASQ: NftName = "mark-for-masquerade";
/** Cluster IP traffic. */
export const INTERNAL: NftName = "internal";
/** External traffic of externalTrafficPolicy Cluster services. */
export const EXTERNAL: NftName = "external";
/** External traffic of externalTrafficPolicy Local services. */
export const EXTERNAL_LOCAL: NftName = "external-local";
/** The cluster-wide endpoints of an externalTrafficPolicy Local entry (short-circuits). */
export const EXTERNAL_CLUSTER: NftName = "external-cluster";
/** REJECT / DROP for services without usable endpoints. */
export const SERVICE_ENDPOINTS_CHECK: NftName = "service-endpoints-check";
/** REJECT for ports a cluster IP does not serve. */
export const CLUSTER_IPS_CHECK: NftName = "cluster-ips-check";
/** Sends firewalled load-balancer entries to {@linkcode FIREWALL}. */
export const FIREWALL_CHECK: NftName = "firewall-check";
/** Admits sources listed in `@firewall-allow`, drops the rest. */
export const FIREWALL: NftName = "firewall";
/** Helper for REJECT verdicts in maps. */
export const REJECT_CHAIN: NftName = "reject-chain";
/** Sends new DNATed connections of affinity entries to their `affinity-record-T`. */
export const AFFINITY_RECORD: NftName = "affinity-record";

/** Active cluster IPs (unserved ports are rejected). */
export const CLUSTER_IPS: NftName = "cluster-ips";
/** `endpoint . endpoint` pairs of this node's endpoints: a pod reaching itself through a service is masqueraded. */
export const HAIRPIN: NftName = "hairpin";
/** `entry . source range` intervals admitted by loadBalancerSourceRanges. */
export const FIREWALL_ALLOW: NftName = "firewall-allow";
/** entry -> the kind chain (`internal`, `external`, `external-local`). */
export const SERVICE_IPS: NftName = "service-ips";
/** entry -> `goto reject-chain` or `drop`. */
export const NO_ENDPOINT_SERVICES: NftName = "no-endpoint-services";
/** firewalled load-balancer entry -> `goto firewall`. */
export const FIREWALL_IPS: NftName = "firewall-ips";
/** entry -> `goto lb-N` over its endpoints in {@linkcode BACKENDS}. */
export const LB: NftName = "lb";
/** externalTrafficPolicy Local entry -> `goto lbc-N` over its cluster-wide endpoints. */
export const LB_CLUSTER: NftName = "lb-cluster";
/** `entry . index` -> endpoint address . port. */
export const BACKENDS: NftName = "backends";
/** `entry . index` -> endpoint, cluster-wide set of externalTrafficPolicy Local entries. */
export const BACKENDS_CLUSTER: NftName = "backends-cluster";
/** affinity entry -> `jump affinity-T`. */
export const AFFINITY_CHECK: NftName = "affinity-check";
/** affinity entry -> `goto affinity-record-T`. */
export const AFFINITY_RECORDS: NftName = "affinity-records";

/**
 * One element: the number of the last transaction this process applied. Every transaction rewrites
 * it, so the drift check finds one that nft said it applied but the kernel does not hold.
 */
export const SYNC_GENERATION: NftName = "sync-generation";

/** `affinity-T`: the dynamic map (and the chain DNATing from it) for ClientIP timeout T seconds. */
export function affinityName(t: number): NftName {
  return `affinity-${t}`;
}
/** The timeout T of `affinity-T` (the inverse of {@linkcode affinityName}). */
export function affinityTimeout(name: NftName): number {
  return Number(name.slice("affinity-".length));
}
/** `affinity-record-T`: records a new connection's endpoint in `affinity-T`. */
export function affinityRecordChain(t: number): NftName {
  return `affinity-record-${t}`;
}

/**
 * Maps and sets of the fixed layout, each with a chain whose rule uses it: while the rule is there
 * the kernel refuses to delete them, which the thorough drift check asks cheaply (a flushed chain
 * or table is found without listing the table's rules, which makes nft fetch every element).
 */
export const REFERENCED: ReadonlyArray<readonly ["map" | "set", NftName, NftName]> = [
  ["map", SERVICE_IPS, SERVICES],
  ["map", LB, INTERNAL],
  ["map", NO_ENDPOINT_SERVICES, SERVICE_ENDPOINTS_CHECK],
  ["set", CLUSTER_IPS, CLUSTER_IPS_CHECK],
];

/**
 * Object-dependent chains (and affinity maps), recognised by name for stale cleanup: the lb chains
 * (`backends.ts`), `affinity-T` / `affinity-record-T`, and the Maglev chains and maps (`maglev_maps.ts`).
 */
export const DYNAMIC_CHAIN = /^(lbc?(-(rr|sh|shp|dh))?|affinity|affinity-record)-[1-9]\d{0,5}$|^mh-/;

/** Returns a hash seed as nft prints it: eight hex digits, without `0x`. */
export function seedHex(seed: number): string {
  return seed.toString(16).padStart(8, "0");
}

/**
 * Base chains: upstream's names, hooks and priorities, each priority written as nft prints it (nft
 * takes no symbolic `dstnat` on the output hook). Being upstream's, each program's first sync finds
 * the other's base chains already at the hook and priority it wants: the kernel refuses to move a
 * base chain (EOPNOTSUPP), and an upstream that takes the table over leaves none of ours hooked.
 */
const BASE_CHAINS: ReadonlyArray<NftHook & { name: NftName }> = [
  { name: FILTER_PREROUTING_PRE_DNAT, type: "filter", hook: "prerouting", priority: "dstnat - 10" },
  { name: FILTER_OUTPUT_PRE_DNAT, type: "filter", hook: "output", priority: "-110" },
  { name: FILTER_INPUT, type: "filter", hook: "input", priority: "filter" },
  { name: FILTER_FORWARD, type: "filter", hook: "forward", priority: "filter" },
  { name: FILTER_OUTPUT, type: "filter", hook: "output", priority: "filter" },
  { name: NAT_PREROUTING, type: "nat", hook: "prerouting", priority: "dstnat" },
  { name: NAT_OUTPUT, type: "nat", hook: "output", priority: "-100" },
  { name: NAT_POSTROUTING, type: "nat", hook: "postrouting", priority: "srcnat" },
];

const REGULAR_CHAINS: readonly NftName[] = [
  SERVICES,
  MASQUERADING,
  MARK_MASQ,
  INTERNAL,
  EXTERNAL,
  EXTERNAL_LOCAL,
  EXTERNAL_CLUSTER,
  SERVICE_ENDPOINTS_CHECK,
  CLUSTER_IPS_CHECK,
  FIREWALL_CHECK,
  FIREWALL,
  REJECT_CHAIN,
  AFFINITY_RECORD,
  LAYOUT_MARKER,
];

/**
 * The comments upstream's nftables mode gives the objects whose names this layout shares with it:
 * written the same, so a node rolled back to upstream holds exactly what upstream alone writes (its
 * `add` keeps an existing object's comment as it was).
 */
const UPSTREAM_COMMENTS: ReadonlyMap<NftName, string> = new Map([
  [CLUSTER_IPS, "Active ClusterIPs"],
  [SERVICE_IPS, "ClusterIP, ExternalIP and LoadBalancer IP traffic"],
  [NO_ENDPOINT_SERVICES, "vmap to drop or reject packets to services with no endpoints"],
  [FIREWALL_IPS, "destinations that are subject to LoadBalancerSourceRanges"],
  [REJECT_CHAIN, "helper for @no-endpoint-services / @no-endpoint-nodeports"],
]);

/** The table's comment, as upstream's. */
const TABLE_COMMENT = "rules for kube-proxy";

/** Every fixed chain, base and regular. */
export const FIXED_CHAINS: ReadonlySet<NftName> = new Set([
  ...BASE_CHAINS.map((c) => c.name),
  ...REGULAR_CHAINS,
]);

const BASE_HOOKS: ReadonlyMap<NftName, NftBaseHook> = new Map(
  BASE_CHAINS.map((c) => [c.name, { type: c.type, hook: c.hook, priority: priorityValue(c.priority) }]),
);

/**
 * Returns why a `kube-proxy` table as listed is not this layout's to update in place, or undefined
 * when it is. Another writer (upstream's nftables mode taking the table over, an older layout) may
 * have removed the marker, added chains, or hooked a chain elsewhere, and the kernel refuses to move
 * a base chain, so such a table is replaced whole, never patched.
 */
export function foreignLayout(chains: readonly NftChainInfo[]): string | undefined {
  if (!chains.some((c) => c.name === LAYOUT_MARKER)) return `it has no ${LAYOUT_MARKER} chain`;
  for (const c of chains) {
    const want = BASE_HOOKS.get(c.name);
    const held = c.base === undefined
      ? "no hook"
      : `${c.base.type} hook ${c.base.hook} priority ${c.base.priority}`;
    if (want !== undefined) {
      if (c.base?.type !== want.type || c.base.hook !== want.hook || c.base.priority !== want.priority) {
        return `chain ${c.name} has ${held}, not ${want.type} hook ${want.hook} priority ${want.priority}`;
      }
    } else if (c.base !== undefined) return `chain ${c.name} (${held}) is not one of this layout's`;
    else if (!FIXED_CHAINS.has(c.name) && !DYNAMIC_CHAIN.test(c.name)) {
      return `chain ${c.name} is not one of this layout's`;
    }
  }
  return undefined;
}

/**
 * The element containers whose values name only chains of the fixed layout (or none): an element
 * of theirs is valid as soon as the layout exists.
 */
export const FIXED_VERDICT_CONTAINERS: readonly NftName[] = [
  CLUSTER_IPS,
  HAIRPIN,
  FIREWALL_ALLOW,
  SERVICE_IPS,
  NO_ENDPOINT_SERVICES,
  FIREWALL_IPS,
];

/** The element containers whose values name the backends maps or the lb chains reading them. */
export const BALANCING_CONTAINERS: readonly NftName[] = [LB, LB_CLUSTER, BACKENDS, BACKENDS_CLUSTER];

/** The fixed sets and maps whose elements the proxier manages (flushed and refilled by full syncs). */
export const ELEMENT_CONTAINERS: readonly NftName[] = [
  ...FIXED_VERDICT_CONTAINERS,
  ...BALANCING_CONTAINERS,
  AFFINITY_CHECK,
  AFFINITY_RECORDS,
];

/** What the fixed rules depend on. */
export interface LayoutOptions {
  readonly family: IPFamily;
  readonly masqueradeAll: boolean;
  /** The masquerade mark, e.g. `0x00004000`. */
  readonly mark: string;
  /** How traffic from this node's pods is told; undefined when it cannot be. */
  readonly local: LocalDetector | undefined;
  /**
   * The cluster's service CIDRs of this family (ServiceCIDR objects): traffic to an address in them
   * that no Service holds is dropped, as upstream, so it fails fast instead of leaving by the default
   * route. Default none.
   */
  readonly serviceCIDRs?: readonly string[];
}

/**
 * Adds to `tx` the statements that (re)create the fixed layout: table, chains (flushed), rules, and
 * the fixed sets and maps (flushed). Elements are added separately.
 */
export function fixedLayout(tx: NftTransaction, o: LayoutOptions): void {
  const { family: fam, addrType: addr } = tx;
  const entry = `${addr} . inet_proto . inet_service`;
  const key = `${fam} daddr . meta l4proto . th dport`;
  tx.addTable(TABLE_COMMENT);
  for (const c of BASE_CHAINS) tx.addChain(c.name, c).flushChain(c.name);
  for (const c of REGULAR_CHAINS) tx.addChain(c, undefined, UPSTREAM_COMMENTS.get(c)).flushChain(c);
  const sets: Array<[NftSetKind, NftName, string]> = [
    ["set", CLUSTER_IPS, `type ${addr}`],
    ["set", HAIRPIN, `type ${addr} . ${addr}`],
    ["set", FIREWALL_ALLOW, `type ${entry} . ${addr}; flags interval`],
    ["map", SERVICE_IPS, `type ${entry} : verdict`],
    ["map", NO_ENDPOINT_SERVICES, `type ${entry} : verdict`],
    ["map", FIREWALL_IPS, `type ${entry} : verdict`],
    ["map", LB, `type ${entry} : verdict`],
    ["map", LB_CLUSTER, `type ${entry} : verdict`],
    ["map", AFFINITY_CHECK, `type ${entry} : verdict`],
    ["map", AFFINITY_RECORDS, `type ${entry} : verdict`],
    ["set", SYNC_GENERATION, "type mark"],
  ];
  for (const [kind, name, decl] of sets) {
    const comment = UPSTREAM_COMMENTS.get(name);
    tx.addSet(kind, name, `${decl};${comment === undefined ? "" : ` comment "${comment}";`}`).flushSet(
      kind,
      name,
    );
  }
  const rule = (chain: NftName, text: string) => tx.addRule(chain, text);
  rule(FILTER_PREROUTING_PRE_DNAT, `ct state new jump ${FIREWALL_CHECK}`);
  rule(FILTER_OUTPUT_PRE_DNAT, `ct state new jump ${FIREWALL_CHECK}`);
  // After DNAT a service without endpoints still has its own address (nothing rewrote it), so the
  // check sees it; an endpoint's address is in no such map.
  rule(FILTER_INPUT, `ct state new jump ${SERVICE_ENDPOINTS_CHECK}`);
  rule(FILTER_INPUT, `ct state new ct status dnat jump ${AFFINITY_RECORD}`);
  // No rule drops a forwarded packet conntrack finds INVALID: upstream's nftables mode decided so
  // (the iptables mode's drop broke legitimate traffic in ways liberal conntrack only partly fixed).
  rule(FILTER_FORWARD, `ct state new jump ${SERVICE_ENDPOINTS_CHECK}`);
  rule(FILTER_FORWARD, `ct state new jump ${CLUSTER_IPS_CHECK}`);
  rule(FILTER_FORWARD, `ct state new ct status dnat jump ${AFFINITY_RECORD}`);
  rule(FILTER_OUTPUT, `ct state new jump ${SERVICE_ENDPOINTS_CHECK}`);
  rule(FILTER_OUTPUT, `ct state new jump ${CLUSTER_IPS_CHECK}`);
  rule(FILTER_OUTPUT, `ct state new ct status dnat jump ${AFFINITY_RECORD}`);
  rule(NAT_PREROUTING, `jump ${SERVICES}`);
  rule(NAT_OUTPUT, `jump ${SERVICES}`);
  rule(NAT_POSTROUTING, `jump ${MASQUERADING}`);
  rule(SERVICES, `${key} vmap @${SERVICE_IPS}`);
  rule(MARK_MASQ, `meta mark set meta mark | ${o.mark}`);
  rule(MASQUERADING, `ct status dnat ${fam} saddr . ${fam} daddr @${HAIRPIN} jump ${MARK_MASQ}`);
  rule(MASQUERADING, `meta mark & ${o.mark} == 0x00000000 return`);
  rule(MASQUERADING, `meta mark set meta mark ^ ${o.mark}`);
  rule(MASQUERADING, "masquerade fully-random");
  // Cluster IP traffic: masquerade what does not come from pods (or everything).
  if (o.masqueradeAll) rule(INTERNAL, `jump ${MARK_MASQ}`);
  else if (o.local !== undefined) {
    rule(INTERNAL, `${nftLocalMatch(o.local, o.family, false)} jump ${MARK_MASQ}`);
  }
  rule(INTERNAL, `${key} vmap @${AFFINITY_CHECK}`);
  rule(INTERNAL, `${key} vmap @${LB}`);
  // externalTrafficPolicy Cluster: the endpoint may be on another node, so always masquerade.
  rule(EXTERNAL, `jump ${MARK_MASQ}`);
  rule(EXTERNAL, `${key} vmap @${AFFINITY_CHECK}`);
  rule(EXTERNAL, `${key} vmap @${LB}`);
  // externalTrafficPolicy Local: pods and the node itself reach every endpoint (as if going out
  // to the load balancer and back); the node is masqueraded (its source is the VIP itself).
  if (o.local !== undefined) {
    rule(EXTERNAL_LOCAL, `${nftLocalMatch(o.local, o.family, true)} goto ${EXTERNAL_CLUSTER}`);
  }
  rule(EXTERNAL_LOCAL, `fib saddr type local jump ${MARK_MASQ}`);
  rule(EXTERNAL_LOCAL, `fib saddr type local goto ${EXTERNAL_CLUSTER}`);
  rule(EXTERNAL_LOCAL, `${key} vmap @${AFFINITY_CHECK}`);
  rule(EXTERNAL_LOCAL, `${key} vmap @${LB}`);
  rule(EXTERNAL_CLUSTER, `${key} vmap @${AFFINITY_CHECK}`);
  rule(EXTERNAL_CLUSTER, `${key} vmap @${LB_CLUSTER}`);
  rule(SERVICE_ENDPOINTS_CHECK, `${key} vmap @${NO_ENDPOINT_SERVICES}`);
  rule(CLUSTER_IPS_CHECK, `${fam} daddr @${CLUSTER_IPS} reject`);
  if ((o.serviceCIDRs ?? []).length > 0) {
    rule(CLUSTER_IPS_CHECK, `${fam} daddr { ${o.serviceCIDRs!.join(", ")} } drop`);
  }
  rule(FIREWALL_CHECK, `${key} vmap @${FIREWALL_IPS}`);
  rule(FIREWALL, `${key} . ${fam} saddr @${FIREWALL_ALLOW} return`);
  rule(FIREWALL, "drop");
  rule(REJECT_CHAIN, "reject");
  // ct original proto-dst needs a protocol dependency to go into a concatenation.
  for (const p of ["tcp", "udp", "sctp"]) {
    rule(
      AFFINITY_RECORD,
      `meta l4proto ${p} ct original ${fam} daddr . meta l4proto . ct original proto-dst vmap @${AFFINITY_RECORDS}`,
    );
  }
}
