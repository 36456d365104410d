/**
 * The ipvs proxier: each service port's virtual servers, ipset entries and kube-ipvs0 addresses
 * (`port_state.ts`), added up and diffed against what the kernel holds. A full sync (start, after a
 * failure, hourly) reads the kernel once (virtual servers, ipsets, bound addresses) and reconciles
 * all of it; a partial sync recomputes only the changed services and touches only what they
 * change. Each sync is at most one ipset batch, one iptables-restore, one ip batch and one ipvsadm
 * batch. Removed real servers leave as `graceful_termination.ts` decides.
 * @module
 */
import type { DummyLink } from "../../iptables/ip_link.ts";
import { addEntry, createSet, delEntry, destroySet, type IPSet } from "../../iptables/ipset.ts";
import { type IPTables, RestoreError } from "../../iptables/iptables.ts";
import {
  addRealServer,
  addVirtualServer,
  deleteRealServer,
  deleteVirtualServer,
  editRealServer,
  editVirtualServer,
  type IPVS,
  type RealServer,
  rsKey,
  type VirtualServer,
  vsKey,
} from "../../iptables/ipvsadm.ts";
import { type BuiltinJump, missingJumps } from "../_common/iptables_chains.ts";
import { masqueradeMark } from "../_common/masquerade.ts";
import { RefCounts } from "../_common/ref_counts.ts";
import { BaseProxier, type SyncContext } from "../base_proxier.ts";
import type { BaseProxierOptions } from "../proxier_options.ts";
import type { FamilyView } from "../family_view.ts";
import { restoreFailureCounters } from "../metrics.ts";
import { ipFamily, isLoopback } from "../model/net.ts";
import { addIpvsCounters, type IpvsServiceCounters } from "./metrics.ts";
import { GracefulTermination } from "./graceful_termination.ts";
import { readKernelState } from "./kernel_state.ts";
import { type Guard, guardKey, iptablesInput, JUMPS, SET_NAMES, type SetName, setSpec } from "./layout.ts";
import { type PortState, portState } from "./port_state.ts";

/** Options of {@linkcode IpvsProxier}. */
export interface IpvsProxierOptions extends BaseProxierOptions {
  readonly ipvs: IPVS;
  readonly ipset: IPSet;
  readonly iptables: IPTables;
  readonly link: DummyLink;
  /** `--ipvs-scheduler` (rr by default). */
  readonly scheduler: string;
  /** `--ipvs-exclude-cidrs`: virtual servers inside them are never touched. */
  readonly excludeCIDRs: readonly string[];
  readonly masqueradeAll: boolean;
  readonly masqueradeBit: number;
}

/** A load-balancer address the node must not reach (its source ranges exclude the node). */

interface Wanted {
  vs: VirtualServer;
  reals: Map<string, RealServer>;
  port: string;
}

/** The ipvs proxier for one family; see the module doc. */
export class IpvsProxier extends BaseProxier {
  readonly #o: IpvsProxierOptions;
  /** Per service port key: what it contributed at the last sync. */
  readonly #ports = new Map<string, PortState>();
  readonly #restoreFailures: ReturnType<typeof restoreFailureCounters>;
  /** What all ports want, added up (entries and binds counted: two ports may share one). */
  readonly #servers = new Map<string, Wanted>();
  readonly #entries = new Map<SetName, RefCounts<string>>();
  readonly #binds = new RefCounts<string>();
  readonly #guards = new RefCounts<string, Guard>();
  /** What the kernel holds (this family), as the last successful sync left it. */
  #kernelServers = new Map<string, { vs: VirtualServer; reals: Map<string, RealServer> }>();
  #kernelEntries = new Map<SetName, Set<string>>();
  #kernelBinds = new Set<string>();
  #formerSets: readonly string[] = [];
  /** Real servers at weight 0, waiting for their connections to end. */
  readonly #terminating = new GracefulTermination();
  #lastIptables = "";

  /** Builds the proxier; runs nothing until a sync. Its IPVS counters are read on each scrape. */
  constructor(o: IpvsProxierOptions) {
    super(o);
    this.#o = o;
    this.#restoreFailures = restoreFailureCounters(this.registry, o.family);
    addIpvsCounters(this.registry, () => this.counters());
  }

  /** The IPVS counters of this family's virtual servers that serve a Service, with its labels. */
  async counters(): Promise<IpvsServiceCounters[]> {
    const stats = await this.#o.ipvs.stats();
    const out: IpvsServiceCounters[] = [];
    for (const [key, counters] of stats) {
      const wanted = this.#servers.get(key);
      const svc = wanted === undefined ? undefined : this.serviceMap.get(wanted.port);
      if (wanted === undefined || svc === undefined) continue;
      out.push({
        labels: {
          namespace: svc.name.namespace,
          service: svc.name.name,
          port: String(wanted.vs.port),
          protocol: wanted.vs.protocol,
          address: wanted.vs.address,
        },
        counters,
      });
    }
    return out;
  }

  /** The addresses NodePorts are served on: this family's node addresses within --nodeport-addresses. */
  #nodePortIPs(): string[] {
    // Addresses bound to kube-ipvs0 are service addresses, not the node's.
    return this.node.nodePortAddresses().nodeIPs(this.node.ips)
      .filter((ip) => !this.#kernelBinds.has(ip) && !this.#binds.has(ip));
  }

  /** @inheritdoc */
  protected override nodeDependentState(): string {
    return JSON.stringify([super.nodeDependentState(), this.node.primaryIP ?? ""]);
  }

  /** @inheritdoc */
  protected override modeViewFacts(): Partial<FamilyView> {
    return {
      masqueradeAll: this.#o.masqueradeAll,
      nodePortIPs: this.#nodePortIPs(),
    };
  }

  /** @inheritdoc */
  protected override async syncRules(ctx: SyncContext): Promise<void> {
    const { ipvs, ipset, link } = this.#o;
    const full = ctx.full;
    if (full) {
      await link.ensure();
      await this.#readKernel();
    }
    // The services to recompute, and with them what may change in the kernel.
    const touched = {
      servers: new Set<string>(),
      entries: new Map<SetName, Set<string>>(),
      binds: new Set<string>(),
    };
    const keys = full ? ctx.services.keys() : ctx.changedPorts;
    if (full) this.#clearWanted();
    const opts = {
      scheduler: this.#o.scheduler,
      topology: this.node.topology,
      nodePortIPs: this.#nodePortIPs(),
      nodeIPs: new Set(this.node.ips),
      nodeIP: this.node.primaryIP ?? this.#nodePortIPsFallback(),
      log: this.log,
    };
    for (const key of keys) {
      const old = this.#ports.get(key);
      if (old !== undefined) this.#forget(key, old, touched);
      const svc = ctx.services.get(key);
      if (svc === undefined) continue;
      const state = portState(svc, ctx.endpoints.get(key) ?? [], opts);
      this.#remember(key, state, touched);
    }
    if (full) {
      for (const k of this.#kernelServers.keys()) touched.servers.add(k);
      for (const [set, entries] of this.#kernelEntries) for (const e of entries) this.#touch(touched, set, e);
      for (const ip of this.#kernelBinds) touched.binds.add(ip);
    }

    // 1. ipsets: created on a full sync, then the entries that changed.
    const setLines: string[] = full ? SET_NAMES.map((n) => createSet(setSpec(n, this.family))) : [];
    for (const [set, entries] of touched.entries) {
      const spec = setSpec(set, this.family);
      for (const e of entries) {
        const want = this.#entries.get(set)?.has(e) ?? false;
        const has = this.#kernelEntries.get(set)?.has(e) ?? false;
        if (want && !has) setLines.push(addEntry(spec, e));
        else if (!want && has) setLines.push(delEntry(spec, e));
      }
    }
    // 2. iptables: our chains whole (a few dozen rules), when they change or on a full sync.
    const iptablesText = iptablesInput({
      family: this.family,
      nonEmpty: new Set(SET_NAMES.filter((n) => (this.#entries.get(n)?.size ?? 0) > 0)),
      masqueradeAll: this.#o.masqueradeAll,
      local: this.node.localDetector,
      mark: masqueradeMark(this.#o.masqueradeBit),
      guards: [...this.#guards.values()],
      missingJumps: full ? await this.#missingJumps() : [],
    });
    // 3. kube-ipvs0 addresses.
    const bind: string[] = [];
    const unbind: string[] = [];
    for (const ip of touched.binds) {
      const want = this.#binds.has(ip);
      if (want && !this.#kernelBinds.has(ip)) bind.push(ip);
      else if (!want && this.#kernelBinds.has(ip)) unbind.push(ip);
    }
    // 4. virtual and real servers.
    const ipvsLines = await this.#ipvsLines(touched.servers, ctx.signal);

    await ipset.restore(setLines, ctx.signal);
    if (full || iptablesText !== this.#lastIptables) {
      await this.#o.iptables.restoreAll(iptablesText, { flush: false, counters: false, signal: ctx.signal });
      this.#lastIptables = iptablesText;
    }
    // No rule names them now that the restore is in.
    if (full) await ipset.restore(this.#formerSets.map(destroySet), ctx.signal);
    await link.apply(bind, unbind, ctx.signal);
    await ipvs.apply(ipvsLines.lines, ctx.signal);
    this.#commit(touched, ipvsLines.kernel);
  }

  /**
   * @inheritdoc
   * Thorough only (IPVS has no cheap marker): the kernel's virtual servers, their real servers,
   * kube-ipvs0's addresses and the sets' entries, counted against what the last sync left.
   */
  protected override async detectDrift(thorough: boolean): Promise<string | undefined> {
    if (!thorough) return undefined;
    const k = await readKernelState({ ...this.#o, nodeIPs: this.node.ips }, this.family);
    const reals = (m: Map<string, { reals: Map<string, unknown> }>) =>
      [...m.values()].reduce((n, s) => n + s.reals.size, 0);
    if (k.servers.size !== this.#kernelServers.size) {
      return `IPVS holds ${k.servers.size} virtual servers of ours; the last sync left ${this.#kernelServers.size}`;
    }
    if (reals(k.servers) !== reals(this.#kernelServers)) {
      return `IPVS holds ${reals(k.servers)} real servers; the last sync left ${reals(this.#kernelServers)}`;
    }
    if (k.binds.size !== this.#kernelBinds.size) {
      return `kube-ipvs0 holds ${k.binds.size} addresses; the last sync left ${this.#kernelBinds.size}`;
    }
    for (const [set, entries] of this.#kernelEntries) {
      const held = k.entries.get(set)?.size ?? 0;
      if (held !== entries.size) {
        return `ipset ${set} holds ${held} entries; the last sync left ${entries.size}`;
      }
    }
    return undefined;
  }

  /** @inheritdoc */
  protected override forgetKernelState(): void {
    // What the kernel holds is unknown now: the next (full) sync reads it again and reconciles.
    this.#lastIptables = "";
  }

  /** @inheritdoc */
  protected override countFailure(e: unknown, full: boolean): void {
    // Upstream's ipvs mode counts its iptables-restore failures only, under the iptables names.
    if (!(e instanceof RestoreError)) return;
    this.#restoreFailures.restore.inc();
    if (!full) this.#restoreFailures.partialRestore.inc();
  }

  /** Without a Node object, the first node address stands in for the node's own (source ranges). */
  #nodePortIPsFallback(): string | undefined {
    return this.node.ips.find((ip) => ipFamily(ip) === this.family && !isLoopback(ip));
  }

  #clearWanted(): void {
    this.#ports.clear();
    this.#servers.clear();
    this.#entries.clear();
    this.#binds.clear();
    this.#guards.clear();
  }

  #touch(t: { entries: Map<SetName, Set<string>> }, set: SetName, entry: string): void {
    let s = t.entries.get(set);
    if (s === undefined) t.entries.set(set, s = new Set());
    s.add(entry);
  }

  /** Adds a port's state to the wanted totals. */
  #remember(
    key: string,
    state: PortState,
    t: { servers: Set<string>; entries: Map<SetName, Set<string>>; binds: Set<string> },
  ): void {
    this.#ports.set(key, state);
    for (const s of state.servers) {
      const k = vsKey(s.vs);
      t.servers.add(k);
      const other = this.#servers.get(k);
      if (other !== undefined && other.port !== key) {
        this.log.warn("Two services claim the same virtual server; the first keeps it", {
          virtualServer: k,
          kept: other.port,
          ignored: key,
        });
        continue;
      }
      this.#servers.set(k, { vs: s.vs, reals: new Map(s.reals.map((r) => [rsKey(r), r])), port: key });
    }
    for (const [set, e] of state.entries) {
      let m = this.#entries.get(set);
      if (m === undefined) this.#entries.set(set, m = new RefCounts());
      m.add(e);
      this.#touch(t, set, e);
    }
    for (const ip of state.binds) {
      this.#binds.add(ip);
      t.binds.add(ip);
    }
    for (const g of state.guards) this.#guards.add(guardKey(g), g);
  }

  /** Takes a port's old state out of the wanted totals. */
  #forget(
    key: string,
    state: PortState,
    t: { servers: Set<string>; entries: Map<SetName, Set<string>>; binds: Set<string> },
  ): void {
    this.#ports.delete(key);
    for (const s of state.servers) {
      const k = vsKey(s.vs);
      t.servers.add(k);
      if (this.#servers.get(k)?.port === key) this.#servers.delete(k);
    }
    for (const [set, e] of state.entries) {
      this.#entries.get(set)?.remove(e);
      this.#touch(t, set, e);
    }
    for (const ip of state.binds) {
      this.#binds.remove(ip);
      t.binds.add(ip);
    }
    for (const g of state.guards) this.#guards.remove(guardKey(g));
  }

  /** Reads the kernel state of this family (full syncs). */
  async #readKernel(): Promise<void> {
    const k = await readKernelState({ ...this.#o, nodeIPs: this.node.ips }, this.family);
    this.#kernelServers = k.servers;
    this.#kernelEntries = k.entries;
    this.#kernelBinds = k.binds;
    this.#formerSets = k.former;
  }

  /** The jumps from the built-in chains missing from the kernel. */
  async #missingJumps(): Promise<BuiltinJump[]> {
    const [nat, filter] = [await this.#o.iptables.save("nat"), await this.#o.iptables.save("filter")];
    return [
      ...missingJumps(JUMPS.filter((j) => j.table === "nat"), nat),
      ...missingJumps(JUMPS.filter((j) => j.table === "filter"), filter),
    ];
  }

  /**
   * The ipvsadm batch for `keys`, and what the kernel will hold for them afterwards. Real servers
   * that go away are drained first (weight 0) unless they are UDP; drained ones without
   * connections (or past the bound) are deleted.
   */
  async #ipvsLines(
    keys: ReadonlySet<string>,
    signal: AbortSignal,
  ): Promise<
    {
      lines: string[];
      kernel: Map<string, { vs: VirtualServer; reals: Map<string, RealServer> } | undefined>;
    }
  > {
    const lines: string[] = [];
    const kernel = new Map<string, { vs: VirtualServer; reals: Map<string, RealServer> } | undefined>();
    const now = this.clock.now();
    // Draining real servers anywhere are checked on every sync (the periodic ones included).
    const drainKeys = this.#terminating.virtualServers();
    const conns = this.#terminating.size > 0 && !signal.aborted
      ? await this.#o.ipvs.connections()
      : new Map();
    for (const k of new Set([...keys, ...drainKeys])) {
      const want = this.#servers.get(k);
      const have = this.#kernelServers.get(k);
      if (want === undefined) {
        if (have !== undefined) lines.push(deleteVirtualServer(have.vs));
        this.#terminating.forget(k);
        kernel.set(k, undefined);
        continue;
      }
      const reals = new Map(have?.reals ?? []);
      if (have === undefined) lines.push(addVirtualServer(want.vs));
      else if (!sameServer(have.vs, want.vs)) lines.push(editVirtualServer(want.vs));
      for (const [rk, r] of want.reals) {
        const cur = reals.get(rk);
        this.#terminating.keep(k, rk);
        if (cur === undefined) lines.push(addRealServer(want.vs, r));
        else if (cur.weight !== r.weight) lines.push(editRealServer(want.vs, r));
        reals.set(rk, r);
      }
      for (const [rk, cur] of reals) {
        if (want.reals.has(rk)) continue;
        const leaving = this.#terminating.leaving(k, rk, want.vs.protocol, conns, now);
        if (leaving === "delete") {
          lines.push(deleteRealServer(want.vs, cur));
          reals.delete(rk);
        } else if (leaving === "drain") {
          if (cur.weight !== 0) lines.push(editRealServer(want.vs, { ...cur, weight: 0 }));
          reals.set(rk, { ...cur, weight: 0 });
        }
      }
      kernel.set(k, { vs: want.vs, reals });
    }
    return { lines, kernel };
  }

  /** Records what the kernel holds after a successful sync. */
  #commit(
    t: { entries: Map<SetName, Set<string>>; binds: Set<string> },
    servers: Map<string, { vs: VirtualServer; reals: Map<string, RealServer> } | undefined>,
  ): void {
    for (const [set, entries] of t.entries) {
      let k = this.#kernelEntries.get(set);
      if (k === undefined) this.#kernelEntries.set(set, k = new Set());
      for (const e of entries) {
        if (this.#entries.get(set)?.has(e) === true) k.add(e);
        else k.delete(e);
      }
    }
    for (const ip of t.binds) {
      if (this.#binds.has(ip)) this.#kernelBinds.add(ip);
      else this.#kernelBinds.delete(ip);
    }
    for (const [k, v] of servers) {
      if (v === undefined) this.#kernelServers.delete(k);
      else this.#kernelServers.set(k, v);
    }
  }
}

function sameServer(a: VirtualServer, b: VirtualServer): boolean {
  return a.scheduler === b.scheduler && a.persistentTimeout === b.persistentTimeout &&
    a.flags.length === b.flags.length && a.flags.every((f, i) => f === b.flags[i]);
}
