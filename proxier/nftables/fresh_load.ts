/**
 * A new table's load in parts (`commit.ts` says why a new table may go in parts), which may begin
 * while its first sync is still being built: the layout first, without the rules of its hooked
 * chains, then element parts in {@linkcode FRESH_LANES} lanes, then those rules. The elements whose
 * values name only chains of the fixed layout (cluster IPs, service IPs, no-endpoint verdicts,
 * firewall and hairpin entries) are final as soon as the build claims them (a full build only
 * adds, and a key's first claim stays its effective one), so {@linkcode FreshStream} hands them to
 * the lanes while the build goes on: the kernel loads them on another core while the rest is
 * computed. So do the load-balancing and backends elements when the backends maps and every lb
 * chain their values can name can be written with the layout (`precreatedBackendsBound`); else
 * they wait for the build's end, which sizes those maps and creates the chains. Affinity waits too.
 * A table sure to fill more than a part loads its layout as the build begins, and its first parts
 * are small: the lanes work from the start of the build, not from when a whole part is ready (a
 * third of the way through it at 50,000 Services of one endpoint).
 * @module
 */
import type { NFTables } from "../../iptables/nft.ts";
import {
  ELEMENTS_PER_STATEMENT,
  type NftElementSource,
  NftTransaction,
} from "../../iptables/nft_transaction.ts";
import type { ElementBook, ElementReader } from "./element_book.ts";
import type { EndpointsMap, ServicePortMap } from "../model/types.ts";
import { precreatedBackendsBound } from "./backends.ts";
import { BALANCING_CONTAINERS, FIXED_VERDICT_CONTAINERS, type NftName } from "./layout.ts";
import { yieldToIO } from "../runtime/yield_to_io.ts";

/** `add element` statements (of up to 1,000 elements each) in one transaction of a new table. */
export const FRESH_CHUNK_STATEMENTS = 64;

/**
 * Statements per transaction of a lane that keeps its nft running (`NFTables.lane`): nft parses
 * part after part in memory it already has, where each `nft -f` takes its memory fresh. At 50,000
 * Services of 10 endpoints, transactions of 4 or 8 statements through two `nft -i` took 7.0-7.5
 * CPU-s and 38,000-62,000 page faults, one `nft -f` of the whole transaction 11.6 CPU-s and
 * 343,000; at 50,000 Services of one endpoint, transactions of 32 statements took 1.9x the faults
 * of 8.
 */
export const LANE_STATEMENTS = 8;

/**
 * Element transactions of a new table run at once: one parses while another's is in the kernel;
 * each more adds an nft's memory, and the kernel takes one transaction at a time.
 */
export const FRESH_LANES = 2;

/**
 * Returns the statements per part for `statements` left to load once the build has ended: at most
 * `chunk`, in a number of parts that is a multiple of the lanes, as even as whole statements allow.
 * The lanes then end together: split at `chunk`, the last two parts may be a whole one and a
 * remnant, and the sync waits for the one lane still loading (at 50,000 Services, 64 statements
 * beside 8: a third of a second with the other lane idle).
 */
export function evenPartStatements(statements: number, chunk: number): number {
  const rounds = Math.max(1, Math.ceil(statements / (chunk * FRESH_LANES)));
  return Math.max(1, Math.ceil(statements / (rounds * FRESH_LANES)));
}

/** Options of {@linkcode FreshLoad}. */
export interface FreshLoadOptions {
  readonly nft: NFTables;
  readonly signal?: AbortSignal;
  /** Runs after each element part is in, before its lane takes another. */
  readonly betweenParts?: () => void;
}

/**
 * The lanes of one new table's load; see the module doc. Construction runs nothing; {@linkcode start}
 * applies the layout, {@linkcode finish} the rest. Every nft it starts has ended when
 * {@linkcode finish} or {@linkcode stop} settles.
 */
export class FreshLoad {
  readonly #nft: NFTables;
  readonly #between: () => void;
  readonly #stop = new AbortController();
  readonly #signal: AbortSignal;
  /**
   * Parts handed over and not taken by a lane yet, as their statements; first, what is left of one
   * a lane took a piece of.
   */
  readonly #queue: Array<readonly string[]> = [];
  /** Parts written as a lane asks for them, once the build is done. */
  readonly #later: Iterator<NftTransaction>[] = [];
  #closed = false;
  /** Lanes waiting for a part. */
  #waiting: Array<() => void> = [];
  #running = 0;
  #failure: { error: unknown } | undefined;
  #lanes: Promise<void> | undefined;
  /** The layout's transaction, once {@linkcode start} ran. */
  #layout: Promise<void> | undefined;
  #hooks: NftTransaction | undefined;

  /** Builds the load; starts nothing. */
  constructor(o: FreshLoadOptions) {
    this.#nft = o.nft;
    this.#between = o.betweenParts ?? (() => {});
    this.#signal = o.signal === undefined
      ? this.#stop.signal
      : AbortSignal.any([o.signal, this.#stop.signal]);
  }

  /** Whether {@linkcode start} ran. */
  get started(): boolean {
    return this.#lanes !== undefined;
  }

  /** The rules of the hooked chains, held back until every element is in (after {@linkcode start}). */
  get hooks(): NftTransaction | undefined {
    return this.#hooks;
  }

  /** Whether a lane would take a part handed over now at once (and none failed). */
  get wanting(): boolean {
    return this.started && this.#failure === undefined && this.#queue.length === 0 &&
      this.#running < FRESH_LANES;
  }

  /** Whether an nft of this load is running: its input is written, and its end seen, only as the thread yields. */
  get busy(): boolean {
    return this.#running > 0;
  }

  /**
   * Applies `layout` (a new table's statements but its elements and hooked chains' rules, which
   * `hooks` holds) and starts the lanes, whose parts wait for it.
   */
  start(layout: string, hooks: NftTransaction): void {
    this.#hooks = hooks;
    this.#running++;
    this.#layout = this.#nft.apply(layout, this.#signal).finally(() => this.#running--);
    const applied = this.#layout;
    this.#lanes = Promise.all(Array.from({ length: FRESH_LANES }, () => this.#lane(applied))).then(() => {});
  }

  /** Hands `part` to the lanes (after {@linkcode start}). */
  send(part: NftTransaction): void {
    this.#queue.push(part.statements());
    this.#wake();
  }

  /**
   * Applies `tx` (the statements the build's end added: what the remaining parts need), then the
   * parts of `later`, in order, as lanes are free for them; resolves once every part is in.
   * Rejects with the first failure once every nft of the load has ended (what is in stays: the
   * next sync, full, rewrites the table in one transaction).
   */
  async finish(tx: NftTransaction, later: Iterator<NftTransaction>[]): Promise<void> {
    try {
      // The layout first: `tx` adds to the table it creates.
      await this.#layout;
      if (tx.size > 0 && this.#failure === undefined) await this.#nft.apply(tx.text(), this.#signal);
    } catch (error) {
      this.#fail(error);
    }
    this.#later.push(...later);
    this.#closed = true;
    this.#wake();
    await this.#lanes;
    if (this.#failure !== undefined) throw this.#failure.error;
  }

  /** Stops the load: no part starts, those running are stopped; resolves once every nft has ended. */
  async stop(): Promise<void> {
    this.#fail(new Error("the new table's load was stopped"));
    this.#closed = true;
    this.#wake();
    await this.#lanes;
  }

  #wake(): void {
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const resolve of waiting) resolve();
  }

  #fail(error: unknown): void {
    this.#failure ??= { error };
    this.#stop.abort();
  }

  /**
   * Returns the next statements a lane applies, at most `most` of them: the first queued part's or,
   * with none queued, the next later part's, what is left of it going first in the queue for
   * whichever lane is free next. A part is element statements alone, into a table no hook reaches
   * yet: it need not be one transaction, nor go through one lane. Taken whole, a part kept its lane
   * loading after the other had ended (at 50,000 Services of one endpoint, 0.3 s with one core idle).
   */
  #take(most: number): readonly string[] | undefined {
    let part = this.#queue.shift();
    while (part === undefined && this.#later.length > 0) {
      const n = this.#later[0].next();
      if (!n.done) part = n.value.statements();
      else this.#later.shift();
    }
    if (part === undefined || part.length <= most) return part;
    this.#queue.unshift(part.slice(most));
    return part.slice(0, most);
  }

  async #lane(layout: Promise<void>): Promise<void> {
    // Its nft starts beside the layout's transaction, ready for a part once the layout is in.
    const lane = this.#nft.lane?.();
    try {
      try {
        await layout;
      } catch (error) {
        this.#fail(error);
        return;
      }
      while (this.#failure === undefined) {
        // A kept nft takes a transaction at a time; one started for each takes a whole part.
        const part = this.#take(lane === undefined ? Infinity : LANE_STATEMENTS);
        if (part === undefined) {
          if (this.#closed) return;
          await new Promise<void>((resolve) => this.#waiting.push(resolve));
          continue;
        }
        this.#running++;
        try {
          if (lane === undefined) await this.#nft.apply(part, this.#signal);
          else await lane.apply(part, this.#signal);
          this.#between();
        } catch (error) {
          this.#fail(error);
        } finally {
          this.#running--;
        }
      }
    } finally {
      await lane?.close();
    }
  }
}

/**
 * Hands a new table's finished elements to its load while the build goes on. {@linkcode step} runs
 * between the build's ports; {@linkcode rest} gives the commit what is left.
 */
export class FreshStream {
  readonly #tx: NftTransaction;
  readonly #load: FreshLoad;
  readonly #chunk: number;
  readonly #readers: ReadonlyMap<NftName, ElementReader>;
  /** Writes the backends maps and their lb chains into the layout, when every chain is known before the build ends. */
  readonly #backends?: (tx: NftTransaction) => void;
  /** The table is sure to fill more than a part: the load starts with the build, its first parts small. */
  readonly #early: boolean;
  /** Parts handed over so far. */
  #sent = 0;
  /** Lets the thread pause (a collection), when the lanes would not wait for it. */
  readonly #pause?: () => void;

  /**
   * `tx`: the sync's transaction, holding the new table's layout; `book`: the one the build fills;
   * `chunkStatements`: statements per part (default {@linkcode FRESH_CHUNK_STATEMENTS});
   * `backends` writes a backends map (`cluster`: the cluster one) sized for `bound` elements with its
   * lb chains, when the ports of `services` (with `endpoints`; `nodePortIPs` answer NodePorts) can
   * need no chain but precreated ones (`precreatedBackendsBound`): their maps are then written
   * with the layout and their elements handed over too. Starts nothing.
   */
  constructor(
    o: FreshLoadOptions & {
      tx: NftTransaction;
      book: ElementBook;
      chunkStatements?: number;
      services?: ServicePortMap;
      endpoints?: EndpointsMap;
      nodePortIPs?: readonly string[];
      backends?: (tx: NftTransaction, cluster: boolean, bound: number) => void;
    },
  ) {
    this.#tx = o.tx;
    this.#pause = o.betweenParts;
    this.#load = new FreshLoad({
      ...o,
      betweenParts: () => {
        if (this.pausable) this.#pause?.();
      },
    });
    this.#chunk = o.chunkStatements ?? FRESH_CHUNK_STATEMENTS;
    const write = o.backends;
    const bound = write && o.services && o.endpoints &&
      precreatedBackendsBound(o.services, o.endpoints, o.nodePortIPs?.length ?? 0);
    if (write && bound) this.#backends = (tx) => (write(tx, false, bound[0]), write(tx, true, bound[1]));
    const streamed = [
      ...FIXED_VERDICT_CONTAINERS,
      ...(this.#backends === undefined ? [] : BALANCING_CONTAINERS),
    ];
    this.#readers = new Map(streamed.map((c) => [c, o.book.reader(c)]));
    // Each port makes two elements at least, its entry and its lb or no-endpoint verdict (ports on
    // one key share them, rarely: a table that still fits a part then only takes a few more nft runs).
    this.#early = 2 * (o.services?.size ?? 0) >= this.#chunk * ELEMENTS_PER_STATEMENT;
  }

  /**
   * Whether the thread may pause here (a collection) without holding the lanes back: before the load
   * begins, and once its parts are a quarter of a whole one or more. Not while the first, smallest
   * parts are in flight: the lanes then wait on the thread to be handed the next (at 50,000 Services
   * of one endpoint a collection of 0.15-0.2 s there kept them idle that long); a quarter part is
   * about as long work for a lane as the pause. The one pause with the layout in flight is
   * {@linkcode begin}'s, before any part is ready.
   */
  get pausable(): boolean {
    return !this.#load.started || 4 * this.#partSize() >= this.#chunk;
  }

  /** Whether the load created the backends maps and their lb chains (the build's end must not). */
  get holdsBackends(): boolean {
    return this.#load.started && this.#backends !== undefined;
  }

  /** The load, once a part went to it (its layout applied). */
  get load(): FreshLoad | undefined {
    return this.#load.started ? this.#load : undefined;
  }

  /**
   * Between ports: while a part is in flight, lets the thread's I/O run (its input written, its end
   * seen); when a lane is free and a part of finished elements is ready, hands it over (the first
   * starts the load with the layout `tx` holds, which `tx` then forgets; on a table sure to fill
   * more than a part, the first step starts it, and the first parts are small).
   */
  async step(): Promise<void> {
    if (this.#load.busy) await yieldToIO();
    if (this.#load.started && !this.#load.wanting) return;
    if (this.#early && !this.#load.started) this.#start();
    const size = this.#partSize();
    const ready = this.#sources();
    if (NftTransaction.statementsOf(ready) < size) return;
    if (!this.#load.started) this.#start();
    // The first part of whole statements: its readers move on by exactly what it holds.
    this.#load.send(this.#tx.elementParts(ready, size).next().value!);
    this.#sent++;
  }

  /**
   * The build's first step: on a table sure to fill more than a part, sends the layout, then lets
   * the thread pause (`betweenParts`: a collection of what the lists left) while nft loads it, before
   * any part is ready. A pause before the layout holds the lanes back that long; one left for
   * {@linkcode pausable} waits for parts of a quarter of a whole one, the heap growing meanwhile (at
   * 50,000 Services of 10 endpoints, a peak 40 MiB higher: 483-488 MiB against 441-450).
   */
  async begin(): Promise<void> {
    await this.step();
    if (this.#load.started) this.#pause?.();
  }

  /** Stops the load (a build that failed): resolves once every nft of it has ended. */
  stop(): Promise<void> {
    return this.#load.stop();
  }

  /** Returns `elements` (the book's, by container) less what the load was handed, for the commit to write. */
  rest(elements: readonly NftElementSource[]): NftElementSource[] {
    return elements.map((e) => {
      const reader = this.#readers.get(e.container);
      if (reader === undefined || !this.#load.started) return e;
      return { container: e.container, count: reader.pending(), texts: reader.texts() };
    });
  }

  /** Starts the load with the layout `tx` holds, which `tx` then forgets. */
  #start(): void {
    this.#backends?.(this.#tx);
    const { hooks } = this.#tx.splitForNewTable(this.#chunk);
    this.#load.start(this.#tx.text(), hooks);
    this.#tx.clear();
  }

  /**
   * Statements of the next part: when the load starts with the build, a sixteenth of a part first,
   * doubling up to a whole one (each nft run costs a few ms, so the parts grow once the lanes are
   * busy); else a whole one.
   */
  #partSize(): number {
    return this.#early ? Math.max(1, this.#chunk >> Math.max(0, 4 - this.#sent)) : this.#chunk;
  }

  /** What is ready of each container, in whole statements: a part of many containers' remnants would hold few elements. */
  #sources(): NftElementSource[] {
    return [...this.#readers].map(([container, r]) => {
      const count = r.pending() - r.pending() % ELEMENTS_PER_STATEMENT;
      return { container, count, texts: r.texts(count) };
    });
  }
}
