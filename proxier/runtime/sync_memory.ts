/**
 * The memory step that ends the syncs of a node's proxiers (one per IP family, sharing one heap):
 * a collection, then malloc's free memory back. A collection at scale holds the JavaScript thread
 * for hundreds of milliseconds, so it waits for every sync in flight to end: run while another
 * family's sync still writes its transactions, it would stall those writes and the kernel tools
 * waiting for them (a dual-stack start at 50,000 Services lost about 0.6 s of its first sync so).
 * A long sync is the exception: within it (a full build, a new table's load in parts), the heap is
 * collected once it grew enough.
 * @module
 */
import { collectGarbage, collectGarbageAfterSync, trimMalloc } from "./gc.ts";

/**
 * How often, at most, a sync ends by giving malloc's free memory back (malloc_trim). Each sync runs
 * kernel tools and reads the API server through buffers glibc allocates outside the V8 heap; freed,
 * they stay in malloc's arenas and RSS grows with a flat live heap. A trim costs about what it gives
 * back, so a few seconds between trims keeps it cheap under frequent syncs.
 */
export const TRIM_PERIOD_MS = 5_000;

/**
 * Heap growth since its low point over which {@linkcode SyncMemory.midSync} collects. A new table
 * of 50,000 Services x 10 endpoints grew the heap by 136 MiB while it loaded, its garbage (the
 * texts of the parts written, what the build left) collected by nothing until the sync ended: its
 * peak RSS was 528-580 MiB; 500-508 with this collection between its parts; 440-465 with it during
 * the build too, counted from the low point (the first sync's build then starts by collecting what
 * the lists left). At 50,000 x 1 that is one collection of about 130 ms early in the build; with a
 * limit of 64 MiB a second one, of 300 ms, held the parts back.
 */
export const MID_SYNC_GROWTH_BYTES = 96 * 2 ** 20;

/** What {@linkcode SyncMemory} runs; the defaults are the process's own (`runtime/gc.ts`). */
export interface MemorySteps {
  /** A thorough collection (after a full sync). */
  readonly thorough: () => void;
  /** A plain collection (between the parts of a long sync). */
  readonly ordinary: () => void;
  /** The heap in use, in bytes. */
  readonly heapUsed: () => number;
  /** A collection only when garbage piled up (after a partial sync). */
  readonly ifDue: () => void;
  /** Gives malloc's free memory back. */
  readonly trim: () => void;
}

/** The memory step of one node's syncs; one instance is shared by every family's proxier. */
export class SyncMemory {
  readonly #now: () => number;
  readonly #steps: MemorySteps;
  #lastTrim = -Infinity;
  #inFlight = 0;
  /** What runs at the next step, before its collection ({@linkcode afterSyncs}). */
  #tasks: Array<() => void> = [];
  /** A full sync ended since the last step (another may still be in flight): a thorough collection is owed. */
  #fullOwed = false;
  /**
   * The heap's low point: what the last collection of a step or of {@linkcode midSync} left (at
   * first, the heap in use when this was built), lowered by any smaller reading since.
   */
  #mark: number;

  /** `now` reads the clock; `steps` default to this process's collections and glibc's malloc_trim. */
  constructor(o: { now: () => number } & Partial<MemorySteps>) {
    this.#now = o.now;
    this.#steps = {
      thorough: o.thorough ?? (() => collectGarbage({ thorough: true })),
      ordinary: o.ordinary ?? (() => void collectGarbage()),
      heapUsed: o.heapUsed ?? (() => Deno.memoryUsage().heapUsed),
      ifDue: o.ifDue ?? (() => void collectGarbageAfterSync()),
      trim: o.trim ?? (() => void trimMalloc()),
    };
    this.#mark = this.#steps.heapUsed();
  }

  /**
   * Runs `sync` (resolving to whether it was a full sync that succeeded) and, once no other sync is
   * in flight, the memory step: a thorough collection when any full sync ended since the last one
   * (it leaves tens of MiB of garbage at scale, and a plain collection keeps the pages it frees
   * pooled, still resident: 78 MiB after a first sync at 50,000 Services x 10 endpoints), else a
   * collection only when due; then malloc's free memory back, at most every
   * {@linkcode TRIM_PERIOD_MS}. The step runs after `sync` has settled, so a full sync's collection
   * (hundreds of ms at scale) is no part of its time or its health; a failure is passed on after it.
   */
  async around(sync: () => Promise<boolean>): Promise<void> {
    this.#inFlight++;
    this.#read();
    let full = false;
    try {
      full = await sync();
    } finally {
      this.#inFlight--;
      this.#fullOwed ||= full;
      if (this.#inFlight === 0) this.#step();
    }
  }

  /**
   * Runs `task` once no sync is in flight, before the step's collection collects what it left: at
   * the end of the syncs running, or soon when none is. Work a sync leaves for later (the change
   * trackers taking the events the first sync read) so runs after every family's sync, outside
   * their time and their health, and never between another family's parts.
   */
  afterSyncs(task: () => void): void {
    this.#tasks.push(task);
    if (this.#inFlight === 0) queueMicrotask(() => this.#runTasks());
  }

  /**
   * At a point of a long sync where a collection may run (between the ports of a full build,
   * between the parts of a new table's load): a plain collection once the heap grew by
   * {@linkcode MID_SYNC_GROWTH_BYTES} since its low point (what the last collection of a step or of
   * this left, or less when seen since: V8's own collections). The growth counts from the low
   * point, not from the sync's start: a first sync begins on a heap full of what the lists left,
   * which would otherwise pile on until V8 collects it (at twice the live heap).
   */
  midSync(): void {
    if (this.#read() - this.#mark < MID_SYNC_GROWTH_BYTES) return;
    this.#steps.ordinary();
    this.#mark = this.#steps.heapUsed();
  }

  /** Returns the heap in use, lowering the low point to it. */
  #read(): number {
    const used = this.#steps.heapUsed();
    if (used < this.#mark) this.#mark = used;
    return used;
  }

  #runTasks(): void {
    if (this.#inFlight > 0) return;
    const tasks = this.#tasks;
    this.#tasks = [];
    for (const task of tasks) task();
  }

  #step(): void {
    this.#runTasks();
    if (this.#fullOwed) this.#steps.thorough();
    else this.#steps.ifDue();
    // A thorough collection leaves the live heap: growth counts from there, even when it is more
    // than the last low point (the table grew). A step that may not have collected only lowers it.
    if (this.#fullOwed) this.#mark = this.#steps.heapUsed();
    else this.#read();
    this.#fullOwed = false;
    if (this.#now() - this.#lastTrim >= TRIM_PERIOD_MS) {
      this.#lastTrim = this.#now();
      this.#steps.trim();
    }
  }
}
