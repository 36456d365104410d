/**
 * Allocation of userspace portal ports from `--proxy-port-range`.
 * @module
 */
import type { PortRange } from "../options/config.ts";

/** Hands out ports from a range round-robin, skipping ports in use. */
export class PortAllocator {
  readonly #range: PortRange;
  readonly #used = new Set<number>();
  #next: number;

  /** Allocates from `range`; a zero range hands out 0 (the kernel picks). */
  constructor(range: PortRange) {
    this.#range = range;
    this.#next = range.min;
  }

  /** Returns a port not handed out before, or undefined when the range is exhausted. */
  allocate(): number | undefined {
    const { min, max } = this.#range;
    if (min === 0) return 0;
    for (let i = 0; i <= max - min; i++) {
      const p = this.#next;
      this.#next = p >= max ? min : p + 1;
      if (!this.#used.has(p)) {
        this.#used.add(p);
        return p;
      }
    }
    return undefined;
  }

  /**
   * Records `port`, one the kernel picked (a zero range), as held; returns false when it already is.
   * A probed port is free in the kernel until the TCP workers bind it (a refusing portal's, for
   * good), so the kernel may hand it out again meanwhile.
   */
  claim(port: number): boolean {
    if (this.#used.has(port)) return false;
    this.#used.add(port);
    return true;
  }

  /** Returns a port to the pool. */
  release(port: number): void {
    this.#used.delete(port);
  }
}
