/**
 * Graceful termination of IPVS real servers, as upstream's `graceful_termination.go`: a TCP or SCTP
 * real server whose endpoint went away first gets weight 0 (no new connections) and is deleted once
 * its connections are gone, or after {@linkcode GRACEFUL_TERMINATION_MAX_MS}; a UDP one goes at once.
 * @module
 */
import type { RealServerConnections } from "../../iptables/ipvsadm.ts";

/** How long a removed TCP/SCTP real server may keep connections before it is deleted anyway. */
export const GRACEFUL_TERMINATION_MAX_MS = 15 * 60_000;

/** What to do with a real server its Service no longer wants. */
export type Leaving = "delete" | "drain" | "wait";

/** The real servers at weight 0, waiting for their connections to end. */
export class GracefulTermination {
  /** `vsKey|rsKey` -> since when (ms) it drains. */
  readonly #since = new Map<string, number>();

  /** Number of real servers draining. */
  get size(): number {
    return this.#since.size;
  }

  /** The virtual servers (`vsKey`) with a draining real server: each sync looks at them again. */
  virtualServers(): Set<string> {
    return new Set([...this.#since.keys()].map((k) => k.split("|")[0]));
  }

  /** The real server `rs` of `vs` is wanted again (or was never leaving). */
  keep(vs: string, rs: string): void {
    this.#since.delete(`${vs}|${rs}`);
  }

  /** The virtual server `vs` went away with all its real servers. */
  forget(vs: string): void {
    for (const k of [...this.#since.keys()]) if (k.startsWith(`${vs}|`)) this.#since.delete(k);
  }

  /**
   * Decides what happens to `rs` of `vs` (over `protocol`), no longer wanted, at `now`, given the
   * kernel's connection counts: delete it (UDP; drained; past the bound), drain it (first seen
   * leaving: weight 0 from now on), or wait.
   */
  leaving(
    vs: string,
    rs: string,
    protocol: string,
    conns: ReadonlyMap<string, RealServerConnections>,
    now: number,
  ): Leaving {
    const key = `${vs}|${rs}`;
    const since = this.#since.get(key);
    const c = conns.get(key);
    const drained = c !== undefined && c.active + c.inactive === 0;
    if (
      protocol === "udp" || (since !== undefined && (drained || now - since >= GRACEFUL_TERMINATION_MAX_MS))
    ) {
      this.#since.delete(key);
      return "delete";
    }
    if (since !== undefined) return "wait";
    this.#since.set(key, now);
    return "drain";
  }
}
