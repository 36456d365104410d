/**
 * `--proxy-port-range` parsing and allocation.
 * @module
 */

/** An inclusive port range; `{ min: 0, max: 0 }` means "any free port". */
export interface PortRange {
  readonly min: number;
  readonly max: number;
}

/** Parses `MIN-MAX`, `MIN+COUNT` or a single port; returns undefined when malformed. */
export function parsePortRange(s: string): PortRange | undefined {
  if (s === "") return { min: 0, max: 0 };
  const m = /^(\d{1,5})(?:([-+])(\d{1,5}))?$/.exec(s.trim());
  if (m === null) return undefined;
  const min = Number(m[1]);
  const max = m[2] === undefined ? min : m[2] === "-" ? Number(m[3]) : min + Number(m[3]);
  if (min < 1 || max > 65535 || max < min) return undefined;
  return { min, max };
}

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

  /** Returns a port to the pool. */
  release(port: number): void {
    this.#used.delete(port);
  }
}
