/**
 * Rotation positions shared between threads: one 32-bit slot per service port in a
 * SharedArrayBuffer, so balancers on several workers rotate over a service's endpoints as one
 * (sequential connections alternate endpoints whichever worker the kernel hands them to).
 * @module
 */
import type { Rotation } from "./round_robin.ts";

/** Slots in one buffer: more than the service ports a node can listen on (one port each). */
export const ROTATION_SLOTS = 65_536;

/** Returns the rotation kept in `slot` of `buffer` (made by {@linkcode RotationSlots}). */
export function sharedRotation(buffer: SharedArrayBuffer, slot: number): Rotation {
  const cells = new Int32Array(buffer);
  return {
    get: () => Atomics.load(cells, slot),
    move: (from, to) => Atomics.compareExchange(cells, slot, from, to) === from,
  };
}

/** Hands out one slot per key in one shared buffer; a freed slot is reused. */
export class RotationSlots {
  /** The buffer every thread reads the slots from. */
  readonly buffer = new SharedArrayBuffer(ROTATION_SLOTS * Int32Array.BYTES_PER_ELEMENT);
  readonly #slots = new Map<string, number>();
  readonly #free: number[] = [];
  #next = 0;

  /** Returns `key`'s slot (the same one while it is retained); throws when all are taken. */
  slot(key: string): number {
    let slot = this.#slots.get(key);
    if (slot !== undefined) return slot;
    slot = this.#free.pop() ?? this.#next++;
    if (slot >= ROTATION_SLOTS) throw new RangeError(`more than ${ROTATION_SLOTS} rotation slots`);
    this.#slots.set(key, slot);
    return slot;
  }

  /** Frees every slot whose key is not in `keep`. */
  retain(keep: ReadonlySet<string>): void {
    for (const [key, slot] of this.#slots) {
      if (keep.has(key)) continue;
      this.#slots.delete(key);
      this.#free.push(slot);
    }
  }
}
