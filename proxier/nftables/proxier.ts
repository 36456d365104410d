/**
 * The nftables mode: the map-centric layout of `layout.ts`, written as one `nft -f -` transaction
 * per family per sync. A full sync (at start, after a failure, when the table vanished, and once an
 * hour) recreates the fixed layout and refills every set and map; a partial sync deletes and adds
 * only the elements of the service ports that changed.
 * @module
 */
import { type NFTables, NftError, nftFamily } from "../../iptables/nft.ts";
import { masqueradeMark } from "../_common/masquerade.ts";
import { BaseProxier, type BaseProxierOptions, type SyncContext } from "../base_proxier.ts";
import { nftablesMetrics } from "./metrics.ts";
import { ElementBook, type Touched } from "./element_book.ts";
import {
  AFFINITY_CHECK,
  affinityName,
  affinityRecordChain,
  BACKENDS,
  BACKENDS_CLUSTER,
  DYNAMIC_CHAIN,
  ELEMENT_CONTAINERS,
  fixedLayout,
  LAYOUT_MARKER,
  lbChain,
  lbClusterChain,
  type NftName,
  SERVICE_IPS,
  SERVICES,
  SYNC_GENERATION,
  TABLE,
} from "./layout.ts";
import { affinityStatements } from "./affinity.ts";
import { backendsSize, backendsStatements, PRECREATED_LB_COUNTS } from "./backends.ts";
import { elementStatements, type PortElements, portElements } from "./port_elements.ts";

/** Options of {@linkcode NftablesProxier}. */
export interface NftablesProxierOptions extends BaseProxierOptions {
  readonly nft: NFTables;
  readonly masqueradeAll: boolean;
  readonly masqueradeBit: number;
  /** `--nodeport-addresses` as configured (`proxier/nodeport_addresses.ts` reads it). */
  readonly nodePortAddresses: readonly string[];
  /** False when this family's nft cannot program ClientIP affinity (IPv6 on nft 1.0.6). */
  readonly affinitySupported: boolean;
  /** `--conntrack-tcp-be-liberal`: INVALID packets are then not dropped, as upstream. */
  readonly conntrackTCPLiberal?: boolean;
}

/** How long a dynamic chain must have been unused before it is deleted (kernels before 6.2 may
 * still count a reference from a map element deleted in the previous transaction). */
const STALE_DELAY_MS = 1000;

/** The nftables proxier; see the module doc. */
export class NftablesProxier extends BaseProxier {
  readonly #o: NftablesProxierOptions;
  readonly #nft: NFTables;
  readonly #fam: "ip" | "ip6";
  readonly #book = new ElementBook();
  readonly #metrics: ReturnType<typeof nftablesMetrics>;
  /** Per service port key: the elements it contributed at the last sync. */
  /** What each port's elements use beyond the book (its elements themselves are the book's). */
  readonly #ports = new Map<string, PortUses>();
  /** Dynamic chain (or affinity map) name -> number of service ports using it. */
  readonly #uses = new Map<NftName, number>();
  /** The size each backends map was created with. */
  readonly #backendsSize = new Map<NftName, number>();
  /** Dynamic names the kernel holds, as far as the last successful sync knows. */
  #inKernel = new Set<NftName>();
  /** Dynamic names unused since the given time, deleted once {@linkcode STALE_DELAY_MS} passed. */
  readonly #stale = new Map<NftName, number>();
  readonly #warnedAffinity = new Set<string>();
  /** Transactions applied (as far as nft said); {@linkcode SYNC_GENERATION} holds the last. */
  #generation = 0;

  /** Builds the proxier; runs nothing until a sync. */
  constructor(o: NftablesProxierOptions) {
    super(o);
    this.#o = o;
    this.#nft = o.nft;
    this.#fam = nftFamily(o.family);
    this.#metrics = nftablesMetrics(this.registry, o.family);
  }

  /** The node's addresses of this family that answer NodePorts. */
  #nodePortIPs(): string[] {
    return this.node.nodePortAddresses(this.#o.nodePortAddresses).nodeIPs(this.node.ips);
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
    await this.#deleteStale();
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
    this.#markStale();
    await this.#dropStalePins(affinityDirty);
    return full;
  }

  /**
   * @inheritdoc
   * Cheap: the layout's marker chain (the table deleted, the ruleset flushed). Thorough: the
   * `services` chain's one rule (the table flushed) and the number of `service-ips` elements (one
   * deleted by hand).
   */
  protected override async detectDrift(thorough: boolean): Promise<string | undefined> {
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
    // Listing a chain makes nft read the whole table (1.2 s at 10,000 services): last, and off the
    // sync path.
    const rules = await this.#nft.countRules(TABLE, SERVICES);
    if (rules !== 1) return `chain ${SERVICES} holds ${rules ?? 0} rules, not 1 (table flushed?)`;
    return undefined;
  }

  /** @inheritdoc */
  protected override forgetKernelState(): void {
    // The book describes elements that never reached the kernel: the next sync is full.
    this.#book.clear();
    this.#ports.clear();
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
      log: this.log,
    });
  }

  /** Adds (+1) or removes (-1) a port's uses of dynamic chains; notes names whose use began. */
  #count(uses: PortUses, delta: 1 | -1, began: Set<NftName>): void {
    for (const n of uses.chains) {
      const next = (this.#uses.get(n) ?? 0) + delta;
      if (next <= 0) this.#uses.delete(n);
      else this.#uses.set(n, next);
      if (delta > 0 && next === 1) began.add(n);
    }
  }

  /** The endpoint counts whose `lb-N` (`lbc-N`) chains a rebuild of that backends map writes. */
  #lbCounts(cluster: boolean, extra: Iterable<NftName> = []): number[] {
    const prefix = cluster ? "lbc-" : "lb-";
    const counts = new Set(PRECREATED_LB_COUNTS);
    for (const name of [...this.#uses.keys(), ...extra]) {
      if (name.startsWith(prefix)) counts.add(Number(name.slice(prefix.length)));
    }
    return [...counts].sort((a, b) => a - b);
  }

  /** Dynamic names in the kernel that read `@backends` (`@backends-cluster` with `cluster`). */
  #lbInKernel(cluster: boolean): NftName[] {
    return [...this.#inKernel].filter((n) => n.startsWith(cluster ? "lbc-" : "lb-"));
  }

  /** Statements recreating a backends map sized for the book, with its lb chains (plus `fresh`). */
  #rebuildBackends(cluster: boolean, fresh: readonly NftName[]): string[] {
    const map = cluster ? BACKENDS_CLUSTER : BACKENDS;
    const counts = this.#lbCounts(cluster, fresh);
    const size = backendsSize(this.#book.size(map));
    this.#backendsSize.set(map, size);
    const lines = backendsStatements(this.family, cluster, this.#lbInKernel(cluster), counts, size);
    for (const n of counts) this.#inKernel.add(cluster ? lbClusterChain(n) : lbChain(n));
    return lines;
  }

  /** Whether dynamic name `name` must stay: used by a port, or a precreated lb chain. */
  #needed(name: NftName): boolean {
    if (this.#uses.has(name)) return true;
    const m = DYNAMIC_CHAIN.exec(name);
    return m !== null && (m[1] === "lb" || m[1] === "lbc") && PRECREATED_LB_COUNTS.includes(Number(m[2]));
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
    // affinity-record-T chains go with their affinity-T: only the latter is tracked.
    this.#inKernel = new Set(
      ours ? existing!.filter((n) => DYNAMIC_CHAIN.test(n) && !n.includes("-record-")) : [],
    );
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
    this.#uses.clear();
    const nodePortIPs = this.#nodePortIPs();
    const began = new Set<NftName>();
    for (const key of [...ctx.services.keys()].sort()) {
      const pe = this.#elements(ctx, key, nodePortIPs);
      const uses = portUses(pe);
      this.#ports.set(key, uses);
      this.#count(uses, 1, began);
      if (pe.affinityTimeout > 0) affinityDirty.add(pe.affinityTimeout);
      this.#warnConflicts(this.#book.fill(key, pe.elements));
    }
    for (const cluster of [false, true]) lines.push(...this.#rebuildBackends(cluster, []));
    for (const name of [...this.#uses.keys()].filter((n) => n.startsWith("affinity-")).sort()) {
      lines.push(...affinityStatements(this.family, Number(name.slice("affinity-".length))));
      this.#inKernel.add(name);
    }
    // Affinity chains no service uses any more: emptied now, deleted with their map once
    // unreferenced (unused lb chains were emptied by the backends rebuild).
    for (const name of this.#inKernel) {
      if (!this.#needed(name) && name.startsWith("affinity-")) {
        lines.push(
          `flush chain ${t} ${name}`,
          `flush chain ${t} ${affinityRecordChain(Number(name.slice(9)))}`,
        );
      }
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
    for (const key of ctx.changedPorts) {
      const old = this.#ports.get(key);
      if (old !== undefined) {
        this.#count(old, -1, began);
        if (old.affinityTimeout > 0) affinityDirty.add(old.affinityTimeout);
      }
      const svc = ctx.services.get(key);
      if (svc === undefined) {
        this.#ports.delete(key);
        this.#book.replace(key, [], touched);
        continue;
      }
      const pe = this.#elements(ctx, key, nodePortIPs);
      const uses = portUses(pe);
      this.#ports.set(key, uses);
      this.#count(uses, 1, began);
      if (pe.affinityTimeout > 0) affinityDirty.add(pe.affinityTimeout);
      this.#warnConflicts(this.#book.replace(key, pe.elements, touched));
    }
    const diff = this.#book.diff(touched);
    const lines: string[] = [];
    const rebuilt = new Set<NftName>();
    for (const cluster of [false, true]) {
      const map = cluster ? BACKENDS_CLUSTER : BACKENDS;
      const fresh = [...began].filter((n) =>
        n.startsWith(cluster ? "lbc-" : "lb-") && !this.#inKernel.has(n)
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
      if (!name.startsWith("affinity-") || this.#inKernel.has(name)) continue;
      lines.push(...affinityStatements(this.family, Number(name.slice("affinity-".length))));
      this.#inKernel.add(name);
    }
    for (const [c, { del }] of diff) {
      if (!rebuilt.has(c)) lines.push(...elementStatements(this.family, "delete", c, del));
    }
    for (const [c, { add }] of diff) {
      if (!rebuilt.has(c)) lines.push(...elementStatements(this.family, "add", c, add));
    }
    return lines;
  }

  #warnConflicts(conflicts: string[]): void {
    for (const c of conflicts) {
      this.log.warn("Two services claim the same address and port; the first keeps it", {
        family: this.family,
        conflict: c,
      });
    }
  }

  /** Notes dynamic names no service needs now; names needed again are no longer stale. */
  #markStale(): void {
    const now = this.clock.now();
    for (const name of this.#inKernel) {
      if (this.#needed(name)) this.#stale.delete(name);
      else if (!this.#stale.has(name)) this.#stale.set(name, now);
    }
  }

  /** Deletes dynamic chains (and affinity maps) unused for long enough, in their own transaction. */
  async #deleteStale(): Promise<void> {
    const due = [...this.#stale].filter(([n, at]) =>
      !this.#uses.has(n) && this.clock.now() - at >= STALE_DELAY_MS
    )
      .map(([n]) => n);
    if (due.length === 0) return;
    const t = `${this.#fam} ${TABLE}`;
    const lines: string[] = [];
    for (const name of due) {
      const m = DYNAMIC_CHAIN.exec(name)!;
      if (m[1] === "affinity") {
        const rec = affinityRecordChain(Number(m[2]));
        lines.push(`add chain ${t} ${rec}`, `delete chain ${t} ${rec}`, `add chain ${t} ${name}`);
        lines.push(`delete chain ${t} ${name}`, `delete map ${t} ${name}`);
      } else lines.push(`add chain ${t} ${name}`, `delete chain ${t} ${name}`);
    }
    try {
      await this.#nft.apply(lines.join("\n") + "\n");
      for (const n of due) {
        this.#stale.delete(n);
        this.#inKernel.delete(n);
      }
      this.log.debug("Deleted unused nftables chains", { family: this.family, chains: due.length });
    } catch (e) {
      this.#metrics.cleanupFailures.inc();
      this.log.warn("Cannot delete unused nftables chains; will retry", {
        family: this.family,
        error: (e as Error).message,
      });
    }
  }

  /**
   * Deletes affinity pins that lead nowhere valid any more (an endpoint removed from the entry, or
   * the entry gone), so a pinned client is balanced afresh instead of sent to a dead endpoint.
   * Each deletion is preceded by an `add` of the same key so that a pin expiring meanwhile cannot
   * fail the transaction.
   */
  async #dropStalePins(timeouts: ReadonlySet<number>): Promise<void> {
    for (const timeout of timeouts) {
      const map = affinityName(timeout);
      if (!this.#inKernel.has(map)) continue;
      const valid = new Map<string, Set<string>>();
      for (const [port, uses] of this.#ports) {
        if (uses.affinityTimeout !== timeout) continue;
        for (const c of this.#book.claimsOf(port)) {
          if (c.container !== BACKENDS && c.container !== BACKENDS_CLUSTER) continue;
          const entry = c.key.slice(0, c.key.lastIndexOf(" . "));
          let set = valid.get(entry);
          if (set === undefined) valid.set(entry, set = new Set());
          // A backend's text is `key : ip . port`.
          set.add(c.text.slice(c.key.length + 3));
        }
      }
      const stale: string[] = [];
      let pins;
      try {
        pins = await this.#nft.listElements(TABLE, map);
      } catch (e) {
        this.log.warn("Cannot list affinity pins", { family: this.family, map, error: (e as Error).message });
        continue;
      }
      for (const p of pins) {
        const entry = p.key.slice(1).join(" . ");
        const endpoint = p.value.join(" . ");
        const checked = this.#book.effective(AFFINITY_CHECK, entry) !== undefined;
        if (!checked || !valid.get(entry)?.has(endpoint)) stale.push(`${p.key.join(" . ")} : ${endpoint}`);
      }
      if (stale.length === 0) continue;
      const t = `${this.#fam} ${TABLE}`;
      const lines: string[] = [];
      for (let i = 0; i < stale.length; i += 500) {
        const chunk = stale.slice(i, i + 500);
        lines.push(
          `add element ${t} ${map} { ${chunk.map((s) => s.replace(" : ", " timeout 1s : ")).join(", ")} }`,
        );
        lines.push(
          `delete element ${t} ${map} { ${chunk.map((s) => s.slice(0, s.indexOf(" : "))).join(", ")} }`,
        );
      }
      try {
        await this.#nft.apply(lines.join("\n") + "\n");
        this.log.debug("Dropped stale affinity pins", { family: this.family, map, pins: stale.length });
      } catch (e) {
        this.log.warn("Cannot drop stale affinity pins", {
          family: this.family,
          map,
          error: (e as Error).message,
        });
      }
    }
  }
}

/** What a port's elements use beyond the book: the dynamic chains they jump to, their affinity timeout. */
interface PortUses {
  readonly chains: readonly NftName[];
  readonly affinityTimeout: number;
}

/** Returns what `pe` uses beyond its elements (kept per port in place of them). */
function portUses(pe: PortElements): PortUses {
  return {
    chains: [
      ...[...pe.lbCounts].map(lbChain),
      ...[...pe.lbClusterCounts].map(lbClusterChain),
      ...(pe.affinityTimeout > 0 ? [affinityName(pe.affinityTimeout)] : []),
    ],
    affinityTimeout: pe.affinityTimeout,
  };
}
