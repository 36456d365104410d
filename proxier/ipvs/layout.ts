/**
 * Upstream's ipvs-mode kernel objects by name: its ipsets (IPv6 ones prefixed `KUBE-6-`, cut to
 * ipset's 31 characters as upstream does), its iptables chains, the jumps from the built-in chains,
 * and the fixed iptables rules that match the sets.
 * @module
 */
import { iptablesLocalMatch, type LocalDetector } from "../_common/local_detector.ts";
import type { Chain, Table } from "../../iptables/iptables.ts";
import type { IpsetSpec, IpsetType } from "../../iptables/ipset.ts";
import { type BuiltinJump, jumpRuleLine } from "../_common/iptables_chains.ts";
import type { IPFamily } from "../model/types.ts";

/** The ipsets, by their IPv4 (upstream) name. */
export const SET = {
  LOOP_BACK: "KUBE-LOOP-BACK",
  CLUSTER_IP: "KUBE-CLUSTER-IP",
  EXTERNAL_IP: "KUBE-EXTERNAL-IP",
  EXTERNAL_IP_LOCAL: "KUBE-EXTERNAL-IP-LOCAL",
  LOAD_BALANCER: "KUBE-LOAD-BALANCER",
  LOAD_BALANCER_FW: "KUBE-LOAD-BALANCER-FW",
  LOAD_BALANCER_LOCAL: "KUBE-LOAD-BALANCER-LOCAL",
  LOAD_BALANCER_SOURCE_IP: "KUBE-LOAD-BALANCER-SOURCE-IP",
  LOAD_BALANCER_SOURCE_CIDR: "KUBE-LOAD-BALANCER-SOURCE-CIDR",
  NODE_PORT_TCP: "KUBE-NODE-PORT-TCP",
  NODE_PORT_LOCAL_TCP: "KUBE-NODE-PORT-LOCAL-TCP",
  NODE_PORT_UDP: "KUBE-NODE-PORT-UDP",
  NODE_PORT_LOCAL_UDP: "KUBE-NODE-PORT-LOCAL-UDP",
  NODE_PORT_SCTP: "KUBE-NODE-PORT-SCTP-HASH",
  NODE_PORT_LOCAL_SCTP: "KUBE-NODE-PORT-LOCAL-SCTP-HASH",
  HEALTH_CHECK_NODE_PORT: "KUBE-HEALTH-CHECK-NODE-PORT",
  IPVS_IPS: "KUBE-IPVS-IPS",
} as const;

/** One of the ipsets, by its IPv4 name. */
export type SetName = typeof SET[keyof typeof SET];

const TYPES: Record<SetName, IpsetType> = {
  [SET.LOOP_BACK]: "hash:ip,port,ip",
  [SET.CLUSTER_IP]: "hash:ip,port",
  [SET.EXTERNAL_IP]: "hash:ip,port",
  [SET.EXTERNAL_IP_LOCAL]: "hash:ip,port",
  [SET.LOAD_BALANCER]: "hash:ip,port",
  [SET.LOAD_BALANCER_FW]: "hash:ip,port",
  [SET.LOAD_BALANCER_LOCAL]: "hash:ip,port",
  [SET.LOAD_BALANCER_SOURCE_IP]: "hash:ip,port,ip",
  [SET.LOAD_BALANCER_SOURCE_CIDR]: "hash:ip,port,net",
  [SET.NODE_PORT_TCP]: "bitmap:port",
  [SET.NODE_PORT_LOCAL_TCP]: "bitmap:port",
  [SET.NODE_PORT_UDP]: "bitmap:port",
  [SET.NODE_PORT_LOCAL_UDP]: "bitmap:port",
  [SET.NODE_PORT_SCTP]: "hash:ip,port",
  [SET.NODE_PORT_LOCAL_SCTP]: "hash:ip,port",
  [SET.HEALTH_CHECK_NODE_PORT]: "bitmap:port",
  [SET.IPVS_IPS]: "hash:ip",
};

/** Every set, in upstream's order. */
export const SET_NAMES: readonly SetName[] = Object.values(SET);

/** The kernel name of set `name` in `family` (upstream: `KUBE-` becomes `KUBE-6-`, cut to 31). */
export function setName(name: SetName | typeof FORMER_SETS[number], family: IPFamily): string {
  return family === "IPv4" ? name : name.replace(/^KUBE-/, "KUBE-6-").slice(0, 31);
}

/**
 * Sets this program made when its guards were sets: a full sync and the cleanup destroy them where
 * found, so none outlives an upgrade and then a rollback to upstream (whose cleanup knows them not).
 */
export const FORMER_SETS = ["KUBE-IPVS-NO-ENDPOINTS", "KUBE-IPVS-NO-LOCAL-ENDPOINTS"] as const;

/** The spec of set `name` in `family`. */
export function setSpec(name: SetName, family: IPFamily): IpsetSpec {
  const type = TYPES[name];
  return { name: setName(name, family), type, family: type === "bitmap:port" ? undefined : family };
}

/** The chains, as upstream names them. */
export const KUBE_SERVICES: Chain = "KUBE-SERVICES";
export const KUBE_POSTROUTING: Chain = "KUBE-POSTROUTING";
export const KUBE_MARK_MASQ: Chain = "KUBE-MARK-MASQ";
export const KUBE_NODE_PORT: Chain = "KUBE-NODE-PORT";
export const KUBE_LOAD_BALANCER: Chain = "KUBE-LOAD-BALANCER";
export const KUBE_FORWARD: Chain = "KUBE-FORWARD";
export const KUBE_PROXY_FIREWALL: Chain = "KUBE-PROXY-FIREWALL";
export const KUBE_SOURCE_RANGES_FIREWALL: Chain = "KUBE-SOURCE-RANGES-FIREWALL";
export const KUBE_IPVS_FILTER: Chain = "KUBE-IPVS-FILTER";
export const KUBE_IPVS_OUT_FILTER: Chain = "KUBE-IPVS-OUT-FILTER";

/** Our chains per table. */
export const CHAINS: Readonly<Record<"nat" | "filter", readonly Chain[]>> = {
  nat: [KUBE_SERVICES, KUBE_POSTROUTING, KUBE_NODE_PORT, KUBE_LOAD_BALANCER, KUBE_MARK_MASQ],
  filter: [
    KUBE_FORWARD,
    KUBE_NODE_PORT,
    KUBE_PROXY_FIREWALL,
    KUBE_SOURCE_RANGES_FIREWALL,
    KUBE_IPVS_FILTER,
    KUBE_IPVS_OUT_FILTER,
  ],
};

/** Upstream's jumps, each inserted at the top of its built-in chain. */
export const JUMPS: readonly BuiltinJump[] = [
  { table: "nat", from: "OUTPUT", to: KUBE_SERVICES, comment: "kubernetes service portals" },
  { table: "nat", from: "PREROUTING", to: KUBE_SERVICES, comment: "kubernetes service portals" },
  { table: "nat", from: "POSTROUTING", to: KUBE_POSTROUTING, comment: "kubernetes postrouting rules" },
  { table: "filter", from: "FORWARD", to: KUBE_FORWARD, comment: "kubernetes forwarding rules" },
  { table: "filter", from: "INPUT", to: KUBE_NODE_PORT, comment: "kubernetes health check rules" },
  { table: "filter", from: "INPUT", to: KUBE_PROXY_FIREWALL, comment: "kube-proxy firewall rules" },
  { table: "filter", from: "FORWARD", to: KUBE_PROXY_FIREWALL, comment: "kube-proxy firewall rules" },
  { table: "filter", from: "INPUT", to: KUBE_IPVS_FILTER, comment: "kubernetes ipvs access filter" },
  { table: "filter", from: "OUTPUT", to: KUBE_IPVS_OUT_FILTER, comment: "kubernetes ipvs access filter" },
];

/**
 * One entry guarded by a filter rule of its own in upstream's chains (so upstream's first restore
 * or cleanup takes it, and nothing of ours outlives a rollback): `node`, an LB address the node must
 * not reach (its source ranges exclude the node); `no-endpoints`, a service address without any
 * usable endpoint (REJECTed at once, as the iptables mode; upstream's ipvs mode lets it time out);
 * `no-local-endpoints`, an externalTrafficPolicy Local entry without a local endpoint (traffic from
 * elsewhere dropped, as the iptables and nftables modes; upstream's ipvs mode lets it through
 * unmasqueraded, and the replies are lost).
 */
export interface Guard {
  readonly guard: "node" | "no-endpoints" | "no-local-endpoints";
  readonly ip: string;
  readonly protocol: string;
  readonly port: number;
}

/** A guard's identity, for counting the ports that ask for it. */
export function guardKey(g: Guard): string {
  return `${g.guard} ${g.ip},${g.protocol}:${g.port}`;
}

/** What the fixed rules depend on. */
export interface IptablesInputs {
  readonly family: IPFamily;
  /** The sets holding at least one entry (upstream writes a set's rule only then). */
  readonly nonEmpty: ReadonlySet<SetName>;
  readonly masqueradeAll: boolean;
  /** How pod traffic of this family is told (`--detect-local-mode`); undefined: it cannot be. */
  readonly local?: LocalDetector;
  /** `0x4000` for bit 14. */
  readonly mark: string;
  /** Entries guarded by a rule of their own, in any order. */
  readonly guards: readonly Guard[];
  /** Jumps missing from the built-in chains (full syncs insert them in the same restore). */
  readonly missingJumps: readonly BuiltinJump[];
}

/** The `iptables-restore --noflush` input of one sync: our chains rewritten whole, as upstream does. */
export function iptablesInput(o: IptablesInputs): string {
  const s = (n: SetName) => setName(n, o.family);
  const has = (n: SetName) => o.nonEmpty.has(n);
  const comment = (text: string) => `-m comment --comment "${text}"`;
  const nat: string[] = [];
  const filter: string[] = [];
  const loopback = o.family === "IPv4" ? "127.0.0.0/8" : "::1/128";
  nat.push(`-A ${KUBE_SERVICES} -s ${loopback} -j RETURN`);
  // Upstream's set-to-chain table: a rule per non-empty set.
  const setRules: Array<[SetName, "nat" | "filter", Chain, string, string, string?]> = [
    [SET.LOOP_BACK, "nat", KUBE_POSTROUTING, "MASQUERADE", "dst,dst,src"],
    [SET.LOAD_BALANCER, "nat", KUBE_SERVICES, KUBE_LOAD_BALANCER, "dst,dst"],
    [SET.LOAD_BALANCER_LOCAL, "nat", KUBE_LOAD_BALANCER, "RETURN", "dst,dst"],
    [SET.NODE_PORT_LOCAL_TCP, "nat", KUBE_NODE_PORT, "RETURN", "dst", "tcp"],
    [SET.NODE_PORT_TCP, "nat", KUBE_NODE_PORT, KUBE_MARK_MASQ, "dst", "tcp"],
    [SET.NODE_PORT_LOCAL_UDP, "nat", KUBE_NODE_PORT, "RETURN", "dst", "udp"],
    [SET.NODE_PORT_UDP, "nat", KUBE_NODE_PORT, KUBE_MARK_MASQ, "dst", "udp"],
    [SET.NODE_PORT_LOCAL_SCTP, "nat", KUBE_NODE_PORT, "RETURN", "dst,dst", "sctp"],
    [SET.NODE_PORT_SCTP, "nat", KUBE_NODE_PORT, KUBE_MARK_MASQ, "dst,dst", "sctp"],
    [SET.LOAD_BALANCER_FW, "filter", KUBE_PROXY_FIREWALL, KUBE_SOURCE_RANGES_FIREWALL, "dst,dst"],
    [SET.LOAD_BALANCER_SOURCE_CIDR, "filter", KUBE_SOURCE_RANGES_FIREWALL, "RETURN", "dst,dst,src"],
    [SET.LOAD_BALANCER_SOURCE_IP, "filter", KUBE_SOURCE_RANGES_FIREWALL, "RETURN", "dst,dst,src"],
  ];
  for (const [set, table, from, to, match, proto] of setRules) {
    if (!has(set)) continue;
    const p = proto === undefined ? "" : ` -p ${proto}`;
    (table === "nat" ? nat : filter).push(
      `-A ${from}${p} ${comment(SET_COMMENTS[set])} -m set --match-set ${s(set)} ${match} -j ${to}`,
    );
  }
  if (has(SET.CLUSTER_IP)) {
    const base = `-A ${KUBE_SERVICES} ${comment(SET_COMMENTS[SET.CLUSTER_IP])} -m set --match-set ${
      s(SET.CLUSTER_IP)
    }`;
    if (o.masqueradeAll) nat.push(`${base} dst,dst -j ${KUBE_MARK_MASQ}`);
    else if (o.local !== undefined) {
      nat.push(`${base} dst,dst ${iptablesLocalMatch(o.local, false)} -j ${KUBE_MARK_MASQ}`);
    } // Without local detection: node-originated connections get a VIP as source; masquerade those.
    else nat.push(`${base} src,dst -j ${KUBE_MARK_MASQ}`);
  }
  const external = (set: SetName, masq: boolean) => {
    const base = `-A ${KUBE_SERVICES} ${comment(SET_COMMENTS[set])} -m set --match-set ${s(set)} dst,dst`;
    if (masq) nat.push(`${base} -j ${KUBE_MARK_MASQ}`);
    // Traffic from off the node (not from a bridge, not from a local process), and external IPs the
    // node itself holds, are accepted into IPVS.
    nat.push(`${base} -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT`);
    nat.push(`${base} -m addrtype --dst-type LOCAL -j ACCEPT`);
  };
  if (has(SET.EXTERNAL_IP)) external(SET.EXTERNAL_IP, true);
  if (has(SET.EXTERNAL_IP_LOCAL)) {
    // The node's own connections take the VIP as their source: masqueraded, or replies from
    // endpoints elsewhere would not come back (the iptables mode's short-circuit does the same).
    nat.push(
      `-A ${KUBE_SERVICES} ${comment(SET_COMMENTS[SET.EXTERNAL_IP_LOCAL])} -m set --match-set ${
        s(SET.EXTERNAL_IP_LOCAL)
      } dst,dst -m addrtype --src-type LOCAL -j ${KUBE_MARK_MASQ}`,
    );
    external(SET.EXTERNAL_IP_LOCAL, false);
  }
  nat.push(`-A ${KUBE_SERVICES} -m addrtype --dst-type LOCAL -j ${KUBE_NODE_PORT}`);
  nat.push(`-A ${KUBE_LOAD_BALANCER} -j ${KUBE_MARK_MASQ}`);
  filter.push(`-A ${KUBE_SOURCE_RANGES_FIREWALL} -j DROP`);
  const guards = [...o.guards].sort((a, b) => guardKey(a) < guardKey(b) ? -1 : 1);
  const to = (g: Guard) =>
    `-d ${g.ip}/${o.family === "IPv4" ? 32 : 128} -p ${g.protocol} -m ${g.protocol} --dport ${g.port}`;
  for (const g of guards.filter((g) => g.guard === "node")) {
    filter.push(
      `-A ${KUBE_IPVS_OUT_FILTER} -s ${g.ip} -m ipvs --vaddr ${g.ip} --vproto ${g.protocol} --vport ${g.port} -j DROP`,
    );
  }
  // Accept what IPVS serves, in case later rules would drop it (upstream keeps these last).
  if (has(SET.CLUSTER_IP)) {
    nat.push(`-A ${KUBE_SERVICES} -m set --match-set ${s(SET.CLUSTER_IP)} dst,dst -j ACCEPT`);
  }
  if (has(SET.LOAD_BALANCER)) {
    nat.push(`-A ${KUBE_SERVICES} -m set --match-set ${s(SET.LOAD_BALANCER)} dst,dst -j ACCEPT`);
  }
  filter.push(
    `-A ${KUBE_FORWARD} ${
      comment("kubernetes forwarding rules")
    } -m mark --mark ${o.mark}/${o.mark} -j ACCEPT`,
    `-A ${KUBE_FORWARD} ${
      comment("kubernetes forwarding conntrack rule")
    } -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
    `-A ${KUBE_NODE_PORT} ${comment(SET_COMMENTS[SET.HEALTH_CHECK_NODE_PORT])} -m set --match-set ${
      s(SET.HEALTH_CHECK_NODE_PORT)
    } dst -j ACCEPT`,
  );
  // Ours, first in the filter: a service address without endpoints refuses at once.
  for (const g of guards.filter((g) => g.guard === "no-endpoints")) {
    filter.push(
      `-A ${KUBE_IPVS_FILTER} ${to(g)} ${
        comment("kube-proxy-deno: no endpoints")
      } -m conntrack --ctstate NEW -j REJECT`,
    );
  }
  // External traffic (not from this node, not from its pods) to a Local-policy entry without a local
  // endpoint has nowhere to go here: dropped, as the iptables and nftables modes do.
  const fromOutside = o.local !== undefined
    ? iptablesLocalMatch(o.local, false)
    : "-m physdev ! --physdev-is-in";
  for (const g of guards.filter((g) => g.guard === "no-local-endpoints")) {
    filter.push(
      `-A ${KUBE_IPVS_FILTER} ${to(g)} ${
        comment("kube-proxy-deno: no local endpoints")
      } -m conntrack --ctstate NEW ` +
        `${fromOutside} -m addrtype ! --src-type LOCAL -j DROP`,
    );
  }
  for (const set of [SET.LOAD_BALANCER, SET.CLUSTER_IP, SET.EXTERNAL_IP, SET.EXTERNAL_IP_LOCAL]) {
    filter.push(`-A ${KUBE_IPVS_FILTER} -m set --match-set ${s(set)} dst,dst -j RETURN`);
  }
  filter.push(
    `-A ${KUBE_IPVS_FILTER} -m set --match-set ${s(SET.HEALTH_CHECK_NODE_PORT)} dst -j RETURN`,
    `-A ${KUBE_IPVS_FILTER} -m conntrack --ctstate NEW -m set --match-set ${s(SET.IPVS_IPS)} dst -j REJECT`,
  );
  nat.push(
    `-A ${KUBE_POSTROUTING} -m mark ! --mark ${o.mark}/${o.mark} -j RETURN`,
    `-A ${KUBE_POSTROUTING} -j MARK --xor-mark ${o.mark}`,
    `-A ${KUBE_POSTROUTING} ${
      comment("kubernetes service traffic requiring SNAT")
    } -j MASQUERADE --random-fully`,
    `-A ${KUBE_MARK_MASQ} -j MARK --or-mark ${o.mark}`,
  );
  const insert = (table: Table) => o.missingJumps.filter((j) => j.table === table).map(jumpRuleLine);
  return [
    "*filter",
    ...[...CHAINS.filter].sort().map((c) => `:${c} - [0:0]`),
    ...filter,
    ...insert("filter"),
    "COMMIT",
    "*nat",
    ...[...CHAINS.nat].sort().map((c) => `:${c} - [0:0]`),
    ...nat,
    ...insert("nat"),
    "COMMIT",
    "",
  ].join("\n");
}

/** Upstream's set comments, used as rule comments. */
const SET_COMMENTS: Record<SetName, string> = {
  [SET.LOOP_BACK]: "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose",
  [SET.CLUSTER_IP]: "Kubernetes service cluster ip + port for masquerade purpose",
  [SET.EXTERNAL_IP]: "Kubernetes service external ip + port for masquerade and filter purpose",
  [SET.EXTERNAL_IP_LOCAL]: "Kubernetes service external ip + port with externalTrafficPolicy=local",
  [SET.LOAD_BALANCER]: "Kubernetes service lb portal",
  [SET.LOAD_BALANCER_FW]: "Kubernetes service load balancer ip + port for load balancer with sourceRange",
  [SET.LOAD_BALANCER_LOCAL]: "Kubernetes service load balancer ip + port with externalTrafficPolicy=local",
  [SET.LOAD_BALANCER_SOURCE_IP]:
    "Kubernetes service load balancer ip + port + source IP for packet filter purpose",
  [SET.LOAD_BALANCER_SOURCE_CIDR]:
    "Kubernetes service load balancer ip + port + source cidr for packet filter purpose",
  [SET.NODE_PORT_TCP]: "Kubernetes nodeport TCP port for masquerade purpose",
  [SET.NODE_PORT_LOCAL_TCP]: "Kubernetes nodeport TCP port with externalTrafficPolicy=local",
  [SET.NODE_PORT_UDP]: "Kubernetes nodeport UDP port for masquerade purpose",
  [SET.NODE_PORT_LOCAL_UDP]: "Kubernetes nodeport UDP port with externalTrafficPolicy=local",
  [SET.NODE_PORT_SCTP]: "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'",
  [SET.NODE_PORT_LOCAL_SCTP]:
    "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'",
  [SET.HEALTH_CHECK_NODE_PORT]: "Kubernetes health check node port",
  [SET.IPVS_IPS]: "Kubernetes service cluster ip + port for masquerade purpose",
};
