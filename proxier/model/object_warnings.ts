/**
 * Warnings about objects (a malformed Service, a skipped endpoint), logged once per object version
 * however many trackers (one per IP family) and re-deliveries (resyncs, file re-reads) see it.
 * @module
 */
import type { Fields, Logger } from "../runtime/logger.ts";
import { type EventRecorder, nullRecorder, type ObjectRef } from "../runtime/events.ts";

/** One problem found in an object. */
export interface ObjectProblem {
  readonly msg: string;
  readonly fields?: Fields;
  /** Also posted as a Warning Event on a Service, with this reason (the message is its note). */
  readonly event?: string;
}

/** The Service a `Service/namespace/name` key names; undefined for other kinds. */
function serviceRef(key: string): ObjectRef | undefined {
  const [kind, namespace, name] = key.split("/");
  return kind === "Service" && name !== undefined ? { kind, namespace, name } : undefined;
}

/** The identity of an object version: `resourceVersion` when the API gave one, else its content. */
function versionOf(o: object): string {
  const rv = (o as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion;
  return typeof rv === "string" ? rv : JSON.stringify(o);
}

/**
 * Logs object problems once per object version. Holds state only for objects that currently have
 * problems, so its size follows the broken objects, not the cluster.
 */
export class ObjectWarnings {
  readonly #log: Logger;
  readonly #events: EventRecorder;
  /** Per `Kind/namespace/name`: the version last reported on and the problems logged for it. */
  readonly #seen = new Map<string, { version: string; logged: Set<string> }>();

  readonly #about?: (key: string, o: object) => boolean;

  /**
   * Logs through `log`; posts the problems that ask for one as Events through `events` (default
   * none). With `about`, only the objects it accepts are reported on (a command asked about one
   * Service says nothing of the others).
   */
  constructor(
    log: Logger,
    events: EventRecorder = nullRecorder,
    about?: (key: string, o: object) => boolean,
  ) {
    this.#log = log;
    this.#events = events;
    this.#about = about;
  }

  /**
   * Logs the problems of `o` (identified by `key`) not yet logged for this version of it; a new
   * version starts afresh, and a version without problems forgets the object.
   */
  report(
    key: string,
    o: object,
    problems: readonly ObjectProblem[],
  ): void {
    // The common case, a good object never reported on, costs nothing more (not even hashing its
    // key while nothing has been reported).
    if (problems.length === 0 && this.#seen.size === 0) return;
    let entry = this.#seen.get(key);
    if (problems.length === 0 && entry === undefined) return;
    if (this.#about !== undefined && !this.#about(key, o)) return;
    const version = versionOf(o);
    if (entry?.version !== version) {
      entry = { version, logged: new Set() };
      if (problems.length === 0) {
        this.#seen.delete(key);
        return;
      }
      this.#seen.set(key, entry);
    }
    for (const p of problems) {
      if (entry.logged.has(p.msg)) continue;
      entry.logged.add(p.msg);
      this.#log.warn(p.msg, p.fields);
      const regarding = p.event === undefined ? undefined : serviceRef(key);
      if (regarding !== undefined) {
        this.#events.record({
          regarding,
          type: "Warning",
          reason: p.event!,
          action: "ProgramService",
          note: p.msg,
        });
      }
    }
  }

  /** Forgets a deleted object: if it comes back broken, that is worth saying again. */
  forget(key: string): void {
    this.#seen.delete(key);
  }
}
