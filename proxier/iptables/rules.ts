/**
 * The iptables mode's rule text: upstream kube-proxy's fixed chains and jumps, and the chains and
 * rules one service port contributes (a pure function of the service, its endpoints and a few
 * options, so the proxier can cache it between partial syncs).
 * @module
 */
import { iptablesLocalMatch, type LocalDetector } from "../_common/local_detector.ts";
import type { Chain } from "../../iptables/iptables.ts";
import type { BuiltinJump } from "../_common/iptables_chains.ts";
import { cidrContains, hostPrefix } from "../model/net.ts";
import type { EndpointInfo, ServicePortInfo } from "../model/types.ts";
import { servicePortNameString } from "../model/types.ts";
import type { Logger } from "../runtime/logger.ts";
import { categorizeEndpoints, externallyAccessible, type NodeTopology } from "../model/topology.ts";
import { endpointChainName, servicePortChainName } from "./chain_name.ts";
import { LOCALHOST_NODEPORTS_ACCEPTED } from "./metrics.ts";

/** nat and filter: the entry chain for service traffic. */
export const KUBE_SERVICES: Chain = "KUBE-SERVICES";
/** filter: external-destination rejects and drops. */
export const KUBE_EXTERNAL_SERVICES: Chain = "KUBE-EXTERNAL-SERVICES";
/** nat: node port dispatch; filter: health check node port accepts. */
export const KUBE_NODEPORTS: Chain = "KUBE-NODEPORTS";
/** nat: masquerades marked traffic. */
export const KUBE_POSTROUTING: Chain = "KUBE-POSTROUTING";
/** nat: marks traffic for masquerade. */
export const KUBE_MARK_MASQ: Chain = "KUBE-MARK-MASQ";
/** filter: forwarding of marked and established traffic. */
export const KUBE_FORWARD: Chain = "KUBE-FORWARD";
/** filter: drops load-balancer traffic not admitted by loadBalancerSourceRanges. */
export const KUBE_PROXY_FIREWALL: Chain = "KUBE-PROXY-FIREWALL";
/** filter: drops martian traffic to 127.0.0.0/8 (with localhost node ports). */
export const KUBE_FIREWALL: Chain = "KUBE-FIREWALL";
/** Exists in mangle, nat and filter; its disappearance means someone flushed the tables. */
export const KUBE_PROXY_CANARY: Chain = "KUBE-PROXY-CANARY";
/**
 * A nat chain of ours that once held the sync marker: a full sync deletes it where it finds it, as
 * `--cleanup` does. The marker now lives in upstream's {@linkcode KUBE_POSTROUTING}.
 */
export const KUBE_PROXY_DENO_SYNC: Chain = "KUBE-PROXY-DENO-SYNC";

const NEW = ["-m", "conntrack", "--ctstate", "NEW"];

/** Upstream's jump rules, all prepended to the built-in chains. */
export const JUMP_CHAINS: readonly BuiltinJump[] = [
  {
    table: "filter",
    to: KUBE_EXTERNAL_SERVICES,
    from: "INPUT",
    comment: "kubernetes externally-visible service portals",
    extra: NEW,
  },
  {
    table: "filter",
    to: KUBE_EXTERNAL_SERVICES,
    from: "FORWARD",
    comment: "kubernetes externally-visible service portals",
    extra: NEW,
  },
  {
    table: "filter",
    to: KUBE_NODEPORTS,
    from: "INPUT",
    comment: "kubernetes health check service ports",
    extra: [],
  },
  { table: "filter", to: KUBE_SERVICES, from: "FORWARD", comment: "kubernetes service portals", extra: NEW },
  { table: "filter", to: KUBE_SERVICES, from: "OUTPUT", comment: "kubernetes service portals", extra: NEW },
  { table: "filter", to: KUBE_FORWARD, from: "FORWARD", comment: "kubernetes forwarding rules", extra: [] },
  {
    table: "filter",
    to: KUBE_PROXY_FIREWALL,
    from: "INPUT",
    comment: "kubernetes load balancer firewall",
    extra: NEW,
  },
  {
    table: "filter",
    to: KUBE_PROXY_FIREWALL,
    from: "OUTPUT",
    comment: "kubernetes load balancer firewall",
    extra: NEW,
  },
  {
    table: "filter",
    to: KUBE_PROXY_FIREWALL,
    from: "FORWARD",
    comment: "kubernetes load balancer firewall",
    extra: NEW,
  },
  { table: "filter", to: KUBE_FIREWALL, from: "INPUT", comment: "", extra: [] },
  { table: "filter", to: KUBE_FIREWALL, from: "OUTPUT", comment: "", extra: [] },
  { table: "nat", to: KUBE_SERVICES, from: "OUTPUT", comment: "kubernetes service portals", extra: [] },
  { table: "nat", to: KUBE_SERVICES, from: "PREROUTING", comment: "kubernetes service portals", extra: [] },
  {
    table: "nat",
    to: KUBE_POSTROUTING,
    from: "POSTROUTING",
    comment: "kubernetes postrouting rules",
    extra: [],
  },
];

/** Per-service nat chain prefixes we own (upstream's too), for finding stale chains. */
export const SERVICE_CHAIN = /^KUBE-(SVC|SVL|EXT|FW|SEP|XLB)-[A-Z2-7]{16}$/;

/**
 * The text one service port contributes to each chain (whole lines, each ending in a newline),
 * cached between partial syncs.
 */
export interface PortRules {
  readonly natServices: string;
  readonly natNodePorts: string;
  readonly filterServices: string;
  readonly filterExternal: string;
  readonly filterNodePorts: string;
  readonly filterFirewall: string;
  /** Its own nat chains (declared in every restore that writes them). */
  readonly chains: Chain[];
  /**
   * Writes the rules of its own chains: called while the restore input streams out, so the
   * largest part of the text never sits in memory for all services at once.
   */
  readonly chainRules: () => string;
}

/** The chain rules of a cached entry: a service that is not rewritten writes none. */
export const NO_CHAIN_RULES = (): string => "";

/** Lines in construction; {@linkcode done} turns them into cached text. */
interface PortLines {
  natServices: string[];
  natNodePorts: string[];
  filterServices: string[];
  filterExternal: string[];
  filterNodePorts: string[];
  filterFirewall: string[];
  chains: Chain[];
}

/** Returns the lines joined, each ending in a newline ("" for none). */
export function joinLines(lines: readonly string[]): string {
  return lines.length === 0 ? "" : lines.join("\n") + "\n";
}

function done(r: PortLines, chainRules: () => string): PortRules {
  return {
    natServices: joinLines(r.natServices),
    natNodePorts: joinLines(r.natNodePorts),
    filterServices: joinLines(r.filterServices),
    filterExternal: joinLines(r.filterExternal),
    filterNodePorts: joinLines(r.filterNodePorts),
    filterFirewall: joinLines(r.filterFirewall),
    chains: r.chains,
    chainRules,
  };
}

/** What per-port rules depend on beyond the service and its endpoints. */
export interface PortRuleOptions {
  readonly masqueradeAll: boolean;
  /** The CIDR that tells pod traffic from the rest; undefined when detection is off. */
  readonly local: LocalDetector | undefined;
  /** This node's IPs: source ranges that contain one also admit traffic from the node. */
  readonly nodeIPs: readonly string[];
  /** This node's name and zone, for topology hints. */
  readonly topology: NodeTopology;
  /** Where endpoint selection says why it ignores hints (debug). */
  readonly log?: Logger;
  /** More than {@linkcode LARGE_CLUSTER_ENDPOINTS} endpoints: per-endpoint comments are left out. */
  readonly largeCluster: boolean;
  /**
   * NodePorts answer on 127.0.0.0/8 and the nfacct counter `localhost_nps_accepted_pkts` exists:
   * each NodePort's connections there are counted first, as upstream.
   */
  readonly localhostNodePortsCounter?: boolean;
}

/** Upstream's threshold for "large cluster mode". */
export const LARGE_CLUSTER_ENDPOINTS = 1000;

/** Generates everything one service port contributes, as upstream's syncProxyRules loop body. */
export function servicePortRules(
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[],
  o: PortRuleOptions,
): PortRules {
  const localTraffic = o.local;
  const name = servicePortNameString(svc.name);
  const proto = svc.protocol.toLowerCase();
  const svcChain = servicePortChainName("KUBE-SVC-", name, proto);
  const svlChain = servicePortChainName("KUBE-SVL-", name, proto);
  const extChain = servicePortChainName("KUBE-EXT-", name, proto);
  const fwChain = servicePortChainName("KUBE-FW-", name, proto);
  const { cluster, local, all, hasAny, hasInternal, hasExternal } = categorizeEndpoints(
    svc,
    eps,
    o.topology,
    o.log,
  );
  const usesCluster = cluster.length > 0;
  const usesLocal = local.length > 0;
  const internalChain = svc.internalPolicyLocal ? svlChain : svcChain;
  const externalPolicyChain = svc.externalPolicyLocal ? svlChain : svcChain;
  const usesExt = hasAny && externallyAccessible(svc);
  const usesFW = hasAny && svc.loadBalancerIPs.length > 0 && svc.hasSourceRanges;
  const lbChain = usesFW ? fwChain : extChain;
  const r: PortLines = {
    natServices: [],
    natNodePorts: [],
    filterServices: [],
    filterExternal: [],
    filterNodePorts: [],
    filterFirewall: [],
    chains: [],
  };
  const noEndpoints = `"${name} has no endpoints"`;
  const noLocal = `"${name} has no local endpoints"`;
  const internalFilter = !hasAny ? ["REJECT", noEndpoints] : !hasInternal ? ["DROP", noLocal] : undefined;
  const externalFilter = !hasAny ? ["REJECT", noEndpoints] : !hasExternal ? ["DROP", noLocal] : undefined;
  const dest = (ip: string, port: number, comment: string, target: string) =>
    `-d ${ip}${
      hostPrefix(ip)
    } -p ${proto} -m comment --comment ${comment} -m ${proto} --dport ${port} -j ${target}`;

  // Cluster IP.
  if (hasInternal) {
    r.natServices.push(
      `-A ${KUBE_SERVICES} ${dest(svc.clusterIP, svc.port, `"${name} cluster IP"`, internalChain)}`,
    );
  } else {
    r.filterServices.push(
      `-A ${KUBE_SERVICES} ${dest(svc.clusterIP, svc.port, internalFilter![1], internalFilter![0])}`,
    );
  }
  // External IPs.
  for (const ip of svc.externalIPs) {
    if (hasAny) {
      r.natServices.push(`-A ${KUBE_SERVICES} ${dest(ip, svc.port, `"${name} external IP"`, extChain)}`);
    }
    if (externalFilter) {
      r.filterExternal.push(
        `-A ${KUBE_EXTERNAL_SERVICES} ${dest(ip, svc.port, externalFilter[1], externalFilter[0])}`,
      );
    }
  }
  // Load-balancer IPs.
  for (const ip of svc.loadBalancerIPs) {
    if (hasAny) {
      r.natServices.push(`-A ${KUBE_SERVICES} ${dest(ip, svc.port, `"${name} loadbalancer IP"`, lbChain)}`);
    }
    if (usesFW) {
      r.filterFirewall.push(
        `-A ${KUBE_PROXY_FIREWALL} ${
          dest(ip, svc.port, `"${name} traffic not accepted by ${fwChain}"`, "DROP")
        }`,
      );
    }
    if (externalFilter) {
      r.filterExternal.push(
        `-A ${KUBE_EXTERNAL_SERVICES} ${dest(ip, svc.port, externalFilter[1], externalFilter[0])}`,
      );
    }
  }
  // Node ports.
  if (svc.nodePort !== 0) {
    if (hasAny && o.localhostNodePortsCounter === true) {
      r.natNodePorts.push(
        `-A ${KUBE_NODEPORTS} -d 127.0.0.0/8 -p ${proto} -m comment --comment "${name}" -m ${proto} --dport ${svc.nodePort} -m nfacct --nfacct-name ${LOCALHOST_NODEPORTS_ACCEPTED} -j ${extChain}`,
      );
    }
    if (hasAny) {
      r.natNodePorts.push(
        `-A ${KUBE_NODEPORTS} -p ${proto} -m comment --comment "${name}" -m ${proto} --dport ${svc.nodePort} -j ${extChain}`,
      );
    }
    if (externalFilter) {
      r.filterExternal.push(
        `-A ${KUBE_EXTERNAL_SERVICES} -p ${proto} -m comment --comment ${
          externalFilter[1]
        } -m addrtype --dst-type LOCAL -m ${proto} --dport ${svc.nodePort} -j ${externalFilter[0]}`,
      );
    }
  }
  if (svc.healthCheckNodePort !== 0) {
    r.filterNodePorts.push(
      `-A ${KUBE_NODEPORTS} -p tcp -m comment --comment "${name} health check node port" -m tcp --dport ${svc.healthCheckNodePort} -j ACCEPT`,
    );
  }

  // The chains this port owns, in declaration order; their rules are written later, on demand.
  const declare = (c: Chain) => r.chains.push(c);
  if (usesExt) declare(extChain);
  if (usesFW) declare(fwChain);
  if (usesCluster) declare(svcChain);
  if (usesLocal) declare(svlChain);
  const seps = all.map((e) => endpointChainName(name, proto, e.key));
  for (const sep of seps) declare(sep);
  return done(r, () => {
    const rules: string[] = [];
    const sepOf = new Map(all.map((e, i) => [e.key, seps[i]]));
    // Internal traffic: masquerade what does not come from pods (or everything); this rule leads
    // the internal chain, before the endpoint jumps.
    let internalMasq: string | undefined;
    if (hasInternal) {
      const match = `-p ${proto} -m comment --comment "${name} cluster IP" -m ${proto} --dport ${svc.port}`;
      const d = `-d ${svc.clusterIP}${hostPrefix(svc.clusterIP)}`;
      if (o.masqueradeAll) internalMasq = `-A ${internalChain} ${d} ${match} -j ${KUBE_MARK_MASQ}`;
      else if (localTraffic !== undefined) {
        internalMasq = `-A ${internalChain} ${
          iptablesLocalMatch(localTraffic, false)
        } ${d} ${match} -j ${KUBE_MARK_MASQ}`;
      }
    }
    // External traffic.
    if (usesExt) {
      if (!svc.externalPolicyLocal) {
        rules.push(
          `-A ${extChain} -m comment --comment "masquerade traffic for ${name} external destinations" -j ${KUBE_MARK_MASQ}`,
        );
      } else {
        if (localTraffic !== undefined) {
          rules.push(
            `-A ${extChain} ${
              iptablesLocalMatch(localTraffic, true)
            } -m comment --comment "pod traffic for ${name} external destinations" -j ${svcChain}`,
          );
        }
        rules.push(
          `-A ${extChain} -m comment --comment "masquerade LOCAL traffic for ${name} external destinations" -m addrtype --src-type LOCAL -j ${KUBE_MARK_MASQ}`,
          `-A ${extChain} -m comment --comment "route LOCAL traffic for ${name} external destinations" -m addrtype --src-type LOCAL -j ${svcChain}`,
        );
      }
      if (hasExternal) rules.push(`-A ${extChain} -j ${externalPolicyChain}`);
    }
    // Firewall for loadBalancerSourceRanges.
    if (usesFW) {
      const c = `-m comment --comment "${name} loadbalancer IP"`;
      let allowFromNode = false;
      for (const cidr of svc.loadBalancerSourceRanges) {
        rules.push(`-A ${fwChain} -s ${cidr} ${c} -j ${extChain}`);
        if (o.nodeIPs.some((ip) => cidrContains(cidr, ip))) allowFromNode = true;
      }
      // A VIP routed locally loops back with itself as the source: admit that when the node is admitted.
      if (allowFromNode) {
        for (const ip of svc.loadBalancerIPs) {
          rules.push(`-A ${fwChain} -s ${ip}${hostPrefix(ip)} ${c} -j ${extChain}`);
        }
      }
      rules.push(
        `-A ${fwChain} -m comment --comment "other traffic to ${name} will be dropped by KUBE-PROXY-FIREWALL"`,
      );
    }
    for (
      const [chain, eps, used] of [[svcChain, cluster, usesCluster], [svlChain, local, usesLocal]] as const
    ) {
      if (!used) continue;
      if (chain === internalChain && internalMasq !== undefined) rules.push(internalMasq);
      serviceToEndpoints(rules, name, svc, chain, eps, sepOf, o.largeCluster);
    }
    // Large clusters drop the per-endpoint comments, as upstream: they are most of the text.
    const c = o.largeCluster ? "" : ` -m comment --comment "${name}"`;
    all.forEach((e, i) => {
      const sep = seps[i];
      rules.push(`-A ${sep} -s ${e.ip}${hostPrefix(e.ip)}${c} -j ${KUBE_MARK_MASQ}`);
      const recent = svc.stickyMaxAgeSeconds > 0 ? ` -m recent --set --name ${sep}` : "";
      rules.push(`-A ${sep} -p ${proto}${c}${recent} -m ${proto} -j DNAT --to-destination ${e.key}`);
    });
    return joinLines(rules);
  });
}

function serviceToEndpoints(
  rules: string[],
  name: string,
  svc: ServicePortInfo,
  chain: Chain,
  eps: readonly EndpointInfo[],
  sepOf: ReadonlyMap<string, Chain>,
  largeCluster: boolean,
): void {
  const seps = eps.map((e) => sepOf.get(e.key)!);
  const comment = (e: EndpointInfo) => largeCluster ? "" : ` -m comment --comment "${name} -> ${e.key}"`;
  if (svc.stickyMaxAgeSeconds > 0) {
    eps.forEach((e, i) =>
      rules.push(
        `-A ${chain}${comment(e)} -m recent --rcheck --seconds ${svc.stickyMaxAgeSeconds} --reap --name ${
          seps[i]
        } -j ${seps[i]}`,
      )
    );
  }
  const n = eps.length;
  eps.forEach((e, i) => {
    const stat = i < n - 1 ? ` -m statistic --mode random --probability ${probability(n - i)}` : "";
    rules.push(`-A ${chain}${comment(e)}${stat} -j ${seps[i]}`);
  });
}

const probabilities: string[] = [];

/** Upstream's probability text for the i-th of n endpoint rules: 1/n with 10 decimals. */
export function probability(n: number): string {
  return probabilities[n] ??= (1 / n).toFixed(10);
}
