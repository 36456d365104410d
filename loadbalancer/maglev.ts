/**
 * Maglev consistent hashing (Eisenbud et al., "Maglev: A Fast and Reliable Software Network Load
 * Balancer", NSDI 2016, section 3.4): a lookup table of M slots (M prime) filled from each
 * backend's permutation of the slots, `(offset + j * skip) mod M`, where offset and skip come from
 * two hashes of the backend's name. Backends take one slot each in turn until the table is full,
 * so their shares differ by at most one slot; removing one moves its slots and few others.
 *
 * The table depends on the set of backends, the table size and the seed alone: names are taken in
 * sorted order, so every node given the same endpoints builds the same table whatever order they
 * arrived in. The hashes are the kernel's jhash (`jhash.ts`), seeded with the cluster-wide seed.
 * @module
 */
import { jhash } from "./jhash.ts";

/**
 * The table size by default (Cilium's): a prime, at least 100 slots per endpoint up to 163
 * endpoints, where removing one of N endpoints moves at most 1/N + 2% of the slots (measured by
 * `deno task bench maglev`; 1021 meets that bound only up to about 3 endpoints).
 */
export const DEFAULT_MAGLEV_TABLE_SIZE = 16381;
/** The seed by default, the same on every node unless configured otherwise. */
export const DEFAULT_MAGLEV_SEED = 0x6b707264; // "kprd"
/** The smallest table size accepted. */
export const MIN_MAGLEV_TABLE_SIZE = 251;
/** The largest table size accepted (Cilium's largest). */
export const MAX_MAGLEV_TABLE_SIZE = 131071;

/** Returns true when `n` is prime. */
export function isPrime(n: number): boolean {
  if (!Number.isInteger(n) || n < 2) return false;
  for (let d = 2; d * d <= n; d++) if (n % d === 0) return false;
  return true;
}

const utf8 = new TextEncoder();

/** A lookup table: the backends by name, sorted, and for each slot the index of its backend. */
export interface MaglevLookup {
  readonly names: readonly string[];
  /** `slots[i]`: the index in `names` of slot i's backend; empty when there is no backend. */
  readonly slots: Int32Array;
}

/**
 * Returns the lookup table of `m` slots (`m` prime) for `backends` (their names; duplicates count
 * once), seeded with `seed`.
 */
export function maglevLookup(backends: Iterable<string>, m: number, seed: number): MaglevLookup {
  const names = [...new Set(backends)].sort();
  if (names.length === 0) return { names, slots: new Int32Array(0) };
  const offset = new Uint32Array(names.length);
  const skip = new Uint32Array(names.length);
  names.forEach((name, i) => {
    const bytes = utf8.encode(name);
    offset[i] = jhash(bytes, seed) % m;
    skip[i] = (jhash(bytes, (seed ^ 0x9e3779b9) >>> 0) % (m - 1)) + 1;
  });
  const next = new Uint32Array(names.length);
  const slots = new Int32Array(m).fill(-1);
  let filled = 0;
  for (;;) {
    for (let i = 0; i < names.length; i++) {
      let c = (offset[i] + next[i] * skip[i]) % m;
      while (slots[c] >= 0) {
        next[i]++;
        c = (offset[i] + next[i] * skip[i]) % m;
      }
      slots[c] = i;
      next[i]++;
      if (++filled === m) return { names, slots };
    }
  }
}

/**
 * Returns the lookup table as names: for each slot `0..m-1` the backend a connection hashing there
 * goes to; empty when there is no backend. `m` must be prime.
 */
export function maglevTable(backends: Iterable<string>, m: number, seed: number): string[] {
  const { names, slots } = maglevLookup(backends, m, seed);
  return Array.from(slots, (i) => names[i]);
}
