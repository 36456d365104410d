/**
 * Drift: kernel state this proxy owns changed behind its back (a firewalld reload, an admin's
 * flush, one rule, element, real server or address deleted). Each mode says what drifted
 * (`BaseProxier.detectDrift`): cheap checks before every partial sync, thorough ones (what the mode
 * owns, counted) once per sync period between syncs. What is found is logged once, counted in
 * `kubeproxy_sync_proxy_rules_drift_repairs_total` (and, when a mode names another writer of its
 * rules, in `kubeproxy_sync_proxy_rules_other_writer_repairs_total`), and repaired by a full sync.
 * @module
 */
import type { Clock } from "./runtime/clock.ts";
import type { Exclusive } from "./runtime/exclusive.ts";
import type { Logger } from "./runtime/logger.ts";
import type { IPFamily } from "./model/types.ts";
import { onAbort } from "./runtime/abort.ts";

/**
 * How a mode's drift starts when it can name who changed its rules: another instance of this
 * program (its identity is in what it writes). Such drift is counted apart too.
 */
export const ANOTHER_WRITER = "another writer programs this node";

/** Options of {@linkcode DriftWatch}. */
export interface DriftWatchOptions {
  readonly family: IPFamily;
  readonly log: Logger;
  readonly clock: Clock;
  /** How often the thorough check runs (the sync period). */
  readonly periodMs: number;
  /** The mode's check; see `BaseProxier.detectDrift`. */
  readonly detect: (thorough: boolean) => Promise<string | undefined>;
  /** Counts each repair, and apart each repair of what another writer (named) wrote. */
  readonly counters: {
    readonly driftRepairsTotal: { inc(): void };
    readonly otherWritersTotal: { inc(): void };
  };
  /**
   * Shared with the syncs: a thorough check never runs beside a sync. A kernel listing that a
   * commit interrupts starts over (nft and iptables-nft both redo their dump when the ruleset
   * generation moves), so beside frequent syncs it would never end; and a finding made while a
   * sync ran could not be trusted anyway.
   */
  readonly exclusive: Exclusive;
  /** False until the first sync may run (nothing is checked before). */
  readonly ready: () => boolean;
  /** Asks for the full sync that repairs what drifted. */
  readonly repair: () => void;
}

/** Detects and reports drift; see the module doc. */
export class DriftWatch {
  readonly #o: DriftWatchOptions;

  /** Starts nothing; {@linkcode watch} starts the periodic check. */
  constructor(o: DriftWatchOptions) {
    this.#o = o;
  }

  /** Runs the mode's check; a check that cannot run counts as drift (the full sync it brings is safe). */
  check(thorough: boolean): Promise<string | undefined> {
    return this.#o.detect(thorough).catch((e) =>
      `the check failed: ${e instanceof Error ? e.message : String(e)}`
    );
  }

  /** Logs and counts what drifted (the caller makes the next sync full). */
  report(drift: string): void {
    const other = drift.startsWith(ANOTHER_WRITER);
    this.#o.log.warn(
      other
        ? "Another writer programs this node's rules; rewriting them (one proxy per node)"
        : "Rules changed outside the proxy; doing a full sync",
      { family: this.#o.family, drift },
    );
    this.#o.counters.driftRepairsTotal.inc();
    if (other) this.#o.counters.otherWritersTotal.inc();
  }

  /**
   * Runs the thorough check between syncs and, when it finds drift, reports it and asks for the
   * full sync that repairs it. Returns what drifted.
   */
  async repair(): Promise<string | undefined> {
    const drift = await this.#o.exclusive.run(() =>
      this.#o.ready() ? this.check(true) : Promise.resolve(undefined)
    );
    if (drift === undefined) return undefined;
    this.report(drift);
    this.#o.repair();
    return drift;
  }

  /** Runs {@linkcode repair} once per period, beside the syncs, until `signal` aborts. */
  watch(signal: AbortSignal): void {
    let cancel = () => {};
    const tick = () => {
      cancel = this.#o.clock.setTimer(async () => {
        if (signal.aborted) return;
        await this.repair();
        if (!signal.aborted) tick();
      }, this.#o.periodMs);
    };
    tick();
    onAbort(signal, () => cancel());
  }
}
