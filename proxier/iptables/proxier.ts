/**
 * The iptables mode: kube-proxy's chain layout, written through one `iptables-restore --noflush`
 * per sync. Full syncs rewrite every chain; partial syncs rewrite the fixed chains and only the
 * per-service chains of Services that changed, and delete chains that are gone.
 * @module
 */
import type { V1Node } from "@kubernetes/client-node";
import type { Conntrack } from "../../iptables/conntrack.ts";
import { endpointChainName, servicePortChainName } from "./chain_name.ts";
import type { Chain, IPTables, Table } from "../../iptables/iptables.ts";
import { RestoreError } from "../../iptables/iptables.ts";
import { cidrContains, cidrFamily, hostPrefix, ipFamily } from "../net.ts";
import { BaseProxier, type BaseProxierOptions, type SyncContext } from "../base_proxier.ts";
import type { ServiceHealthServer } from "../healthcheck/service_health.ts";
import type { EndpointInfo, ServicePortInfo } from "../types.ts";
import { servicePortNameString } from "../types.ts";

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

/** A jump from a built-in chain into ours, as upstream's iptablesJumpChains. */
interface JumpChain {
  readonly table: Table;
  readonly to: Chain;
  readonly from: Chain;
  readonly comment: string;
  readonly extra: readonly string[];
}

const NEW = ["-m", "conntrack", "--ctstate", "NEW"];

/** Upstream's jump rules, all prepended to the built-in chains. */
export const JUMP_CHAINS: readonly JumpChain[] = [
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

/** Returns the arguments of a jump rule (for ensureRule/deleteRule). */
export function jumpRuleArgs(j: JumpChain): string[] {
  return [...j.extra, ...(j.comment === "" ? [] : ["-m", "comment", "--comment", j.comment]), "-j", j.to];
}

/** Per-service nat chain prefixes we own (upstream's too), for finding stale chains. */
const SERVICE_CHAIN = /^KUBE-(SVC|SVL|EXT|FW|SEP)-[A-Z2-7]{16}$/;

/** Options of {@linkcode IptablesProxier}. */
export interface IptablesProxierOptions extends BaseProxierOptions {
  readonly iptables: IPTables;
  /** Stale UDP entries are deleted through it; undefined skips (render). */
  readonly conntrack?: Conntrack;
  readonly masqueradeAll: boolean;
  readonly masqueradeBit: number;
  /** `--cluster-cidr` (any family; this proxier takes its own). */
  readonly clusterCIDRs: readonly string[];
  readonly detectLocalMode: "ClusterCIDR" | "NodeCIDR";
  /** `--nodeport-addresses` CIDRs (any family); empty means every local address. */
  readonly nodePortAddresses: readonly string[];
  readonly localhostNodePorts: boolean;
  /** This node's IPs: source ranges that contain one also admit traffic from the node. */
  readonly nodeIPs: readonly string[];
  /** Health check node ports of ETP=Local services; undefined serves none (render). */
  readonly healthServer?: ServiceHealthServer;
}

/** The endpoint sets one service port uses, as upstream's CategorizeEndpoints. */
export interface Categorized {
  readonly cluster: EndpointInfo[];
  readonly local: EndpointInfo[];
  /** Every endpoint a SEP chain is needed for. */
  readonly all: EndpointInfo[];
  readonly hasAny: boolean;
}

/** Returns true when the port takes traffic from outside the cluster. */
function externallyAccessible(s: ServicePortInfo): boolean {
  return s.nodePort !== 0 || s.externalIPs.length > 0 || s.loadBalancerIPs.length > 0;
}

/** Splits endpoints by traffic policy; ready ones first, serving+terminating when none is ready. */
export function categorizeEndpoints(svc: ServicePortInfo, eps: readonly EndpointInfo[]): Categorized {
  const usesCluster = !svc.internalPolicyLocal || externallyAccessible(svc);
  const usesLocal = svc.internalPolicyLocal || (svc.externalPolicyLocal && externallyAccessible(svc));
  let cluster: EndpointInfo[] = [];
  let hasAny = false;
  if (usesCluster) {
    cluster = eps.filter((e) => e.ready);
    if (cluster.length === 0) cluster = eps.filter((e) => e.serving && e.terminating);
    hasAny = cluster.length > 0;
  }
  if (!usesLocal) return { cluster, local: [], all: cluster, hasAny };
  let local = eps.filter((e) => e.isLocal && e.ready);
  if (local.length === 0) local = eps.filter((e) => e.isLocal && e.serving && e.terminating);
  if (eps.some((e) => e.ready || (e.serving && e.terminating))) hasAny = true;
  if (!usesCluster) return { cluster, local, all: local, hasAny };
  const seen = new Set(cluster.map((e) => e.key));
  return { cluster, local, all: [...cluster, ...local.filter((e) => !seen.has(e.key))], hasAny };
}

/**
 * The text one service port contributes to each chain (whole lines, each ending in a newline),
 * cached between partial syncs.
 */
interface PortRules {
  readonly natServices: string;
  readonly natNodePorts: string;
  readonly filterServices: string;
  readonly filterExternal: string;
  readonly filterNodePorts: string;
  readonly filterFirewall: string;
  /** Its own nat chains, their declarations and their rules. */
  readonly chains: Chain[];
  readonly chainDecls: string;
  readonly chainRules: string;
}

/** Lines in construction; {@linkcode done} turns them into cached text. */
interface PortLines {
  natServices: string[];
  natNodePorts: string[];
  filterServices: string[];
  filterExternal: string[];
  filterNodePorts: string[];
  filterFirewall: string[];
  chains: Chain[];
  chainRules: string[];
}

function text(lines: readonly string[]): string {
  return lines.length === 0 ? "" : lines.join("\n") + "\n";
}

function done(r: PortLines): PortRules {
  return {
    natServices: text(r.natServices),
    natNodePorts: text(r.natNodePorts),
    filterServices: text(r.filterServices),
    filterExternal: text(r.filterExternal),
    filterNodePorts: text(r.filterNodePorts),
    filterFirewall: text(r.filterFirewall),
    chains: r.chains,
    chainDecls: r.chains.map((c) => `:${c} - [0:0]\n`).join(""),
    chainRules: text(r.chainRules),
  };
}

/** The iptables proxier; see the module doc. */
export class IptablesProxier extends BaseProxier {
  readonly #ipt: IPTables;
  readonly #conntrack?: Conntrack;
  readonly #o: IptablesProxierOptions;
  readonly #mark: string;
  readonly #loopback: string;
  /** Cached rules per service port key; valid for services not in the changed set. */
  #portRules = new Map<string, PortRules>();
  /** Sorted service port keys of the last build, reused while the key set is unchanged. */
  #sortedKeys: string[] = [];
  /** The restore input of the last sync (for tests and `render`). */
  lastRestore = "";
  #lastNodeCIDR: string | undefined;

  /** Builds the proxier; runs nothing until a sync. */
  constructor(o: IptablesProxierOptions) {
    super(o);
    this.#o = o;
    this.#ipt = o.iptables;
    this.#conntrack = o.conntrack;
    this.#mark = `0x${(2 ** o.masqueradeBit).toString(16)}`;
    this.#loopback = o.family === "IPv4" ? "127.0.0.0/8" : "::1/128";
  }

  /** The CIDR that tells pod traffic from the rest, or undefined when detection is off. */
  #localCIDR(): string | undefined {
    if (this.#o.detectLocalMode === "NodeCIDR") {
      const cidrs = this.node?.spec?.podCIDRs ?? (this.node?.spec?.podCIDR ? [this.node.spec.podCIDR] : []);
      return cidrs.find((c) => cidrFamily(c) === this.family);
    }
    return this.#o.clusterCIDRs.find((c) => cidrFamily(c) === this.family);
  }

  /** @inheritdoc */
  override onNodeUpdate(old: V1Node, n: V1Node): void {
    super.onNodeUpdate(old, n);
    this.#nodeChanged();
  }

  /** @inheritdoc */
  override onNodeAdd(n: V1Node): void {
    super.onNodeAdd(n);
    this.#nodeChanged();
  }

  #nodeChanged(): void {
    if (this.#o.detectLocalMode !== "NodeCIDR") return;
    const cidr = this.#localCIDR();
    if (cidr !== this.#lastNodeCIDR) {
      this.#lastNodeCIDR = cidr;
      // Every service chain's masquerade rule depends on it.
      this.requestFullSync();
    }
  }

  /** @inheritdoc */
  protected override async syncRules(ctx: SyncContext): Promise<void> {
    let full = ctx.full;
    if (!full && !(await this.#ipt.chainExists("mangle", KUBE_PROXY_CANARY))) {
      this.log.warn("Canary chain is gone (tables flushed?); doing a full sync", { family: this.family });
      full = true;
    }
    if (full) await this.#ensureBaseRules();
    // A full sync finds every per-service chain the kernel holds, ours or upstream's, so stale
    // ones go away; a partial sync knows its stale chains from the services it rewrites.
    const existing = full
      ? new Set(
        (await this.#ipt.save("nat")).split("\n").filter((l) => l.startsWith(":"))
          .map((l) => l.slice(1, l.indexOf(" "))).filter((c) => SERVICE_CHAIN.test(c)),
      )
      : undefined;
    const { text, portRules } = this.#build({ ...ctx, full }, existing);
    this.lastRestore = text;
    try {
      await this.#ipt.restoreAll(text, { flush: false, counters: false });
    } catch (e) {
      this.metrics.restoreFailuresTotal.inc();
      // The rule cache may describe rules that never reached the kernel: rebuild all next time.
      this.#portRules = new Map();
      this.log.error("iptables-restore failed; previous rules stay in place", {
        family: this.family,
        error: (e as Error).message,
        line: e instanceof RestoreError ? e.line : undefined,
      });
      throw e;
    }
    this.#portRules = portRules;
    await this.#clearConntrack(ctx);
    this.#syncHealthChecks(ctx);
  }

  /** Creates our top-level chains and canaries and the jumps into them (idempotent). */
  async #ensureBaseRules(): Promise<void> {
    for (const t of ["mangle", "nat", "filter"] as const) await this.#ipt.ensureChain(t, KUBE_PROXY_CANARY);
    for (const j of JUMP_CHAINS) {
      if (j.to === KUBE_FIREWALL && !this.#firewallChainUsed()) continue;
      await this.#ipt.ensureChain(j.table, j.to);
      await this.#ipt.ensureRule("prepend", j.table, j.from, jumpRuleArgs(j));
    }
  }

  #firewallChainUsed(): boolean {
    return this.family === "IPv4" && this.#o.localhostNodePorts;
  }

  /**
   * Builds the restore input. Chains of services not in `changedServices` are omitted unless
   * full. `existing` (full syncs) lists the kernel's per-service chains; without it, stale chains
   * are those the rewritten and removed service ports had before.
   */
  #build(
    ctx: Pick<SyncContext, "services" | "endpoints" | "full" | "changedServices">,
    existing: ReadonlySet<Chain> | undefined,
  ): { text: string; portRules: Map<string, PortRules> } {
    const localCIDR = this.#localCIDR();
    const portRules = new Map<string, PortRules>();
    const keys = this.#keysSorted(ctx.services);
    // One entry per service port in each: joined once at the end.
    const parts = {
      filterNodePorts: [] as string[],
      filterServices: [] as string[],
      filterExternal: [] as string[],
      filterFirewall: [] as string[],
      natServices: [] as string[],
      natNodePorts: [] as string[],
      chainDecls: [] as string[],
      chainRules: [] as string[],
    };
    const active = new Set<Chain>();
    const replaced: Chain[] = [];
    for (const key of keys) {
      const svc = ctx.services.get(key)!;
      const rewrite = ctx.full || ctx.changedServices.has(svc.service) || !this.#portRules.has(key);
      const r = rewrite
        ? this.#portRulesFor(svc, ctx.endpoints.get(key) ?? [], localCIDR)
        : this.#portRules.get(key)!;
      portRules.set(key, r);
      parts.filterNodePorts.push(r.filterNodePorts);
      parts.filterServices.push(r.filterServices);
      parts.filterExternal.push(r.filterExternal);
      parts.filterFirewall.push(r.filterFirewall);
      parts.natServices.push(r.natServices);
      parts.natNodePorts.push(r.natNodePorts);
      if (existing !== undefined) { for (const c of r.chains) active.add(c); }
      if (rewrite) {
        if (existing === undefined) {
          for (const c of this.#portRules.get(key)?.chains ?? []) replaced.push(c);
          for (const c of r.chains) active.add(c);
        }
        parts.chainDecls.push(r.chainDecls);
        parts.chainRules.push(r.chainRules);
      }
    }
    let stale: Chain[];
    if (existing !== undefined) stale = [...existing].filter((c) => !active.has(c));
    else {
      stale = replaced.filter((c) => !active.has(c));
      for (const [key, old] of this.#portRules) if (!ctx.services.has(key)) stale.push(...old.chains);
    }
    const m = this.#mark;
    const filterChains = [
      KUBE_NODEPORTS,
      KUBE_SERVICES,
      KUBE_EXTERNAL_SERVICES,
      KUBE_FORWARD,
      KUBE_PROXY_FIREWALL,
    ];
    if (this.#firewallChainUsed()) filterChains.push(KUBE_FIREWALL);
    const out: string[] = [
      "*filter\n",
      text(filterChains.map((c) => `:${c} - [0:0]`)),
      ...[parts.filterNodePorts, parts.filterServices, parts.filterExternal].map((p) => p.join("")),
      text([
        `-A ${KUBE_FORWARD} -m conntrack --ctstate INVALID -j DROP`,
        `-A ${KUBE_FORWARD} -m comment --comment "kubernetes forwarding rules" -m mark --mark ${m}/${m} -j ACCEPT`,
        `-A ${KUBE_FORWARD} -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
      ]),
      parts.filterFirewall.join(""),
      this.#firewallChainUsed()
        ? `-A ${KUBE_FIREWALL} ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP\n`
        : "",
      "COMMIT\n*nat\n",
      text([KUBE_SERVICES, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ].map((c) => `:${c} - [0:0]`)),
      parts.chainDecls.join(""),
      text(stale.map((c) => `:${c} - [0:0]`)),
      text([
        `-A ${KUBE_POSTROUTING} -m mark ! --mark ${m}/${m} -j RETURN`,
        `-A ${KUBE_POSTROUTING} -j MARK --xor-mark ${m}`,
        `-A ${KUBE_POSTROUTING} -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`,
        `-A ${KUBE_MARK_MASQ} -j MARK --or-mark ${m}`,
      ]),
      parts.natServices.join(""),
      text(this.#nodePortJumps()),
      parts.natNodePorts.join(""),
      parts.chainRules.join(""),
      text(stale.map((c) => `-X ${c}`)),
      "COMMIT\n",
    ];
    return { text: out.join(""), portRules };
  }

  /** Returns the service port keys sorted, re-sorting only when the key set changed. */
  #keysSorted(services: ReadonlyMap<string, unknown>): string[] {
    const cached = this.#sortedKeys;
    if (cached.length !== services.size || !cached.every((k) => services.has(k))) {
      this.#sortedKeys = [...services.keys()].sort();
    }
    return this.#sortedKeys;
  }

  /** The last rules of nat KUBE-SERVICES: local destinations go on to KUBE-NODEPORTS. */
  #nodePortJumps(): string[] {
    const comment =
      `-m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain"`;
    const cidrs = this.#o.nodePortAddresses.filter((c) => cidrFamily(c) === this.family);
    const allowLoopback = this.family === "IPv4" && this.#o.localhostNodePorts;
    if (cidrs.length === 0) {
      const notLoopback = allowLoopback ? "" : `! -d ${this.#loopback} `;
      return [
        `-A ${KUBE_SERVICES} ${notLoopback}${comment} -m addrtype --dst-type LOCAL -j ${KUBE_NODEPORTS}`,
      ];
    }
    return cidrs
      .filter((c) => allowLoopback || !cidrContains(c, this.family === "IPv4" ? "127.0.0.1" : "::1"))
      .map((c) => `-A ${KUBE_SERVICES} -d ${c} ${comment} -j ${KUBE_NODEPORTS}`);
  }

  /** Generates everything one service port contributes, as upstream's syncProxyRules loop body. */
  #portRulesFor(
    svc: ServicePortInfo,
    eps: readonly EndpointInfo[],
    localCIDR: string | undefined,
  ): PortRules {
    const name = servicePortNameString(svc.name);
    const proto = svc.protocol.toLowerCase();
    const svcChain = servicePortChainName("KUBE-SVC-", name, proto);
    const svlChain = servicePortChainName("KUBE-SVL-", name, proto);
    const extChain = servicePortChainName("KUBE-EXT-", name, proto);
    const fwChain = servicePortChainName("KUBE-FW-", name, proto);
    const { cluster, local, all, hasAny } = categorizeEndpoints(svc, eps);
    const usesCluster = cluster.length > 0;
    const usesLocal = local.length > 0;
    const internalChain = svc.internalPolicyLocal ? svlChain : svcChain;
    const hasInternal = hasAny && (!svc.internalPolicyLocal || local.length > 0);
    const externalPolicyChain = svc.externalPolicyLocal ? svlChain : svcChain;
    const hasExternal = hasAny && (!svc.externalPolicyLocal || local.length > 0);
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
      chainRules: [],
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

    const rules = r.chainRules;
    const declare = (c: Chain) => r.chains.push(c);
    // Internal traffic: masquerade what does not come from pods (or everything); this rule leads
    // the internal chain, before the endpoint jumps.
    let internalMasq: string | undefined;
    if (hasInternal) {
      const match = `-p ${proto} -m comment --comment "${name} cluster IP" -m ${proto} --dport ${svc.port}`;
      const d = `-d ${svc.clusterIP}${hostPrefix(svc.clusterIP)}`;
      if (this.#o.masqueradeAll) internalMasq = `-A ${internalChain} ${d} ${match} -j ${KUBE_MARK_MASQ}`;
      else if (localCIDR !== undefined) {
        internalMasq = `-A ${internalChain} ! -s ${localCIDR} ${d} ${match} -j ${KUBE_MARK_MASQ}`;
      }
    }
    // External traffic.
    if (usesExt) {
      declare(extChain);
      if (!svc.externalPolicyLocal) {
        rules.push(
          `-A ${extChain} -m comment --comment "masquerade traffic for ${name} external destinations" -j ${KUBE_MARK_MASQ}`,
        );
      } else {
        if (localCIDR !== undefined) {
          rules.push(
            `-A ${extChain} -s ${localCIDR} -m comment --comment "pod traffic for ${name} external destinations" -j ${svcChain}`,
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
      declare(fwChain);
      const c = `-m comment --comment "${name} loadbalancer IP"`;
      let allowFromNode = false;
      for (const cidr of svc.loadBalancerSourceRanges) {
        rules.push(`-A ${fwChain} -s ${cidr} ${c} -j ${extChain}`);
        if (this.#o.nodeIPs.some((ip) => cidrContains(cidr, ip))) allowFromNode = true;
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
      declare(chain);
      if (chain === internalChain && internalMasq !== undefined) rules.push(internalMasq);
      this.#serviceToEndpoints(rules, name, proto, svc, chain, eps);
    }
    for (const e of all) {
      const sep = endpointChainName(name, proto, e.key);
      declare(sep);
      const c = `-m comment --comment "${name}"`;
      rules.push(`-A ${sep} -s ${e.ip}${hostPrefix(e.ip)} ${c} -j ${KUBE_MARK_MASQ}`);
      const recent = svc.stickyMaxAgeSeconds > 0 ? ` -m recent --set --name ${sep}` : "";
      rules.push(`-A ${sep} -p ${proto} ${c}${recent} -m ${proto} -j DNAT --to-destination ${e.key}`);
    }
    return done(r);
  }

  #serviceToEndpoints(
    rules: string[],
    name: string,
    proto: string,
    svc: ServicePortInfo,
    chain: Chain,
    eps: readonly EndpointInfo[],
  ): void {
    const seps = eps.map((e) => endpointChainName(name, proto, e.key));
    if (svc.stickyMaxAgeSeconds > 0) {
      eps.forEach((e, i) =>
        rules.push(
          `-A ${chain} -m comment --comment "${name} -> ${e.key}" -m recent --rcheck --seconds ${svc.stickyMaxAgeSeconds} --reap --name ${
            seps[i]
          } -j ${seps[i]}`,
        )
      );
    }
    const n = eps.length;
    eps.forEach((e, i) => {
      const stat = i < n - 1 ? ` -m statistic --mode random --probability ${probability(n - i)}` : "";
      rules.push(`-A ${chain} -m comment --comment "${name} -> ${e.key}"${stat} -j ${seps[i]}`);
    });
  }

  /** Deletes conntrack entries that would keep UDP clients on endpoints that are gone. */
  async #clearConntrack(ctx: SyncContext): Promise<void> {
    const ct = this.#conntrack;
    if (ct === undefined) return;
    const jobs: Array<() => Promise<void>> = [];
    for (const ip of ctx.serviceChanges.deletedUDPClusterIPs) jobs.push(() => ct.clearServiceIP(ip, "udp"));
    for (const key of ctx.endpointChanges.newlyActiveUDPServices) {
      const svc = ctx.services.get(key);
      if (svc === undefined) continue;
      // Entries created while the service rejected traffic would keep rejecting.
      for (const ip of [svc.clusterIP, ...svc.externalIPs, ...svc.loadBalancerIPs]) {
        jobs.push(() => ct.clearServiceIP(ip, "udp", svc.port));
      }
      if (svc.nodePort !== 0) jobs.push(() => ct.clearNodePort(svc.nodePort, "udp"));
    }
    for (const [key, gone] of ctx.endpointChanges.deletedUDPEndpoints) {
      const svc = ctx.services.get(key);
      if (svc === undefined) continue;
      for (const e of gone) {
        if (ipFamily(e.ip) !== this.family) continue;
        for (const ip of [svc.clusterIP, ...svc.externalIPs, ...svc.loadBalancerIPs]) {
          jobs.push(() => ct.clearEndpoint(ip, e.ip, "udp"));
        }
        if (svc.nodePort !== 0) jobs.push(() => ct.clearNodePort(svc.nodePort, "udp", e.ip));
      }
    }
    for (const job of jobs) {
      try {
        await job();
      } catch (e) {
        this.log.warn("Failed to delete stale conntrack entries", { error: (e as Error).message });
      }
    }
  }

  #syncHealthChecks(ctx: SyncContext): void {
    const hs = this.#o.healthServer;
    if (hs === undefined) return;
    const byPort = new Map<
      number,
      { namespace: string; name: string; port: number; localEndpoints: number }
    >();
    for (const [key, svc] of ctx.services) {
      if (svc.healthCheckNodePort === 0) continue;
      const local = categorizeEndpoints(svc, ctx.endpoints.get(key) ?? []).local.length;
      const cur = byPort.get(svc.healthCheckNodePort);
      if (cur === undefined || local > cur.localEndpoints) {
        byPort.set(svc.healthCheckNodePort, {
          namespace: svc.name.namespace,
          name: svc.name.name,
          port: svc.healthCheckNodePort,
          localEndpoints: local,
        });
      }
    }
    hs.sync([...byPort.values()]);
  }
}

const probabilities: string[] = [];

/** Upstream's probability text for the i-th of n endpoint rules: 1/n with 10 decimals. */
export function probability(n: number): string {
  return probabilities[n] ??= (1 / n).toFixed(10);
}

/**
 * Removes every chain and rule kube-proxy (and kube-proxy-deno) creates in iptables mode from one
 * family; running it again finds nothing to do.
 */
export async function cleanupIptables(ipt: IPTables): Promise<void> {
  for (const j of JUMP_CHAINS) await ipt.deleteRule(j.table, j.from, jumpRuleArgs(j));
  for (const table of ["nat", "filter"] as const) {
    const saved = await ipt.save(table);
    const ours = saved.split("\n").filter((l) => l.startsWith(":")).map((l) => l.slice(1, l.indexOf(" ")))
      .filter((c) => c.startsWith("KUBE-") && !c.startsWith("KUBE-PORTALS-"));
    if (ours.length === 0) continue;
    // Flush all first (chains reference each other), then delete, in one atomic restore.
    const lines = [
      `*${table}`,
      ...ours.map((c) => `:${c} - [0:0]`),
      ...ours.map((c) => `-X ${c}`),
      "COMMIT",
      "",
    ];
    await ipt.restoreAll(lines.join("\n"), { flush: false, counters: false });
  }
  await ipt.deleteChain("mangle", KUBE_PROXY_CANARY);
}
