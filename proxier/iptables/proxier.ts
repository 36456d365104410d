/**
 * The iptables mode: kube-proxy's chain layout, written through one `iptables-restore --noflush`
 * per sync. Full syncs rewrite every chain; partial syncs rewrite the fixed chains and only the
 * per-service chains of Services that changed, and delete chains that are gone.
 * @module
 */
import type { Chain, IPTables, RestoreInput, Table } from "../../iptables/iptables.ts";
import { RestoreError } from "../../iptables/iptables.ts";
import { linesStartingWith } from "../../iptables/rule_args.ts";
import { type BuiltinJump, jumpRuleLine, missingJumps } from "../_common/iptables_chains.ts";
import { masqueradeMark } from "../_common/masquerade.ts";
import { BaseProxier, type SyncContext } from "../base_proxier.ts";
import type { BaseProxierOptions } from "../proxier_options.ts";
import type { FamilyView } from "../family_view.ts";
import { otherWriter, syncMarkRule } from "./sync_mark.ts";
import { ANOTHER_WRITER } from "../drift.ts";
import {
  joinLines,
  JUMP_CHAINS,
  KUBE_EXTERNAL_SERVICES,
  KUBE_FIREWALL,
  KUBE_FORWARD,
  KUBE_MARK_MASQ,
  KUBE_NODEPORTS,
  KUBE_POSTROUTING,
  KUBE_PROXY_CANARY,
  KUBE_PROXY_DENO_SYNC,
  KUBE_PROXY_FIREWALL,
  KUBE_SERVICES,
  LARGE_CLUSTER_ENDPOINTS,
  NO_CHAIN_RULES,
  type PortRuleOptions,
  type PortRules,
  SERVICE_CHAIN,
  servicePortRules,
} from "./rules.ts";
import {
  CT_STATE_INVALID_DROPPED,
  type IptablesMetrics,
  iptablesMetrics,
  LOCALHOST_NODEPORTS_ACCEPTED,
} from "./metrics.ts";

/** Options of {@linkcode IptablesProxier}. */
export interface IptablesProxierOptions extends BaseProxierOptions {
  readonly iptables: IPTables;
  readonly masqueradeAll: boolean;
  readonly masqueradeBit: number;
  readonly localhostNodePorts: boolean;
  /**
   * The kernel is liberal about out-of-window TCP (`conntrack/sysctls.ts`: the sysctl, whoever set
   * it; `--conntrack-tcp-be-liberal` in `render`): INVALID packets are then not dropped either
   * (upstream drops them otherwise, against spurious resets).
   */
  readonly conntrackTCPLiberal?: boolean;
  /**
   * The nfacct counters the rules may feed (`-m nfacct`): those that exist and that this kernel's
   * iptables can match (`mode.ts` checks both); default none.
   */
  readonly nfacctCounters?: ReadonlySet<string>;
}

/** What a full sync reads from the kernel before building. */
interface KernelView {
  /** The per-service chains in nat (ours or upstream's). */
  readonly chains: ReadonlySet<Chain>;
  /** Jumps from built-in chains into ours that are not there. */
  readonly missingJumps: readonly BuiltinJump[];
}

/** The iptables proxier; see the module doc. */
export class IptablesProxier extends BaseProxier {
  readonly #ipt: IPTables;
  readonly #o: IptablesProxierOptions;
  readonly #mark: string;
  readonly #loopback: string;
  /** Cached rules per service port key; valid for services not in the changed set. */
  #portRules = new Map<string, CountedPortRules>();
  /** Sorted service port keys of the last build, reused while the key set is unchanged. */
  #sortedKeys: string[] = [];
  /** More than LARGE_CLUSTER_ENDPOINTS endpoints at the last sync. */
  #largeCluster = false;
  /** The sync in progress rewrites everything (for the partial-failure metric). */
  #syncingFull = false;
  /** Rules nat KUBE-SERVICES held after the last successful restore. */
  #servicesRules = 0;
  /** Restores applied (as far as iptables-restore said); the sync chain's comment names the last. */
  #generation = 0;
  readonly #metrics: IptablesMetrics;

  /** Builds the proxier; runs nothing until a sync. */
  constructor(o: IptablesProxierOptions) {
    super(o);
    this.#o = o;
    this.#ipt = o.iptables;
    this.#mark = masqueradeMark(o.masqueradeBit);
    this.#loopback = o.family === "IPv4" ? "127.0.0.0/8" : "::1/128";
    this.#metrics = iptablesMetrics(this.registry, o.family);
  }

  /** @inheritdoc */
  protected override modeViewFacts(): Partial<FamilyView> {
    const npa = this.node.nodePortAddresses(this.#o.localhostNodePorts);
    return { masqueradeAll: this.#o.masqueradeAll, loopbackNodePorts: npa.allowLocalhost ? "rules" : "none" };
  }

  /** @inheritdoc */
  protected override async syncRules(ctx: SyncContext): Promise<boolean> {
    let full = this.#syncingFull = ctx.full;
    let endpoints = 0;
    for (const eps of ctx.endpoints.values()) endpoints += eps.length;
    const large = endpoints > LARGE_CLUSTER_ENDPOINTS;
    if (large !== this.#largeCluster) {
      this.log.info(
        large ? "Large cluster mode: per-endpoint rule comments left out" : "Large cluster mode off",
        {
          family: this.family,
          endpoints,
        },
      );
      this.#largeCluster = large;
      // Every cached service's rules change form.
      full = this.#syncingFull = true;
    }
    const t0 = performance.now();
    // A full sync finds every per-service chain the kernel holds, ours or upstream's, so stale
    // ones go away (a partial sync knows its stale chains from the services it rewrites), and
    // which jumps from the built-in chains are missing, to insert them in the same restore.
    let kernel: KernelView | undefined;
    if (full) {
      const [nat, filter] = await Promise.all([this.#ipt.save("nat"), this.#ipt.save("filter")]);
      const jumps = JUMP_CHAINS.filter((j) => j.to !== KUBE_FIREWALL || this.#firewallChainUsed());
      kernel = {
        chains: new Set(
          linesStartingWith(nat, ":").map((l) => l.slice(1, l.indexOf(" "))).filter((c) =>
            SERVICE_CHAIN.test(c) || c === KUBE_PROXY_DENO_SYNC
          ),
        ),
        missingJumps: [
          ...missingJumps(jumps.filter((j) => j.table === "filter"), filter),
          ...missingJumps(jumps.filter((j) => j.table === "nat"), nat),
        ],
      };
    }
    const t1 = performance.now();
    const { input, portRules, written, servicesRules } = this.#build({ ...ctx, full }, kernel);
    const t2 = performance.now();
    await this.#ipt.restoreAll(input, { flush: false, counters: false, signal: ctx.signal });
    this.#portRules = portRules;
    this.#servicesRules = servicesRules;
    this.#generation++;
    // What the kernel holds from us: every table rule (all written each sync) plus each service's
    // own chain rules, counted when they were last written.
    let chainRules = 0;
    for (const r of portRules.values()) chainRules += r.chainRuleCount;
    this.#metrics.rules("filter", written.filter, written.filter);
    this.#metrics.rules("nat", written.nat + chainRules, written.nat + written.chains);
    const t3 = performance.now();
    const ms = (a: number, b: number) => Math.round(b - a);
    this.log.debug("Rules restored", {
      family: this.family,
      full,
      rewritten: full ? ctx.services.size : ctx.changedPorts.size,
      saveMs: ms(t0, t1),
      buildMs: ms(t1, t2),
      // Includes writing the services' own chains, which happens as the restore reads.
      restoreMs: ms(t2, t3),
      jumpsInserted: kernel?.missingJumps.length ?? 0,
    });
    return full;
  }

  /**
   * @inheritdoc
   * Cheap: the mangle canary (every table flushed). Thorough: the jumps from the built-in chains,
   * and the number of rules in nat KUBE-SERVICES (one service's jump deleted, the nat table flushed
   * while mangle kept its canary).
   */
  protected override async detectDrift(thorough: boolean, signal?: AbortSignal): Promise<string | undefined> {
    if (!(await this.#ipt.chainExists("mangle", KUBE_PROXY_CANARY))) {
      return "the mangle canary chain is gone (tables flushed?)";
    }
    if (!thorough) return undefined;
    const jumps = JUMP_CHAINS.filter((j) => j.to !== KUBE_FIREWALL || this.#firewallChainUsed());
    const builtin = new Map<string, string>();
    const list = (table: Table, chain: Chain) => this.#ipt.listRules(table, chain, signal);
    for (const j of jumps) {
      const k = `${j.table} ${j.from}`;
      if (!builtin.has(k)) builtin.set(k, (await list(j.table, j.from) ?? []).join("\n"));
      if (missingJumps([j], builtin.get(k)!).length > 0) {
        return `the jump ${j.table} ${j.from} -> ${j.to} is gone`;
      }
    }
    const postrouting = (await list("nat", KUBE_POSTROUTING)) ?? [];
    if (this.#generation > 0 && !postrouting.includes(syncMarkRule(this.#generation, this.#o.writer))) {
      const other = otherWriter(postrouting, this.#o.writer);
      return other !== undefined
        ? `${ANOTHER_WRITER}: kube-proxy-deno ${other} wrote KUBE-POSTROUTING after sync ${this.#generation}`
        : `the last restore (sync ${this.#generation}) is not in the kernel (it exited 0 having done nothing?)`;
    }
    const services = (await list("nat", KUBE_SERVICES))?.length ?? 0;
    if (services !== this.#servicesRules) {
      return `nat ${KUBE_SERVICES} holds ${services} rules; the last sync wrote ${this.#servicesRules}`;
    }
    return undefined;
  }

  /** @inheritdoc */
  protected override forgetKernelState(): void {
    // The rule cache may describe rules that never reached the kernel. Each table's commit is
    // atomic, so the kernel holds the previous or the new rules, never half of them.
    this.#portRules = new Map();
  }

  /** @inheritdoc */
  protected override countFailure(e: unknown): void {
    if (!(e instanceof RestoreError)) return;
    this.#metrics.restoreFailures.restore.inc();
    if (!this.#syncingFull) this.#metrics.restoreFailures.partialRestore.inc();
  }

  #firewallChainUsed(): boolean {
    return this.family === "IPv4" && this.#o.localhostNodePorts;
  }

  /**
   * Builds the restore input. Chains of service ports not in `changedPorts` are omitted unless
   * full. `kernel` (full syncs) lists the kernel's per-service chains and the jumps to insert;
   * without it, stale chains are those the rewritten and removed service ports had before.
   */
  #build(
    ctx: Pick<SyncContext, "services" | "endpoints" | "full" | "changedPorts">,
    kernel: KernelView | undefined,
  ): {
    input: RestoreInput;
    portRules: Map<string, CountedPortRules>;
    /** Rules the input holds per table (chains: the services' own chains), once it has been read. */
    written: { filter: number; nat: number; chains: number };
    /** Rules nat KUBE-SERVICES holds once the input is restored. */
    servicesRules: number;
  } {
    const existing = kernel?.chains;
    const insert = (table: Table) =>
      joinLines((kernel?.missingJumps ?? []).filter((j) => j.table === table).map(jumpRuleLine));
    const ruleOpts: PortRuleOptions = {
      masqueradeAll: this.#o.masqueradeAll,
      local: this.node.localDetector,
      nodeIPs: this.node.ips,
      topology: this.node.topology,
      log: this.log,
      largeCluster: this.#largeCluster,
      localhostNodePortsCounter: this.#firewallChainUsed() &&
        this.#o.nfacctCounters?.has(LOCALHOST_NODEPORTS_ACCEPTED) === true,
    };
    const portRules = new Map<string, CountedPortRules>();
    const keys = this.#keysSorted(ctx.services);
    // One entry per service port in each; written out in order, never joined (tens of MiB at scale).
    const parts = {
      filterNodePorts: [] as string[],
      filterServices: [] as string[],
      filterExternal: [] as string[],
      filterFirewall: [] as string[],
      natServices: [] as string[],
      natNodePorts: [] as string[],
      chainRules: [] as Array<{ cached: CountedPortRules; rules: () => string }>,
    };
    const active = new Set<Chain>();
    const replaced: Chain[] = [];
    const natChains: Chain[] = [
      KUBE_SERVICES,
      KUBE_NODEPORTS,
      KUBE_POSTROUTING,
      KUBE_MARK_MASQ,
      KUBE_PROXY_CANARY,
    ];
    for (const key of keys) {
      const svc = ctx.services.get(key)!;
      const rewrite = ctx.full || ctx.changedPorts.has(key) || !this.#portRules.has(key);
      const r = rewrite
        ? servicePortRules(svc, ctx.endpoints.get(key) ?? [], ruleOpts)
        : this.#portRules.get(key)!;
      // A service's own chains are written only when it is rewritten: the cache keeps the rest
      // (and their rule count, filled in as the restore reads them).
      const cached = rewrite
        ? { ...r, chainRules: NO_CHAIN_RULES, chainRuleCount: 0 }
        : r as CountedPortRules;
      portRules.set(key, cached);
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
        for (const c of r.chains) natChains.push(c);
        parts.chainRules.push({ cached, rules: r.chainRules });
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
      KUBE_PROXY_CANARY,
    ];
    if (this.#firewallChainUsed()) filterChains.push(KUBE_FIREWALL);
    const out: string[] = [
      // The mangle canary tells a partial sync whether the tables were flushed behind our back.
      kernel === undefined ? "" : `*mangle\n:${KUBE_PROXY_CANARY} - [0:0]\nCOMMIT\n`,
      "*filter\n",
      joinLines(filterChains.sort().map((c) => `:${c} - [0:0]`)),
      ...parts.filterNodePorts,
      ...parts.filterServices,
      ...parts.filterExternal,
      joinLines([
        ...this.#o.conntrackTCPLiberal ? [] : [
          `-A ${KUBE_FORWARD} -m conntrack --ctstate INVALID${
            this.#o.nfacctCounters?.has(CT_STATE_INVALID_DROPPED) === true
              ? ` -m nfacct --nfacct-name ${CT_STATE_INVALID_DROPPED}`
              : ""
          } -j DROP`,
        ],
        `-A ${KUBE_FORWARD} -m comment --comment "kubernetes forwarding rules" -m mark --mark ${m}/${m} -j ACCEPT`,
        `-A ${KUBE_FORWARD} -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
      ]),
      ...parts.filterFirewall,
      this.#firewallChainUsed()
        ? `-A ${KUBE_FIREWALL} ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP\n`
        : "",
      insert("filter"),
      NAT_START,
      // Declared in sorted order, as iptables-save prints them: the nf_tables backend's restore takes
      // several times longer otherwise.
      joinLines([...natChains, ...stale].sort().map((c) => `:${c} - [0:0]`)),
      joinLines([
        `-A ${KUBE_POSTROUTING} -m mark ! --mark ${m}/${m} -j RETURN`,
        `-A ${KUBE_POSTROUTING} -j MARK --xor-mark ${m}`,
        `-A ${KUBE_POSTROUTING} -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`,
        `-A ${KUBE_MARK_MASQ} -j MARK --or-mark ${m}`,
        syncMarkRule(this.#generation + 1, this.#o.writer),
      ]),
      ...parts.natServices,
      joinLines(this.#nodePortJumps()),
      ...parts.natNodePorts,
    ];
    const tail = [joinLines(stale.map((c) => `-X ${c}`)), insert("nat"), "COMMIT\n"];
    const chainRules = parts.chainRules;
    // Re-iterable: a failed restore reads its input again to quote the line that failed.
    const written = { filter: 0, nat: 0, chains: 0 };
    const input = {
      *[Symbol.iterator]() {
        written.filter = written.nat = written.chains = 0;
        let table: "filter" | "nat" = "filter";
        for (const text of out) {
          if (text === NAT_START) table = "nat";
          written[table] += countRules(text);
          yield text;
        }
        for (const { cached, rules } of chainRules) {
          const text = rules();
          cached.chainRuleCount = countRules(text);
          written.chains += cached.chainRuleCount;
          yield text;
        }
        for (const text of tail) written.nat += countRules(text);
        yield* tail;
      },
    };
    // What a drift check expects nat KUBE-SERVICES to hold.
    let servicesRules = this.#nodePortJumps().length;
    for (const text of parts.natServices) servicesRules += countRules(text);
    return { input, portRules, written, servicesRules };
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
    const npa = this.node.nodePortAddresses(this.#o.localhostNodePorts);
    if (npa.matchAll) {
      const notLoopback = npa.allowLocalhost ? "" : `! -d ${this.#loopback} `;
      return [
        `-A ${KUBE_SERVICES} ${notLoopback}${comment} -m addrtype --dst-type LOCAL -j ${KUBE_NODEPORTS}`,
      ];
    }
    // As upstream: one rule per node address inside the CIDRs, so forwarded traffic to other hosts
    // in them never reaches KUBE-NODEPORTS.
    return npa.nodeIPs(this.node.ips).map((ip) =>
      `-A ${KUBE_SERVICES} -d ${ip} ${comment} -j ${KUBE_NODEPORTS}`
    );
  }
}

/** The chunk of the restore input that ends the filter table and starts nat. */
const NAT_START = "COMMIT\n*nat\n";

/** A cached service port's rules and how many rules its own chains held when last written. */
type CountedPortRules = PortRules & { chainRuleCount: number };

/** Returns the number of rules (`-A` lines) in restore text. */
function countRules(text: string): number {
  let n = text.startsWith("-A ") ? 1 : 0;
  for (let i = text.indexOf("\n-A "); i >= 0; i = text.indexOf("\n-A ", i + 4)) n++;
  return n;
}
