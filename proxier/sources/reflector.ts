/**
 * One kind's list-and-watch loop (client-go's reflector and store in one): lists, then watches
 * from the list's resourceVersion, and keeps each object the source holds (or only what its
 * handlers need of it later: {@linkcode ReflectorOptions.retain}). It
 * replaces client-node's `ListWatch`, whose module graph (its serializer, every generated model
 * and an HTTP client this program does not use) costs tens of MiB of resident memory before any
 * object.
 * @module
 */
import type { KubernetesListObject, KubernetesObject } from "@kubernetes/client-node";
import type { Clock } from "../runtime/clock.ts";
import { objectKey } from "./handlers.ts";

/** Receives a list's items a batch at a time, in the list's order, as they are parsed. */
export type ItemSink<T> = (items: readonly T[]) => void;

/** Reconnects after a watch that ended cleanly wait this long, doubling up to {@linkcode RECONNECT_MAX_MS}. */
export const RECONNECT_START_MS = 1000;
/** The longest wait before a clean reconnect. */
export const RECONNECT_MAX_MS = 30_000;

/** Starts a watch (client-node's `Watch.watch` signature, as {@linkcode ApiClient.watch}). */
export interface Watcher {
  watch(
    path: string,
    query: Record<string, unknown>,
    callback: (phase: string, object: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController>;
}

/** What a {@linkcode Reflector} reports. */
export interface ReflectorHandlers<T> {
  add(o: T): void;
  /** `old`: what the reflector retained of the object ({@linkcode ReflectorOptions.retain}). */
  update(old: T, o: T): void;
  /**
   * `o`: the object as the watch's DELETED event gave it (its last state), or, for an object a
   * relist no longer holds, what the reflector retained of it.
   */
  delete(o: T): void;
  /** A list's objects were all delivered (adds, updates, and deletes of what it no longer holds). */
  listed(): void;
  /** A list or watch failed for a reason other than 410 Gone or inactivity; the reflector stopped. */
  error(e: unknown): void;
}

/** Options of {@linkcode Reflector}. */
export interface ReflectorOptions<T extends KubernetesObject> {
  readonly path: string;
  readonly query: Readonly<Record<string, string | undefined>>;
  /**
   * Lists the kind. Items may come through `sink` a batch at a time while the list is on its way
   * (the reflector hands each over at once), in the resolved list's `items`, or both.
   */
  readonly list: (sink: ItemSink<T>) => Promise<KubernetesListObject<T>>;
  readonly watcher: Watcher;
  readonly handlers: ReflectorHandlers<T>;
  readonly clock: Clock;
  /**
   * What to keep of each object after its handler ran (default: all of it). A kind whose handlers
   * read only the new object keeps a stub that still names it: the change trackers hold what the
   * proxy uses, so a second whole copy would only cost memory (and grow with every annotation).
   */
  readonly retain?: (o: T) => T;
}

/** The HTTP status in a watch or list failure, or in an ERROR event's Status object. */
function statusOf(e: unknown): number | undefined {
  const x = e as { statusCode?: unknown; code?: unknown } | null;
  if (typeof x?.statusCode === "number") return x.statusCode;
  return typeof x?.code === "number" ? x.code : undefined;
}

/**
 * Lists and watches one kind; the objects it holds are exactly the ones the API server last said.
 * 410 Gone relists (objects gone meanwhile are deleted), an inactive watch reconnects at once, a
 * watch that ends cleanly reconnects from its last resourceVersion after a growing pause (reset by
 * any event), any other failure stops it and is reported: the caller decides when to
 * {@linkcode start} again (the objects are kept).
 */
export class Reflector<T extends KubernetesObject> {
  readonly #o: ReflectorOptions<T>;
  readonly #objects = new Map<string, T>();
  #resourceVersion = "";
  #stopped = true;
  #request: AbortController | undefined;
  #delayMs = 0;
  #connected = false;
  #cancelDelay = () => {};

  /** Builds the reflector; requests nothing until {@linkcode start}. */
  constructor(o: ReflectorOptions<T>) {
    this.#o = o;
  }

  /** How many objects it holds. */
  get size(): number {
    return this.#objects.size;
  }

  /** (Re)starts: lists when it has no resourceVersion to resume from, then watches. */
  start(): Promise<void> {
    this.#stopped = false;
    this.#delayMs = 0;
    this.#connected = false;
    return this.#next(null);
  }

  /** Stops: the watch is aborted, no reconnect follows; the objects are kept. */
  stop(): void {
    this.#stopped = true;
    this.#cancelDelay();
    this.#request?.abort();
    this.#request = undefined;
  }

  async #next(err: unknown): Promise<void> {
    this.#request?.abort();
    this.#request = undefined;
    if (err !== null && err !== undefined) {
      if (statusOf(err) === 410) this.#resourceVersion = "";
      // An inactive watch already waited its whole timeout: resume at once.
      else if ((err as { name?: unknown }).name === "TimeoutError") this.#delayMs = 0;
      else {
        if (!this.#stopped) this.#o.handlers.error(err);
        return;
      }
    }
    if (this.#stopped) return;
    if (this.#resourceVersion === "" && !await this.#relist()) return;
    if (this.#connected && this.#delayMs > 0) {
      await new Promise<void>((resolve) => {
        const cancel = this.#o.clock.setTimer(resolve, this.#delayMs);
        this.#cancelDelay = () => (cancel(), resolve());
      });
      if (this.#stopped) return;
    }
    if (this.#connected) {
      this.#delayMs = Math.min(RECONNECT_MAX_MS, this.#delayMs > 0 ? this.#delayMs * 2 : RECONNECT_START_MS);
    }
    this.#connected = true;
    const request = await this.#o.watcher.watch(
      this.#o.path,
      { ...this.#o.query, resourceVersion: this.#resourceVersion },
      (phase, object) => this.#event(phase, object as T),
      (e) => void this.#next(e),
    );
    if (this.#stopped) request.abort();
    else this.#request = request;
  }

  /**
   * Lists and hands every object over as its batch is parsed (a first list is never held whole:
   * about 80 MiB at 50,000 EndpointSlices of 10 endpoints), then deletes what the list no longer
   * holds, as client-go's Replace; false when the list failed (reported; what came stays held, and
   * the next list deletes what it lacks) or the reflector stopped meanwhile. Its own frame, ended
   * before the watch is awaited: a suspended frame keeps its locals.
   */
  async #relist(): Promise<boolean> {
    // What a relist no longer holds is deleted once it is all in; a first list deletes nothing,
    // so it keeps no set of its keys (tens of thousands).
    const seen = this.#objects.size > 0 ? new Set<string>() : undefined;
    const take: ItemSink<T> = (items) => {
      if (this.#stopped) return;
      for (const o of items) this.#upsert(o, seen);
    };
    let list: KubernetesListObject<T>;
    try {
      list = await this.#o.list(take);
    } catch (e) {
      if (!this.#stopped) this.#o.handlers.error(e);
      return false;
    }
    if (this.#stopped) return false;
    take(list.items ?? []);
    if (seen !== undefined) {
      for (const [key, old] of this.#objects) {
        if (seen.has(key)) continue;
        this.#objects.delete(key);
        this.#o.handlers.delete(old);
      }
    }
    this.#resourceVersion = list.metadata?.resourceVersion ?? "";
    this.#o.handlers.listed();
    return true;
  }

  #event(phase: string, o: T): void {
    if (this.#stopped) return;
    switch (phase) {
      case "ERROR":
        // The server ends the watch after it; a 410 means the next start lists anew.
        if (statusOf(o) === 410) this.#resourceVersion = "";
        return;
      case "ADDED":
      case "MODIFIED":
        this.#upsert(o);
        break;
      case "DELETED":
        this.#objects.delete(objectKey(o));
        this.#o.handlers.delete(o);
        break;
        // BOOKMARK: only its resourceVersion matters.
    }
    this.#delayMs = 0;
    this.#resourceVersion = o.metadata?.resourceVersion ?? "";
  }

  /** Holds `o` and hands it over as added or updated; notes its key in `seen`. */
  #upsert(o: T, seen?: Set<string>): void {
    const key = objectKey(o);
    seen?.add(key);
    const old = this.#objects.get(key);
    this.#objects.set(key, this.#o.retain?.(o) ?? o);
    if (old === undefined) this.#o.handlers.add(o);
    else this.#o.handlers.update(old, o);
  }
}
