/**
 * The nftables mode: the map-centric layout of `layout.ts`, written as one `nft -f -` transaction
 * per family per sync. A full sync (at start, after a failure, when the table vanished, and once an
 * hour) recreates the fixed layout and refills every set and map; a partial sync deletes and adds
 * only the elements of the service ports that changed. NodePorts on 127.0.0.1 / ::1, which no
 * nftables rule can serve, are served by a socket proxy when asked for (`localhost_feed.ts`).
 * @module
 */
import { type NFTables, NftError } from "../../iptables/nft.ts";
import { NftTransaction } from "../../iptables/nft_transaction.ts";
import { masqueradeMark } from "../_common/masquerade.ts";
import { BaseProxier, type SyncContext } from "../base_proxier.ts";
import type { BaseProxierOptions } from "../proxier_options.ts";
import type { Connection, DatapathAnswer, FamilyView } from "../family_view.ts";
import { localhostNodePortMetrics, nftablesMetrics } from "./metrics.ts";
import { ElementBook, type Touched } from "./element_book.ts";
import { generationElement } from "./sync_generation.ts";
import { commitSync } from "./commit.ts";
import { FreshStream } from "./fresh_load.ts";
import { nftablesDrift } from "./drift_check.ts";
import {
  affinityRecordChain,
  affinityTimeout,
  BACKENDS,
  BACKENDS_CLUSTER,
  ELEMENT_CONTAINERS,
  fixedLayout,
  foreignLayout,
  type NftName,
  SERVICE_IPS,
  TABLE,
} from "./layout.ts";
import { addAffinity, dropStalePins } from "./affinity.ts";
import { addBackends, BACKENDS_GROUP, backendsSize, lbChainName, parseLbChain } from "./backends.ts";
import { MaglevMaps, type MaglevWant } from "./maglev_maps.ts";
import { DEFAULT_MAGLEV_SEED, DEFAULT_MAGLEV_TABLE_SIZE } from "../../loadbalancer/maglev.ts";
import { DynamicChains, type PortUses, portUses } from "./dynamic_chains.ts";
import { type PortElements, portElements } from "./port_elements.ts";
import { LocalhostNodePorts, type LocalhostNodePortsOptions } from "../socket_proxy/localhost_node_ports.ts";
import { LocalhostFeed } from "./localhost_feed.ts";
import { prepareMaglevTables, writeMaglevTables } from "./maglev_prepare.ts";

/** Options of {@linkcode NftablesProxier}. */
export interface NftablesProxierOptions extends BaseProxierOptions {
  readonly nft: NFTables;
  readonly masqueradeAll: boolean;
  readonly masqueradeBit: number;
  /**
   * False when this family's nft cannot program ClientIP affinity (IPv6 on nft 1.0.6); the mode says
   * so on each Service that asks (`portNotice`).
   */
  readonly affinitySupported: boolean;
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
  /** Statements per part of a new table's load (`commit.ts`); default 64. */
  readonly freshChunkStatements?: number;
}

/** The nftables proxier; see the module doc. */
export class NftablesProxier extends BaseProxier {
  readonly #o: NftablesProxierOptions;
  readonly #nft: NFTables;
  readonly #book = new ElementBook(new Map([[BACKENDS, BACKENDS_GROUP], [BACKENDS_CLUSTER, BACKENDS_GROUP]]));
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
  /** Transactions applied (as far as nft said); the sync-generation set holds the last. */
  #generation = 0;
  /** The loopback NodePort listeners' feed, when they are served. */
  readonly #localhost?: LocalhostFeed;
  /** How a new table loads in parts (`commit.ts`). */
  readonly #parts: { nft: NFTables; chunkStatements?: number; betweenParts: () => void };
  /** Every transaction rewrites `sync-generation`: one fails whole on a table gone or another layout. */
  protected override readonly partialSyncFailsOnDrift = true;

  /** Builds the proxier; runs nothing until a sync. */
  constructor(o: NftablesProxierOptions) {
    super(o);
    this.#o = o;
    this.#nft = o.nft;
    this.#parts = {
      nft: o.nft,
      chunkStatements: o.freshChunkStatements,
      betweenParts: () => this.memory.midSync(),
    };
    this.#metrics = nftablesMetrics(this.registry, o.family);
    this.#dynamic = new DynamicChains({ ...o, cleanupFailures: this.#metrics.cleanupFailures });
    this.#seed = o.maglevSeed ?? DEFAULT_MAGLEV_SEED;
    this.#maglev = new MaglevMaps({
      family: o.family,
      tableSize: o.maglevTableSize ?? DEFAULT_MAGLEV_TABLE_SIZE,
      seed: this.#seed,
    });
    if (o.localhostNodePorts !== undefined) {
      this.#localhost = new LocalhostFeed({
        listeners: new LocalhostNodePorts({
          ...o.localhostNodePorts,
          family: o.family,
          log: o.log,
          clock: o.clock,
          metrics: localhostNodePortMetrics(this.registry, o.family),
        }),
        clock: o.clock,
        syncPeriodMs: o.syncPeriodMs,
        sync: () => this.sync(),
      });
    }
  }

  /** The loopback NodePort listeners, when served. */
  get localhost(): LocalhostNodePorts | undefined {
    return this.#localhost?.listeners;
  }

  /**
   * Where the loopback socket proxy sends `c` (`explain`): a NodePort on 127.0.0.1 / ::1 served
   * here; undefined for any other connection (the rules decide those).
   */
  localhostAnswer(c: Connection): DatapathAnswer | undefined {
    return this.#localhost?.answer(c);
  }

  /** Closes the loopback NodePort listeners (connections in flight finish) and the nft kept running; the kernel rules stay. */
  close(): void {
    this.#localhost?.close();
    void this.#nft.close?.();
  }

  /** The node's addresses of this family that answer NodePorts. */
  #nodePortIPs(): string[] {
    return this.node.nodePortAddresses().nodeIPs(this.node.ips);
  }

  /** @inheritdoc */
  protected override modeViewFacts(): Partial<FamilyView> {
    return {
      masqueradeAll: this.#o.masqueradeAll,
      loopbackNodePorts: this.#localhost !== undefined ? "socket" : "none",
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
    const tx = new NftTransaction(this.family, TABLE);
    // A table that did not exist: the transaction creating it may go in parts, begun by the build.
    let fresh: FreshStream | undefined;
    if (full) fresh = await this.#buildFull(tx, ctx, affinityDirty);
    else this.#buildPartial(tx, ctx, affinityDirty);
    if (tx.size > 0 || fresh?.load !== undefined) {
      // As nft lists a mark, so a listing reads back as sent.
      const generation = generationElement(this.#generation + 1, this.#o.writer);
      const elements = full ? this.#book.sources(ELEMENT_CONTAINERS) : undefined;
      await commitSync({ ...this.#parts, tx, generation, fresh, signal: ctx.signal, elements });
      this.#generation++;
    }
    // What no port uses any more goes a second later (the kernel may still see a deleted element
    // pointing at it), in the sync asked for then rather than the next periodic one.
    const deletable = this.#dynamic.markStale();
    if (deletable !== undefined) this.syncAfter(deletable);
    this.#localhost?.feed(ctx, this.node.topology);
    await dropStalePins({
      ...this.#o,
      book: this.#book,
      ports: this.#ports,
      inKernel: (name) => this.#dynamic.inKernel(name),
    }, affinityDirty);
    return full;
  }

  /** @inheritdoc (`drift_check.ts`) */
  protected override async detectDrift(thorough: boolean, signal?: AbortSignal): Promise<string | undefined> {
    const found = await nftablesDrift(
      {
        nft: this.#nft,
        generation: this.#generation,
        writer: this.#o.writer,
        serviceIPKeys: (count) => this.#book.window(SERVICE_IPS, count),
      },
      thorough,
      signal,
    );
    // The repair is a full sync: it writes the Maglev tables anew too.
    if (found !== undefined) this.#maglev.clear();
    return found;
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

  /**
   * Computes port `key`'s elements and records what they use: the port's dynamic names (counted into `began`), its affinity
   * timeout (`affinityDirty`) and its Maglev tables (`maglev`).
   */
  #takePort(
    ctx: SyncContext,
    key: string,
    nodePortIPs: string[],
    into: { began: Set<NftName>; affinityDirty: Set<number>; maglev: MaglevWant[] },
  ): PortElements {
    const svc = ctx.services.get(key)!;
    const pe = portElements(svc, ctx.endpoints.get(key) ?? [], {
      topology: this.node.topology,
      nodePortIPs,
      nodeIPs: this.node.ips,
      affinitySupported: this.#o.affinitySupported,
      maglev: { tableSize: this.#maglev.tableSize, seed: this.#seed },
      log: this.log,
    });
    into.maglev.push(...pe.maglev);
    const uses = portUses(pe);
    this.#ports.set(key, uses);
    this.#dynamic.count(uses, 1, into.began);
    if (pe.affinityTimeout > 0) into.affinityDirty.add(pe.affinityTimeout);
    return pe;
  }

  /** Recreates a backends map in `tx`, sized for the book (or `bound` elements), with its lb chains (plus `fresh`). */
  #rebuildBackends(tx: NftTransaction, cluster: boolean, fresh: readonly NftName[], bound?: number): void {
    const map = cluster ? BACKENDS_CLUSTER : BACKENDS;
    const chains = this.#dynamic.lbChains(cluster, fresh);
    const size = backendsSize(bound ?? this.#book.size(map));
    this.#backendsSize.set(map, size);
    const inKernel = this.#dynamic.lbInKernel(cluster);
    addBackends(tx, this.family, cluster, inKernel, chains, size, this.#seed);
    for (const c of chains) this.#dynamic.created(lbChainName(c));
  }

  /** Adds the affinity map of `name` (`affinity-T`) and its chains to `tx`. */
  #createAffinity(tx: NftTransaction, name: NftName): void {
    addAffinity(tx, affinityTimeout(name));
    this.#dynamic.created(name);
  }

  /** When the table did not exist, returns the stream that may have begun loading it (`fresh_load.ts`). */
  async #buildFull(
    tx: NftTransaction,
    ctx: SyncContext,
    dirty: Set<number>,
  ): Promise<FreshStream | undefined> {
    // A new table's layout goes to the nft kept running: started now, it is ready by then.
    this.#nft.warm?.();
    const existing = await this.#nft.listChains(TABLE);
    const foreign = existing === undefined ? undefined : foreignLayout(existing);
    if (foreign !== undefined) {
      this.log.info("Replacing the kube-proxy nftables table whole: another writer's layout", {
        family: this.family,
        reason: foreign,
      });
      tx.deleteTable();
    }
    const ours = existing !== undefined && foreign === undefined;
    this.#dynamic.resetFromKernel(ours ? existing.map((c) => c.name) : []);
    fixedLayout(tx, {
      family: this.family,
      masqueradeAll: this.#o.masqueradeAll,
      mark: masqueradeMark(this.#o.masqueradeBit, 8),
      local: this.node.localDetector,
      serviceCIDRs: this.serviceCIDRs,
    });
    this.#book.clear();
    this.#ports.clear();
    // A Maglev table is M elements (16,381 by default): one this process wrote to our table, which
    // no failure or drift has put in doubt since, is kept and brought up to date slot by slot.
    if (!ours) this.#maglev.clear();
    const nodePortIPs = this.#nodePortIPs();
    const backends = (t: NftTransaction, c: boolean, bound: number) => this.#rebuildBackends(t, c, [], bound);
    const stream = existing === undefined
      ? new FreshStream({ ...this.#parts, ...ctx, tx, book: this.#book, nodePortIPs, backends })
      : undefined;
    try {
      // A table sure to fill more than a part: its layout goes now, the lists' leavings collected after it.
      await stream?.begin();
      const began = new Set<NftName>();
      const maglev: MaglevWant[] = [];
      let ports = 0;
      for (const key of [...ctx.services.keys()].sort()) {
        const pe = this.#takePort(ctx, key, nodePortIPs, { began, affinityDirty: dirty, maglev });
        this.#warnConflicts(this.#book.fill(key, pe.elements));
        if (++ports % 256 !== 0) continue;
        // A first build starts on what the lists left: collected within it once the heap grew, as soon
        // as the load's lanes would not wait for it.
        if (stream?.pausable !== false) this.memory.midSync();
        await stream?.step();
      }
      if (!stream?.holdsBackends) {
        for (const cluster of [false, true]) this.#rebuildBackends(tx, cluster, []);
      }
      for (const name of this.#dynamic.affinityInUse()) this.#createAffinity(tx, name);
      if (ours || existing === undefined) {
        await prepareMaglevTables(
          { family: this.family, nft: this.#nft, maglev: this.#maglev, dynamic: this.#dynamic },
          maglev,
          ctx.signal,
        );
      }
      writeMaglevTables(tx, this.#maglev, this.#dynamic, maglev);
      // Affinity chains no service uses any more: emptied now, deleted with their map once
      // unreferenced (unused lb chains were emptied by the backends rebuild).
      for (const name of this.#dynamic.unusedAffinity()) {
        tx.flushChain(name).flushChain(affinityRecordChain(affinityTimeout(name)));
      }
    } catch (e) {
      await stream?.stop();
      throw e;
    }
    return stream;
  }

  #buildPartial(tx: NftTransaction, ctx: SyncContext, affinityDirty: Set<number>): void {
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
      const pe = this.#takePort(ctx, key, nodePortIPs, { began, affinityDirty, maglev });
      this.#warnConflicts(this.#book.replace(key, pe.elements, touched));
    }
    const diff = this.#book.diff(touched);
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
      this.#rebuildBackends(tx, cluster, fresh);
      rebuilt.add(map);
      tx.addElements(map, this.#book.texts(map));
    }
    for (const name of [...began].sort()) {
      if (name.startsWith("affinity-") && !this.#dynamic.inKernel(name)) this.#createAffinity(tx, name);
    }
    // Before the elements: a new table's chain must exist when an @lb element names it.
    writeMaglevTables(tx, this.#maglev, this.#dynamic, maglev);
    for (const [c, { del }] of diff) if (!rebuilt.has(c)) tx.deleteElements(c, del);
    for (const [c, { add }] of diff) if (!rebuilt.has(c)) tx.addElements(c, add);
  }

  #warnConflicts(conflicts: string[]): void {
    const msg = "Two services claim the same address and port; the first keeps it";
    for (const conflict of conflicts) this.log.warn(msg, { family: this.family, conflict });
  }
}
