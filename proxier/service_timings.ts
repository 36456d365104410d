/**
 * When each Service's last change reached the proxy and when a sync put it in the kernel: what
 * `explain` and `/debug/services` report as `changed`, `triggered` and `applied` (their difference
 * is the Service's network programming latency).
 * @module
 */
import type { ServiceTiming } from "./family_view.ts";
import type { AppliedChanges } from "./model/pending_changes.ts";

/** One family's timings, per Service (`namespace/name`) with ports. */
export class ServiceTimings {
  /** Per Service: its timing, completed in place when a sync applies it (no second object each). */
  readonly #timings = new Map<string, { -readonly [K in keyof ServiceTiming]: ServiceTiming[K] }>();
  /** Services whose last change no sync has applied yet (a failed sync leaves them here). */
  readonly #unapplied = new Set<string>();

  /**
   * Records when each Service `changes` names had its change arrive (the first Service or
   * EndpointSlice event since the last sync took one); forgets those `holds` says have no port left.
   */
  noteChanges(changes: AppliedChanges, holds: (service: string) => boolean): void {
    const { serviceChanges: s, endpointChanges: e } = changes;
    for (const service of changes.changedServices) {
      if (!holds(service)) {
        this.#timings.delete(service);
        this.#unapplied.delete(service);
        continue;
      }
      // The earlier of the two kinds' first events (no array per Service: a first sync notes them all).
      const fromServices = s.changed.get(service)?.since ?? Infinity;
      const fromSlices = e.changedSince.get(service) ?? Infinity;
      this.#timings.set(service, {
        changedMs: fromServices < fromSlices ? fromServices : fromSlices,
        triggerMs: e.triggerTimes.get(service),
        appliedMs: undefined,
      });
      this.#unapplied.add(service);
    }
  }

  /** Marks every change noted since the last successful sync as applied at `ms`. */
  applied(ms: number): void {
    for (const service of this.#unapplied) {
      const t = this.#timings.get(service);
      if (t !== undefined) t.appliedMs = ms;
    }
    this.#unapplied.clear();
  }

  /**
   * Returns `service`'s timing (the record this keeps: a sync that applies the Service's change
   * completes it); undefined for a Service without ports.
   */
  get(service: string): ServiceTiming | undefined {
    return this.#timings.get(service);
  }
}
