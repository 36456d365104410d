/**
 * The elements the kernel holds, by set or map, with the service ports that claim each one. Set
 * members may be claimed by many ports (two ports of a Service share a cluster IP; Services share
 * endpoints); a map key carries one value, so when two ports claim the same key (two Services on
 * the same external IP and port) the first claim wins and the others wait, with a warning.
 * A partial sync replaces the claims of the ports that changed and turns the difference into
 * `delete element` / `add element` statements for exactly the keys whose effective element changed.
 * @module
 */
import { type NftName } from "./layout.ts";
import { type Element, elementText } from "./port_elements.ts";

interface Claim {
  readonly owner: string;
  readonly text: string;
}

/** Keys touched since {@linkcode ElementBook.begin}, with their effective element text before. */
export type Touched = Map<NftName, Map<string, string | undefined>>;

/** See the module doc. */
export class ElementBook {
  /** container -> key -> claims, effective first. */
  readonly #slots = new Map<NftName, Map<string, Claim[]>>();
  /** port -> the elements it claims. */
  readonly #byPort = new Map<string, readonly Element[]>();

  /** Forgets everything (a full sync rebuilds the book). */
  clear(): void {
    this.#slots.clear();
    this.#byPort.clear();
  }

  /** Number of service ports with claims. */
  get ports(): number {
    return this.#byPort.size;
  }

  /**
   * Replaces `port`'s claims with `elements` (none: the port is gone), noting in `touched` the
   * effective text of every key it changes as it was before. Returns one message per claim that
   * lost to another port's different value.
   */
  replace(port: string, elements: readonly Element[], touched: Touched): string[] {
    // One claim per key and port; an unchanged claim keeps its place (and so its precedence).
    const next = new Map<string, Element>();
    for (const e of elements) next.set(`${e.container} ${e.key}`, e);
    const kept = new Set<string>();
    for (const e of this.#byPort.get(port) ?? []) {
      const id = `${e.container} ${e.key}`;
      const n = next.get(id);
      if (n !== undefined && elementText(n) === elementText(e)) {
        kept.add(id);
        continue;
      }
      const claims = this.#slot(e.container, e.key, touched);
      const i = claims.findIndex((c) => c.owner === port);
      if (i >= 0) claims.splice(i, 1);
    }
    const conflicts: string[] = [];
    for (const [id, e] of next) {
      if (kept.has(id)) continue;
      const claims = this.#slot(e.container, e.key, touched);
      const text = elementText(e);
      const first = claims[0];
      if (first !== undefined && e.value !== undefined && first.text !== text) {
        conflicts.push(`${e.container} ${e.key}: claimed by ${first.owner}; ${port} waits`);
      }
      claims.push({ owner: port, text });
    }
    if (next.size === 0) this.#byPort.delete(port);
    else this.#byPort.set(port, [...next.values()]);
    return conflicts;
  }

  /**
   * Adds `port`'s claims to a book filled from scratch (a full sync writes every element anyway, so
   * nothing is noted for a diff). Returns one message per claim that lost to another port's value.
   */
  fill(port: string, elements: readonly Element[]): string[] {
    const conflicts: string[] = [];
    for (const e of elements) {
      let keys = this.#slots.get(e.container);
      if (keys === undefined) this.#slots.set(e.container, keys = new Map());
      const text = elementText(e);
      const claims = keys.get(e.key);
      if (claims === undefined) {
        keys.set(e.key, [{ owner: port, text }]);
        continue;
      }
      if (claims.some((c) => c.owner === port)) continue;
      if (e.value !== undefined && claims[0].text !== text) {
        conflicts.push(`${e.container} ${e.key}: claimed by ${claims[0].owner}; ${port} waits`);
      }
      claims.push({ owner: port, text });
    }
    this.#byPort.set(port, elements);
    return conflicts;
  }

  /** Returns the claims of `key`, noting its text before the first change of this round. */
  #slot(container: NftName, key: string, touched: Touched): Claim[] {
    let keys = this.#slots.get(container);
    if (keys === undefined) this.#slots.set(container, keys = new Map());
    let claims = keys.get(key);
    if (claims === undefined) keys.set(key, claims = []);
    let before = touched.get(container);
    if (before === undefined) touched.set(container, before = new Map());
    if (!before.has(key)) before.set(key, claims[0]?.text);
    return claims;
  }

  /** Returns the effective text of `key` in `container`, or undefined when nobody claims it. */
  effective(container: NftName, key: string): string | undefined {
    return this.#slots.get(container)?.get(key)?.[0]?.text;
  }

  /**
   * Returns, per container, the keys to delete and the element texts to add so that the kernel,
   * holding what `touched` recorded, ends up holding the book; drops empty slots.
   */
  diff(touched: Touched): Map<NftName, { del: string[]; add: string[] }> {
    const out = new Map<NftName, { del: string[]; add: string[] }>();
    for (const [container, keys] of touched) {
      const slots = this.#slots.get(container)!;
      const del: string[] = [];
      const add: string[] = [];
      for (const [key, before] of keys) {
        const after = slots.get(key)?.[0]?.text;
        if (after === undefined) slots.delete(key);
        if (before === after) continue;
        if (before !== undefined) del.push(key);
        if (after !== undefined) add.push(after);
      }
      if (del.length > 0 || add.length > 0) out.set(container, { del, add });
    }
    return out;
  }

  /** Number of keys of `container` someone claims (after {@linkcode diff} dropped empty ones). */
  size(container: NftName): number {
    return this.#slots.get(container)?.size ?? 0;
  }

  /** Returns every effective element text of `container` (for a full sync's refill). */
  contents(container: NftName): string[] {
    const out: string[] = [];
    for (const claims of this.#slots.get(container)?.values() ?? []) {
      if (claims.length > 0) out.push(claims[0].text);
    }
    return out;
  }
}
