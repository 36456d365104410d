/**
 * The nftables mode: the map-centric layout of `layout.ts`, written as one `nft -f -` transaction
 * per family per sync. A full sync (at start, after a failure, when the table vanished, and once an
 * hour) recreates the fixed layout and refills every set and map; a partial sync deletes and adds
 * only the elements of the service ports that changed. NodePorts on 127.0.0.1 / ::1, which no
 * nftables rule can serve, are served by a socket proxy when asked for
 * (`socket_proxy/localhost_node_ports.ts`).
 * @module
 */
import { type NFTables, NftError, nftFamily } from "../../iptables/nft.ts";
import { masqueradeMark } from "../_common/masquerade.ts";
import { BaseProxier, type BaseProxierOptions, type SyncContext } from "../base_proxier.ts";
import type { Connection, DatapathAnswer, FamilyView } from "../family_view.ts";
import { isLoopback } from "../net.ts";
import { localhostNodePortMetrics, nftablesMetrics } from "./metrics.ts";
import { ElementBook, type Touched } from "./element_book.ts";
import {
  affinityRecordChain,
  BACKENDS,
  BACKENDS_CLUSTER,
  ELEMENT_CONTAINERS,
  fixedLayout,
  LAYOUT_MARKER,
  type NftName,
  SERVICE_IPS,
  SERVICES,
  SYNC_GENERATION,
  TABLE,
} from "./layout.ts";
import { affinityStatements, dropStalePins } from "./affinity.ts";
import { backendsSize, backendsStatements, lbChainName, parseLbChain } from "./backends.ts";
import { MaglevMaps, type MaglevWant } from "./maglev_maps.ts";
import { DEFAULT_MAGLEV_SEED, DEFAULT_MAGLEV_TABLE_SIZE } from "../../loadbalancer/maglev.ts";
import { DynamicChains, type PortUses, portUses } from "./dynamic_chains.ts";
import { elementStatements, type PortElements, portElements } from "./port_elements.ts";
import {
  type LocalhostNodePort,
  LocalhostNodePorts,
  type LocalhostNodePortsOptions,
} from "../socket_proxy/localhost_node_ports.ts";
import { categorizeEndpoints, externalEndpoints } from "../topology.ts";
import { servicePortNameString } from "../types.ts";

/**
 * The most Maglev elements a transaction of new tables carries before a full sync (nft holds about
 * 1.4 KiB per element it loads at once: about 90 MiB).
 */
export const MAGLEV_CHUNK_ELEMENTS = 65_536;

/** Options of {@linkcode NftablesProxier}. */
export interface NftablesProxierOptions extends BaseProxierOptions {
  readonly nft: NFTables;
  readonly masqueradeAll: boolean;
  readonly masqueradeBit: number;
  /** False when this family's nft cannot program ClientIP affinity (IPv6 on nft 1.0.6). */
  readonly affinitySupported: boolean;
  /** The kernel is liberal about out-of-window TCP (`conntrack/sysctls.ts`): INVALID packets are then not dropped, as upstream. */
  readonly conntrackTCPLiberal?: boolean;
  /**
   * Serve NodePorts on this family's loopback address through a socket proxy (feature gate
   * KubeProxyNFTablesLocalhostNodePorts, with `--nodeport-addresses` naming loopback); undefined:
   * not served, as upstream without them.
   */
  readonly localhostNodePorts?: Pick<LocalhostNodePortsOptions, "udpIdleTimeoutMs" | "tcpLimits" | "listen">;
  /** Maglev's table size M, a prime (`--maglev-table-size`); default {@linkcode DEFAULT_MAGLEV_TABLE_SIZE}. */
  readonly maglevTableSize?: number;
  /**
   * The cluster-wide seed of the Maglev tables and of every hash a scheduler takes (sh, dh, mh)
   * (`--maglev-seed`); default {@linkcode DEFAULT_MAGLEV_SEED}. Nodes agree only with the same seed.
   */
  readonly maglevSeed?: number;
}

/** The nftables proxier; see the module doc. */
export class NftablesProxier extends BaseProxier {
  readonly #o: NftablesProxierOptions;
  readonly #nft: NFTables;
  readonly #fam: "ip" | "ip6";
  readonly #book = new ElementBook();
  readonly #metrics: ReturnType<typeof nftablesMetrics>;
  /** What each port's elements use beyond the book (its elements themselves are the book's). */
  readonly #ports = new Map<string, PortUses>();
  /** The lb chains and affinity maps: which ports use each, which the kernel holds. */
  readonly #dynamic: DynamicChains;
  /** The size each backends map was created with. */
  readonly #backendsSize = new Map<NftName, number>();
  /** The Maglev tables the kernel holds. */
  readonly #maglev: MaglevMaps;
  readonly #seed: number;
  readonly #warnedAffinity = new Set<string>();
  /** Transactions applied (as far as nft said); {@linkcode SYNC_GENERATION} holds the last. */
  #generation = 0;
  /** The loopback NodePort listeners, when served. */
  readonly localhost?: LocalhostNodePorts;
  /** A retry of the loopback ports that could not be opened (backoff doubling from 1 s to the sync period). */
  #retry?: { cancel: () => void; ms: number };

  /** Builds the proxier; runs nothing until a sync. */
  constructor(o: NftablesProxierOptions) {
    super(o);
    this.#o = o;
    this.#nft = o.nft;
    this.#fam = nftFamily(o.family);
    this.#metrics = nftablesMetrics(this.registry, o.family);
    this.#dynamic = new DynamicChains({ ...o, cleanupFailures: this.#metrics.cleanupFailures });
    this.#seed = o.maglevSeed ?? DEFAULT_MAGLEV_SEED;
    this.#maglev = new MaglevMaps({
      family: o.family,
      tableSize: o.maglevTableSize ?? DEFAULT_MAGLEV_TABLE_SIZE,
      seed: this.#seed,
    });
    if (o.localhostNodePorts !== undefined) {
      this.localhost = new LocalhostNodePorts({
        ...o.localhostNodePorts,
        family: o.family,
        log: o.log,
        clock: o.clock,
        metrics: localhostNodePortMetrics(this.registry, o.family),
      });
    }
  }

  /**
   * Where the loopback socket proxy sends `c` (`explain`): a NodePort on 127.0.0.1 / ::1 served
   * here; undefined for any other connection (the rules decide those).
   */
  localhostAnswer(c: Connection): DatapathAnswer | undefined {
    const lo = this.localhost;
    if (lo === undefined || c.fromNode !== true || !isLoopback(c.dst)) return undefined;
    const route = lo.route(c.protocol.toUpperCase() as "TCP" | "UDP" | "SCTP", c.port);
    return {
      verdict: route === undefined ? "REJECT" : "DNAT",
      endpoints: route === undefined ? [] : [...route.endpoints].sort(),
      masquerade: route === undefined ? undefined : true,
      rules: route === undefined
        ? []
        : [`listener ${lo.address}:${c.port}/${c.protocol} of ${route.service}`],
      by: "the loopback socket proxy",
    };
  }

  /** Closes the loopback NodePort listeners (connections in flight finish); the kernel rules stay. */
  close(): void {
    this.#retry?.cancel();
    this.localhost?.close();
  }

  /** The node's addresses of this family that answer NodePorts. */
  #nodePortIPs(): string[] {
    return this.node.nodePortAddresses().nodeIPs(this.node.ips);
  }

  /** @inheritdoc */
  protected override explainExtras(): Partial<FamilyView> {
    return {
      masqueradeAll: this.#o.masqueradeAll,
      loopbackNodePorts: this.localhost !== undefined ? "socket" : "none",
      nodePortIPs: this.#nodePortIPs(),
    };
  }

  /** @inheritdoc */
  protected override get usesServiceCIDRs(): boolean {
    return true;
  }

  /** @inheritdoc */
  protected override nodeDependentState(): string {
    return JSON.stringify([super.nodeDependentState(), this.#nodePortIPs()]);
  }

  /** @inheritdoc */
  protected override async syncRules(ctx: SyncContext): Promise<boolean> {
    for (const name of await this.#dynamic.deleteStale()) this.#maglev.forget(name);
    const full = ctx.full;
    const affinityDirty = new Set<number>();
    const lines = full ? await this.#buildFull(ctx, affinityDirty) : this.#buildPartial(ctx, affinityDirty);
    if (lines.length > 0) {
      const t = `${this.#fam} ${TABLE}`;
      lines.push(
        `flush set ${t} ${SYNC_GENERATION}`,
        // As nft lists a mark, so a listing reads back as sent.
        `add element ${t} ${SYNC_GENERATION} { 0x${(this.#generation + 1).toString(16).padStart(8, "0")} }`,
      );
      const text = lines.join("\n") + "\n";
      // One transaction: nft applies all of it or none, also when killed on shutdown.
      await this.#nft.apply(text, ctx.signal);
      this.#generation++;
    }
    this.#dynamic.markStale();
    if (this.localhost !== undefined) this.#syncLocalhost(ctx);
    await dropStalePins({
      ...this.#o,
      book: this.#book,
      ports: this.#ports,
      inKernel: (name) => this.#dynamic.inKernel(name),
    }, affinityDirty);
    return full;
  }

  /**
   * @inheritdoc
   * Cheap: the layout's marker chain (the table deleted, the ruleset flushed). Thorough: the
   * `services` chain's one rule (the table flushed) and the number of `service-ips` elements (one
   * deleted by hand).
   */
  protected override async detectDrift(thorough: boolean): Promise<string | undefined> {
    const found = await this.#detectDrift(thorough);
    // The repair is a full sync: it writes the Maglev tables anew too.
    if (found !== undefined) this.#maglev.clear();
    return found;
  }

  async #detectDrift(thorough: boolean): Promise<string | undefined> {
    if ((await this.#nft.listChains(TABLE))?.includes(LAYOUT_MARKER) !== true) {
      return `the ${TABLE} table is gone (ruleset flushed?)`;
    }
    if (!thorough) return undefined;
    const held = (await this.#nft.listElements(TABLE, SERVICE_IPS)).length;
    const written = this.#book.size(SERVICE_IPS);
    if (held !== written) return `map ${SERVICE_IPS} holds ${held} elements; the last sync wrote ${written}`;
    const generation = (await this.#nft.listElements(TABLE, SYNC_GENERATION)).map((e) => Number(e.key[0]));
    if (this.#generation > 0 && (generation.length !== 1 || generation[0] !== this.#generation)) {
      return `the last transaction (${this.#generation}) is not in the kernel (nft exited 0 having done nothing?)`;
    }
    // Listing a chain makes nft read the whole table (seconds at scale): last, and off the sync path.
    const rules = await this.#nft.countRules(TABLE, SERVICES);
    if (rules !== 1) return `chain ${SERVICES} holds ${rules ?? 0} rules, not 1 (table flushed?)`;
    return undefined;
  }

  /** @inheritdoc */
  protected override forgetKernelState(): void {
    // The book describes elements that never reached the kernel: the next sync is full.
    this.#book.clear();
    this.#ports.clear();
    this.#maglev.clear();
  }

  /** @inheritdoc */
  protected override countFailure(e: unknown): void {
    if (e instanceof NftError) this.#metrics.syncFailures.inc();
  }

  /** Computes one port's elements (warning once per Service when affinity cannot be programmed). */
  #elements(ctx: Pick<SyncContext, "endpoints">, key: string, nodePortIPs: string[]): PortElements {
    const svc = (ctx as SyncContext).services.get(key)!;
    if (svc.stickyMaxAgeSeconds > 0 && !this.#o.affinitySupported && !this.#warnedAffinity.has(svc.service)) {
      this.#warnedAffinity.add(svc.service);
      this.log.warn(
        "ClientIP affinity is not programmed for this IPv6 service: this nft cannot update an IPv6 affinity map (nft 1.0.6 aborts); connections are balanced without affinity",
        {
          service: svc.service,
        },
      );
    }
    return portElements(svc, ctx.endpoints.get(key) ?? [], {
      topology: this.node.topology,
      nodePortIPs,
      nodeIPs: this.node.ips,
      affinitySupported: this.#o.affinitySupported,
      maglev: { tableSize: this.#maglev.tableSize, seed: this.#seed },
      log: this.log,
    });
  }

  /** Statements recreating a backends map sized for the book, with its lb chains (plus `fresh`). */
  #rebuildBackends(cluster: boolean, fresh: readonly NftName[]): string[] {
    const map = cluster ? BACKENDS_CLUSTER : BACKENDS;
    const chains = this.#dynamic.lbChains(cluster, fresh);
    const size = backendsSize(this.#book.size(map));
    this.#backendsSize.set(map, size);
    const inKernel = this.#dynamic.lbInKernel(cluster);
    const lines = backendsStatements(this.family, cluster, inKernel, chains, size, this.#seed);
    for (const c of chains) this.#dynamic.created(lbChainName(c));
    return lines;
  }

  /**
   * Before a full sync's transaction: makes the kernel's Maglev tables known, so that the
   * transaction carries only the slots that move. A table an earlier run left is read back; a new
   * one, which nothing reads yet, is written in transactions of its own of at most
   * {@linkcode MAGLEV_CHUNK_ELEMENTS} elements (a table is M elements, and nft's memory grows by
   * about 1.4 KiB per element it loads at once: 2.4 GiB for 100 tables of 16,381).
   */
  async #prepareMaglev(wants: readonly MaglevWant[], signal: AbortSignal): Promise<void> {
    const t = `${this.#fam} ${TABLE}`;
    let chunk: string[] = [];
    let elements = 0;
    const flush = async () => {
      if (chunk.length === 0) return;
      await this.#nft.apply([`add table ${t}`, ...chunk].join("\n") + "\n", signal);
      chunk = [];
      elements = 0;
    };
    for (const w of wants) {
      if (this.#maglev.holds(w.name)) continue;
      if (this.#dynamic.inKernel(w.name)) {
        // Left by an earlier run (its name carries its M, seed and hash): what it holds. When that
        // is incomplete, the sync's own transaction writes it whole.
        this.#maglev.adopt(w.name, await this.#nft.listElements(TABLE, w.name));
        continue;
      }
      if (elements + this.#maglev.tableSize > MAGLEV_CHUNK_ELEMENTS) await flush();
      chunk.push(...this.#maglev.statements(w));
      elements += this.#maglev.tableSize;
      this.#dynamic.created(w.name);
    }
    await flush();
  }

  /** Statements bringing the kernel's Maglev tables to `wants` (whole when new, else the slots that move). */
  #maglevStatements(wants: readonly MaglevWant[]): string[] {
    const lines: string[] = [];
    for (const w of wants) {
      lines.push(...this.#maglev.statements(w));
      this.#dynamic.created(w.name);
    }
    return lines;
  }

  async #buildFull(ctx: SyncContext, affinityDirty: Set<number>): Promise<string[]> {
    const existing = await this.#nft.listChains(TABLE);
    const lines: string[] = [];
    const t = `${this.#fam} ${TABLE}`;
    const ours = existing?.includes(LAYOUT_MARKER) === true;
    if (existing !== undefined && !ours) {
      this.log.info("Replacing a kube-proxy nftables table of another layout (upstream's nftables mode?)", {
        family: this.family,
      });
      lines.push(`add table ${t}`, `delete table ${t}`);
    }
    this.#dynamic.resetFromKernel(ours ? existing! : []);
    lines.push(...fixedLayout({
      family: this.family,
      masqueradeAll: this.#o.masqueradeAll,
      mark: masqueradeMark(this.#o.masqueradeBit, 8),
      local: this.node.localDetector,
      conntrackTCPLiberal: this.#o.conntrackTCPLiberal,
      serviceCIDRs: this.serviceCIDRs,
    }));
    this.#book.clear();
    this.#ports.clear();
    // A Maglev table is M elements (16,381 by default): one this process wrote to our table, which
    // no failure or drift has put in doubt since, is kept and brought up to date slot by slot.
    if (!ours) this.#maglev.clear();
    const nodePortIPs = this.#nodePortIPs();
    const began = new Set<NftName>();
    const maglev: MaglevWant[] = [];
    for (const key of [...ctx.services.keys()].sort()) {
      const pe = this.#elements(ctx, key, nodePortIPs);
      maglev.push(...pe.maglev);
      const uses = portUses(pe);
      this.#ports.set(key, uses);
      this.#dynamic.count(uses, 1, began);
      if (pe.affinityTimeout > 0) affinityDirty.add(pe.affinityTimeout);
      this.#warnConflicts(this.#book.fill(key, pe.elements));
    }
    for (const cluster of [false, true]) lines.push(...this.#rebuildBackends(cluster, []));
    for (const name of this.#dynamic.affinityInUse()) {
      lines.push(...affinityStatements(this.family, Number(name.slice("affinity-".length))));
      this.#dynamic.created(name);
    }
    if (ours || existing === undefined) await this.#prepareMaglev(maglev, ctx.signal);
    lines.push(...this.#maglevStatements(maglev));
    // Affinity chains no service uses any more: emptied now, deleted with their map once
    // unreferenced (unused lb chains were emptied by the backends rebuild).
    for (const name of this.#dynamic.unusedAffinity()) {
      lines.push(
        `flush chain ${t} ${name}`,
        `flush chain ${t} ${affinityRecordChain(Number(name.slice(9)))}`,
      );
    }
    for (const c of ELEMENT_CONTAINERS) {
      lines.push(...elementStatements(this.family, "add", c, this.#book.contents(c)));
    }
    return lines;
  }

  #buildPartial(ctx: SyncContext, affinityDirty: Set<number>): string[] {
    const touched: Touched = new Map();
    const began = new Set<NftName>();
    const nodePortIPs = this.#nodePortIPs();
    const maglev: MaglevWant[] = [];
    for (const key of ctx.changedPorts) {
      const old = this.#ports.get(key);
      if (old !== undefined) {
        this.#dynamic.count(old, -1, began);
        if (old.affinityTimeout > 0) affinityDirty.add(old.affinityTimeout);
      }
      const svc = ctx.services.get(key);
      if (svc === undefined) {
        this.#ports.delete(key);
        this.#book.replace(key, [], touched);
        continue;
      }
      const pe = this.#elements(ctx, key, nodePortIPs);
      maglev.push(...pe.maglev);
      const uses = portUses(pe);
      this.#ports.set(key, uses);
      this.#dynamic.count(uses, 1, began);
      if (pe.affinityTimeout > 0) affinityDirty.add(pe.affinityTimeout);
      this.#warnConflicts(this.#book.replace(key, pe.elements, touched));
    }
    const diff = this.#book.diff(touched);
    const lines: string[] = [];
    const rebuilt = new Set<NftName>();
    for (const cluster of [false, true]) {
      const map = cluster ? BACKENDS_CLUSTER : BACKENDS;
      const fresh = [...began].filter((n) =>
        parseLbChain(n)?.cluster === cluster && !this.#dynamic.inKernel(n)
      );
      const outgrown = this.#book.size(map) > (this.#backendsSize.get(map) ?? 0);
      if (fresh.length === 0 && !outgrown) continue;
      // A new endpoint count needs a new lb chain, and a full map a bigger one: either way the
      // whole backends map is rewritten.
      this.log.debug("Rewriting a backends map", { family: this.family, map, chains: fresh, outgrown });
      lines.push(...this.#rebuildBackends(cluster, fresh));
      rebuilt.add(map);
      lines.push(...elementStatements(this.family, "add", map, this.#book.contents(map)));
    }
    for (const name of [...began].sort()) {
      if (!name.startsWith("affinity-") || this.#dynamic.inKernel(name)) continue;
      lines.push(...affinityStatements(this.family, Number(name.slice("affinity-".length))));
      this.#dynamic.created(name);
    }
    // Before the elements: a new table's chain must exist when an @lb element names it.
    lines.push(...this.#maglevStatements(maglev));
    for (const [c, { del }] of diff) {
      if (!rebuilt.has(c)) lines.push(...elementStatements(this.family, "delete", c, del));
    }
    for (const [c, { add }] of diff) {
      if (!rebuilt.has(c)) lines.push(...elementStatements(this.family, "add", c, add));
    }
    return lines;
  }

  /**
   * Hands the loopback listeners what changed (everything on a full sync): each NodePort's
   * endpoints as external traffic has them. Ports that could not be opened are retried with backoff.
   */
  #syncLocalhost(ctx: SyncContext): void {
    const lo = this.localhost!;
    const keys = ctx.full ? ctx.services.keys() : ctx.changedPorts;
    const changes: Array<[string, LocalhostNodePort | undefined]> = [];
    for (const key of keys) {
      const svc = ctx.services.get(key);
      if (svc === undefined || svc.nodePort === 0) {
        if (!ctx.full) changes.push([key, undefined]);
        continue;
      }
      const cat = categorizeEndpoints(svc, ctx.endpoints.get(key) ?? [], this.node.topology);
      changes.push([key, {
        name: servicePortNameString(svc.name),
        protocol: svc.protocol,
        nodePort: svc.nodePort,
        endpoints: externalEndpoints(svc, cat).map((e) => e.key),
        stickyMaxAgeSeconds: svc.stickyMaxAgeSeconds,
      }]);
    }
    lo.sync(changes, ctx.full);
    this.#retry?.cancel();
    if (lo.unserved === 0) {
      this.#retry = undefined;
      return;
    }
    const ms = Math.min(this.#retry === undefined ? 1000 : 2 * this.#retry.ms, this.syncPeriodMs);
    this.#retry = { ms, cancel: this.clock.setTimer(() => this.sync(), ms) };
  }

  #warnConflicts(conflicts: string[]): void {
    for (const c of conflicts) {
      this.log.warn("Two services claim the same address and port; the first keeps it", {
        family: this.family,
        conflict: c,
      });
    }
  }
}
