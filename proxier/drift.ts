/**
 * Drift: kernel state this proxy owns changed behind its back (a firewalld reload, an admin's
 * flush, one rule, element, real server or address deleted). Each mode says what drifted
 * (`BaseProxier.detectDrift`): cheap checks before every partial sync, thorough ones (what the mode
 * owns, counted) once per sync period between syncs. A thorough check never delays a change: it
 * gives way to a sync the moment one is asked for (its kernel listing is stopped) and runs again
 * later. A periodic sync with nothing asked for waits for it to end instead: giving way to those
 * too, a check longer than the quiet between them would never end. And at scale, where listing the
 * table takes seconds, it runs at most once per {@linkcode DRIFT_CHECK_PACE} times its own duration,
 * so it never costs more than a twentieth of a core. What is found is logged once, counted in
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

/** A thorough check runs at most once per this many times its last duration (below, the sync period). */
export const DRIFT_CHECK_PACE = 20;

/** Options of {@linkcode DriftWatch}. */
export interface DriftWatchOptions {
  readonly family: IPFamily;
  readonly log: Logger;
  readonly clock: Clock;
  /** How often the thorough check runs (the sync period). */
  readonly periodMs: number;
  /** The mode's check; see `BaseProxier.detectDrift`. `signal` stops a thorough check's listing. */
  readonly detect: (thorough: boolean, signal?: AbortSignal) => Promise<string | undefined>;
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
  /** Reads the elapsed time of a check; default the clock. */
  readonly now?: () => number;
  /** False until the first sync may run (nothing is checked before). */
  readonly ready: () => boolean;
  /** Asks for the full sync that repairs what drifted. */
  readonly repair: () => void;
}

/** Detects and reports drift; see the module doc. */
export class DriftWatch {
  readonly #o: DriftWatchOptions;
  /** How long the last thorough check that ran to its end took. */
  #lastMs = 0;

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

  /**
   * Runs the thorough check beside nothing, giving way to a sync asked for meanwhile: then it says
   * nothing (a check cut short found nothing), and the next period tries again.
   */
  #thorough(): Promise<string | undefined> {
    return this.#o.exclusive.runYielding(async (signal) => {
      if (!this.#o.ready() || signal.aborted) return undefined;
      const now = this.#o.now ?? (() => this.#o.clock.now());
      const start = now();
      const drift = await this.#o.detect(true, signal).catch((e) =>
        signal.aborted ? undefined : `the check failed: ${e instanceof Error ? e.message : String(e)}`
      );
      if (signal.aborted) return undefined;
      this.#lastMs = now() - start;
      return drift;
    });
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
   * Runs the cheap check and reports what it finds; returns whether it found drift (the sync goes
   * full). After a failed sync (`afterFailure`) it only explains the failure: a check that cannot
   * run there is no drift (the failure is reported as such), where before a sync it counts as drift.
   */
  async found(afterFailure = false): Promise<boolean> {
    const drift = afterFailure ? await this.#o.detect(false).catch(() => undefined) : await this.check(false);
    if (drift !== undefined) this.report(drift);
    return drift !== undefined;
  }

  /**
   * Runs the thorough check between syncs and, when it finds drift, reports it and asks for the
   * full sync that repairs it. Returns what drifted.
   */
  async repair(): Promise<string | undefined> {
    const drift = await this.#thorough();
    if (drift === undefined) return undefined;
    this.report(drift);
    this.#o.repair();
    return drift;
  }

  /**
   * Runs {@linkcode repair} once per period (at scale, once per {@linkcode DRIFT_CHECK_PACE} times
   * its last duration), beside the syncs, until `signal` aborts.
   */
  watch(signal: AbortSignal): void {
    let cancel = () => {};
    const tick = () => {
      cancel = this.#o.clock.setTimer(async () => {
        if (signal.aborted) return;
        await this.repair();
        if (!signal.aborted) tick();
      }, Math.max(this.#o.periodMs, DRIFT_CHECK_PACE * this.#lastMs));
    };
    tick();
    // A check under way stops too: a periodic sync may be waiting for it, and so the stop.
    onAbort(signal, () => (cancel(), this.#o.exclusive.preempt()));
  }
}
