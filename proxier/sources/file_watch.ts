/**
 * Following the file source's files: which changed, and when each may be read. A file is read only
 * once its writer has closed it (the kernel says so: inotify's close-after-write, Deno's `access`
 * event) or once it was renamed into place, never while a writer holds it open, however long the
 * writer pauses; a read that a new write overtook is taken again. The watch survives its directory
 * vanishing: it looks again until the directory is back.
 * @module
 */
import { type Clock, realClock } from "../runtime/clock.ts";
import { onAbort } from "../runtime/abort.ts";
import type { Logger } from "../runtime/logger.ts";

/** Editors write in bursts (truncate, write, close, rename): a closed path is read once it is quiet this long. */
export const SETTLE_MS = 100;
/** ...but no later than this after the first event, however busy the directory stays. */
export const MAX_SETTLE_MS = 1000;
/** How often a watch whose directory vanished looks for it again. */
export const REWATCH_MS = 1000;

/**
 * When to read what the watcher named: once the paths have been quiet for {@linkcode SETTLE_MS},
 * and never later than {@linkcode MAX_SETTLE_MS} after the first event of a burst.
 */
export class Settle {
  readonly #clock: Clock;
  readonly #fire: () => void;
  #cancel = () => {};
  #firstAt: number | undefined;

  /** `fire` runs when a burst has settled. */
  constructor(clock: Clock, fire: () => void) {
    this.#clock = clock;
    this.#fire = fire;
  }

  /** One watcher event. */
  event(): void {
    const now = this.#clock.now();
    this.#firstAt ??= now;
    this.#cancel();
    const latest = this.#firstAt + MAX_SETTLE_MS - now;
    this.#cancel = this.#clock.setTimer(() => {
      this.#firstAt = undefined;
      this.#fire();
    }, Math.min(SETTLE_MS, Math.max(0, latest)));
  }

  /** Drops a burst not yet settled. */
  stop(): void {
    this.#cancel();
    this.#firstAt = undefined;
  }
}

/** What the kernel said of each watched path since it was last read: changed, and whether a writer holds it. */
export class WriteTracker {
  /** Paths changed since they were last taken for a read. */
  readonly #pending = new Set<string>();
  /** Paths written (created or modified) and not closed since. */
  readonly #open = new Set<string>();
  /** Per path, how many events it had: a read taken at one count and finished at another was overtaken. */
  readonly #events = new Map<string, number>();

  /** Records one event of `kind` (Deno's `Deno.FsEvent` kinds) on `path`. */
  event(kind: Deno.FsEvent["kind"], path: string): void {
    this.#pending.add(path);
    this.#events.set(path, (this.#events.get(path) ?? 0) + 1);
    if (kind === "create" || kind === "modify") this.#open.add(path);
    // Closed after writing, renamed into place, or removed: whole (or gone).
    else if (kind === "access" || kind === "rename" || kind === "remove") this.#open.delete(path);
  }

  /** True while a writer holds `path` open (written, not yet closed). */
  isOpen(path: string): boolean {
    return this.#open.has(path);
  }

  /** The number of events `path` had so far; compare after a read to see whether one overtook it. */
  count(path: string): number {
    return this.#events.get(path) ?? 0;
  }

  /** Takes the changed paths no writer holds open (those held stay pending). */
  takeClosed(): string[] {
    const closed = [...this.#pending].filter((p) => !this.#open.has(p));
    for (const p of closed) this.#pending.delete(p);
    return closed;
  }

  /** Puts `path` back to be read again (its read was overtaken). */
  again(path: string): void {
    this.#pending.add(path);
  }

  /** True when changed paths wait (open or not). */
  get waiting(): boolean {
    return this.#pending.size > 0;
  }
}

/** What {@linkcode watchFiles} is given. */
export interface FileWatch {
  /** The directory to watch. */
  readonly dir: string;
  /** The source file an event's path names, if any. */
  readonly match: (path: string) => string | undefined;
  readonly signal: AbortSignal;
  readonly log: Logger;
  readonly clock?: Clock;
  /**
   * Called once a burst settled, one call at a time: `all` when the watch (re)started or lost
   * events (read everything), else the closed paths to read. `tracker` tells whether a write
   * overtook a read.
   */
  readonly onSettled: (paths: readonly string[] | "all", tracker: WriteTracker) => Promise<void>;
}

/**
 * Watches `dir` until `signal` aborts, calling `onSettled` as files are closed or replaced; when the
 * directory vanishes (the watch ends or cannot start) it looks again every {@linkcode REWATCH_MS}
 * and reads everything once it is back.
 */
export async function watchFiles(o: FileWatch): Promise<void> {
  const clock = o.clock ?? realClock;
  let said = false;
  while (!o.signal.aborted) {
    let watcher: Deno.FsWatcher;
    try {
      watcher = Deno.watchFs(o.dir, { recursive: false });
    } catch (e) {
      if (!said) {
        o.log.warn("Cannot watch the source directory; looking again", { dir: o.dir, error: String(e) });
      }
      said = true;
      await sleep(clock, REWATCH_MS, o.signal);
      continue;
    }
    if (said) o.log.info("Watching the source directory again", { dir: o.dir });
    said = false;
    await watchOnce(watcher, o, clock);
    if (!o.signal.aborted) await sleep(clock, REWATCH_MS, o.signal);
  }
}

/** One watcher's life: reads everything as it starts (edits before it made no event), then what changes. */
async function watchOnce(watcher: Deno.FsWatcher, o: FileWatch, clock: Clock): Promise<void> {
  const unregister = onAbort(o.signal, () => watcher.close());
  const tracker = new WriteTracker();
  let rescan = true;
  let reading = Promise.resolve();
  const read = () => {
    const all = rescan;
    rescan = false;
    const paths = all ? "all" : tracker.takeClosed();
    if (paths !== "all" && paths.length === 0) return;
    // Reads run one after another, so a slow read never races a newer one of the same file.
    reading = reading.then(() => o.onSettled(paths, tracker))
      .catch((e) => o.log.error("Reading source files failed", { error: String(e) }))
      .then(() => {
        if (tracker.waiting && !o.signal.aborted) settle.event();
      });
  };
  const settle = new Settle(clock, read);
  read();
  try {
    for await (const ev of watcher) {
      // The directory itself removed or moved away: this watch sees nothing more; a new one, once
      // the directory is back, reads everything.
      if ((ev.kind === "remove" || ev.kind === "rename") && ev.paths.some((p) => sameDir(p, o.dir))) break;
      if (ev.flag === "rescan") rescan = true;
      let ours = false;
      for (const p of ev.paths) {
        const f = o.match(p);
        if (f === undefined) continue;
        tracker.event(ev.kind, f);
        ours = true;
      }
      if (rescan || ours) settle.event();
    }
  } catch (e) {
    if (!o.signal.aborted) o.log.warn("The source directory's watch ended", { dir: o.dir, error: String(e) });
  } finally {
    settle.stop();
    unregister();
    try {
      watcher.close();
    } catch { /* closed already */ }
    await reading;
  }
}

/** True when event path `p` (absolute, as the watcher reports it) is directory `dir`. */
function sameDir(p: string, dir: string): boolean {
  const abs = dir.startsWith("/") ? dir : `${Deno.cwd()}/${dir.replace(/^\.(\/|$)/, "")}`;
  const trim = (x: string) => x.replace(/\/+$/, "");
  return trim(p) === trim(abs);
}

/** Resolves after `ms` on `clock`, or at once when `signal` aborts. */
function sleep(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    let unregister = () => {};
    const cancel = clock.setTimer(() => (unregister(), resolve()), ms);
    unregister = onAbort(signal, () => (cancel(), resolve()));
  });
}
