/**
 * Reference counting for what several service ports can want at once (an ipset entry, an address on
 * `kube-ipvs0`, a dynamic nftables chain): the thing stays while any port still wants it.
 * @module
 */

/** Counts the users of each key; a key is held while its count is above 0. Optionally a value per key. */
export class RefCounts<K, V = undefined> {
  readonly #entries = new Map<K, { value: V; n: number }>();

  /** Adds one use of `key` (the first use sets its value); returns true when it is the first. */
  add(key: K, ...value: V extends undefined ? [] : [V]): boolean {
    const e = this.#entries.get(key);
    if (e !== undefined) {
      e.n++;
      return false;
    }
    this.#entries.set(key, { value: value[0] as V, n: 1 });
    return true;
  }

  /** Removes one use of `key`; returns true when it was the last (false for a key not held). */
  remove(key: K): boolean {
    const e = this.#entries.get(key);
    if (e === undefined) return false;
    if (--e.n > 0) return false;
    this.#entries.delete(key);
    return true;
  }

  /** Whether some user holds `key`. */
  has(key: K): boolean {
    return this.#entries.has(key);
  }

  /** How many users hold `key` (0 when none). */
  count(key: K): number {
    return this.#entries.get(key)?.n ?? 0;
  }

  /** The keys held. */
  keys(): IterableIterator<K> {
    return this.#entries.keys();
  }

  /** The values of the keys held (each as its first use set it). */
  *values(): IterableIterator<V> {
    for (const e of this.#entries.values()) yield e.value;
  }

  /** Number of keys held. */
  get size(): number {
    return this.#entries.size;
  }

  /** Forgets every key. */
  clear(): void {
    this.#entries.clear();
  }
}
