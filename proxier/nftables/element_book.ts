/**
 * The elements the kernel holds, by set or map, with the service ports that claim each one. Set
 * members may be claimed by many ports (two ports of a Service share a cluster IP; Services share
 * endpoints); a map key carries one value, so when two ports claim the same key (two Services on
 * the same external IP and port) the first claim wins and the others wait, with a warning.
 * A partial sync replaces the claims of the ports that changed and turns the difference into
 * `delete element` / `add element` statements for exactly the keys whose effective element changed.
 * The claims on a grouped container ({@linkcode ElementGroup}: an entry's backends) stand for a
 * group of elements each, so the book holds one claim per entry rather than per endpoint, and
 * spells the elements out only as they are written (at 50,000 Services x 10 endpoints, 255 MiB of
 * heap after the first sync against 323 with a claim per endpoint).
 * @module
 */
import type { NftElementSource } from "../../iptables/nft_transaction.ts";
import { type NftName } from "./layout.ts";
import { type Element, elementRest } from "./port_elements.ts";
import { flat } from "../model/flat_string.ts";

/**
 * One port's claim on one key: the element it wants there, as the text after the key (`rest`: the
 * key is the slot's own string, so the claim holds no second copy of it; a set member's is empty).
 */
export interface Claim {
  readonly container: NftName;
  readonly key: string;
  readonly owner: string;
  readonly rest: string;
}

/**
 * A key's claims, effective first: the claim itself when it is the only one (most keys), so a key
 * costs no array; a fresh array, never grown in place, when several ports claim it.
 */
type Slot = Claim | readonly Claim[];

const first = (slot: Slot): Claim => Array.isArray(slot) ? slot[0] : slot as Claim;

/** How many distinct claim values an {@linkcode ElementBook} holds once each, at most. */
const SHARED_RESTS = 1024;

/** Reads a container's elements as a book is filled ({@linkcode ElementBook.reader}). */
export interface ElementReader {
  /** Elements held and not read yet. */
  pending(): number;
  /** Yields those elements' texts (at most `limit`), in order; each is read once, as it is yielded. */
  texts(limit?: number): Generator<string>;
}

/** Keys one round of {@linkcode ElementBook.replace} calls touched, with their effective element before (its rest). */
export type Touched = Map<NftName, Map<string, string | undefined>>;

/**
 * How the claims on a container stand for several elements each (an entry's endpoints, by index):
 * one claim, one key and one text per group instead of per element.
 */
export interface ElementGroup {
  /** The elements of group `key` whose claim's rest is `rest`: each element's key and rest, in order. */
  elements(key: string, rest: string): Array<[key: string, rest: string]>;
  /** Yields the texts of those elements (key and rest), in order. */
  texts(key: string, rest: string): Iterable<string>;
  /** The number of elements of a group whose claim's rest is `rest`. */
  count(rest: string): number;
}

/**
 * See the module doc. Every claim costs one object, its key and the flat text after it; a grouped
 * container's claim stands for its group's elements, which are spelled out only as they are written.
 */
export class ElementBook {
  /** Containers whose claims are groups. */
  readonly #groups: ReadonlyMap<NftName, ElementGroup>;
  /** container -> key -> claims. */
  readonly #slots = new Map<NftName, Map<string, Slot>>();
  /** grouped container -> the elements its effective claims stand for. */
  readonly #grouped = new Map<NftName, number>();
  /** port -> the claims it made. */
  readonly #byPort = new Map<string, readonly Claim[]>();
  /**
   * Values most claims share (` : goto lb-1`), each held once, at most {@linkcode SHARED_RESTS} (a
   * claim lives as long as its port); a grouped container's and a commented element's are its own.
   */
  readonly #shared = new Map<string, string>();
  /** container -> where {@linkcode window} stopped: a live iterator over the keys map it walks. */
  readonly #cursors = new Map<NftName, { keys: Map<string, Slot>; at: Iterator<string> }>();

  /** A book whose claims on the containers of `groups` are groups of elements. */
  constructor(groups: ReadonlyMap<NftName, ElementGroup> = new Map()) {
    this.#groups = groups;
  }

  /** Forgets everything (a full sync rebuilds the book). */
  clear(): void {
    this.#slots.clear();
    this.#byPort.clear();
    this.#grouped.clear();
  }

  /** Number of service ports with claims. */
  get ports(): number {
    return this.#byPort.size;
  }

  /** Returns the claims `port` holds (none when it has none). */
  claimsOf(port: string): readonly Claim[] {
    return this.#byPort.get(port) ?? [];
  }

  /**
   * Replaces `port`'s claims with `elements` (none: the port is gone), noting in `touched` the
   * effective text of every key it changes as it was before. Returns one message per claim that
   * lost to another port's different value.
   */
  replace(port: string, elements: readonly Element[], touched: Touched): string[] {
    // One claim per key and port; a claim on a key the port keeps claiming keeps its place (and so
    // its precedence), and a new value takes the old one's entry: a key whose value changes every
    // sync is never deleted and added again, which would grow the key map's table.
    const next = new Map<string, Element>();
    for (const e of elements) next.set(`${e.container} ${e.key}`, e);
    const claims: Claim[] = [];
    const conflicts: string[] = [];
    for (const c of this.#byPort.get(port) ?? []) {
      const id = `${c.container} ${c.key}`;
      const n = next.get(id);
      if (n === undefined) {
        this.#unclaim(c, touched);
        continue;
      }
      next.delete(id);
      if (elementRest(n) === c.rest) claims.push(c);
      else claims.push(this.#revise(c, this.#claimOf(port, n, c.key), conflicts, touched));
    }
    for (const e of next.values()) {
      const c = this.#claimOf(port, e);
      this.#claim(c, conflicts, touched);
      claims.push(c);
    }
    if (claims.length === 0) this.#byPort.delete(port);
    else this.#byPort.set(port, claims);
    return conflicts;
  }

  /**
   * Adds `port`'s claims to a book filled from scratch (a full sync writes every element anyway, so
   * nothing is noted for a diff). Returns one message per claim that lost to another port's value.
   */
  fill(port: string, elements: readonly Element[]): string[] {
    const conflicts: string[] = [];
    const claims: Claim[] = [];
    // A port's elements come container by container: one lookup of its keys each.
    let container: NftName | undefined;
    let keys: Map<string, Slot> | undefined;
    for (const e of elements) {
      if (e.container !== container) {
        container = e.container;
        keys = this.#slots.get(container);
        if (keys === undefined) this.#slots.set(container, keys = new Map());
      }
      const slot = keys!.get(e.key);
      const c = this.#claimOf(port, e);
      if (slot === undefined) {
        // Most keys: the first claim, made without a second lookup.
        keys!.set(c.key, c);
        this.#recount(container, undefined, c);
      } else if ((Array.isArray(slot) ? slot : [slot]).some((x) => x.owner === port)) {
        continue;
      } else {
        this.#claim(c, conflicts);
      }
      claims.push(c);
    }
    this.#byPort.set(port, claims);
    return conflicts;
  }

  /**
   * The claim of `port` on `e`, its strings flat (they are kept until the port changes); `key`: the
   * string already keying the slot, so a revised claim holds no second copy of it.
   */
  #claimOf(port: string, e: Element, key = flat(e.key)): Claim {
    const rest = elementRest(e);
    const own = rest === "" || e.comment !== undefined || this.#groups.has(e.container);
    let held = own ? undefined : this.#shared.get(rest);
    if (held === undefined) {
      held = flat(rest);
      if (!own && this.#shared.size < SHARED_RESTS) this.#shared.set(held, held);
    }
    return { container: e.container, key, owner: port, rest: held };
  }

  /** Adds claim `c` after the key's others, noting the key's text before (when `touched`). */
  #claim(c: Claim, conflicts: string[], touched?: Touched): void {
    let keys = this.#slots.get(c.container);
    if (keys === undefined) this.#slots.set(c.container, keys = new Map());
    const slot = keys.get(c.key);
    if (touched !== undefined) noteBefore(touched, c, slot);
    if (slot === undefined) {
      keys.set(c.key, c);
      this.#recount(c.container, undefined, c);
      return;
    }
    const effective = first(slot);
    // Set members (no rest) are one element however many claim them.
    if (c.rest !== "" && effective.rest !== c.rest) {
      conflicts.push(waits(effective, c));
    }
    keys.set(c.key, Array.isArray(slot) ? [...slot, c] : [slot as Claim, c]);
  }

  /** Puts claim `to` where `from` stands (same key), noting the key's text before; returns `to`. */
  #revise(from: Claim, to: Claim, conflicts: string[], touched: Touched): Claim {
    const keys = this.#slots.get(from.container)!;
    const slot = keys.get(from.key)!;
    noteBefore(touched, from, slot);
    if (first(slot) === from) this.#recount(from.container, from, to);
    if (!Array.isArray(slot)) keys.set(from.key, to);
    else {
      keys.set(from.key, slot.map((x) => x === from ? to : x));
      if (slot[0] !== from && slot[0].rest !== to.rest) {
        conflicts.push(waits(slot[0], to));
      }
    }
    return to;
  }

  /** Withdraws claim `c`, noting the key's text before; a key nobody claims any more is dropped. */
  #unclaim(c: Claim, touched: Touched): void {
    const keys = this.#slots.get(c.container);
    const slot = keys?.get(c.key);
    if (keys === undefined || slot === undefined) return;
    noteBefore(touched, c, slot);
    if (slot === c) {
      keys.delete(c.key);
      this.#recount(c.container, c, undefined);
    } else if (Array.isArray(slot)) {
      const rest = slot.filter((x) => x !== c);
      if (slot[0] === c) this.#recount(c.container, c, rest[0]);
      keys.set(c.key, rest.length === 1 ? rest[0] : rest);
    }
  }

  /** Keeps a grouped container's element count as its key's effective claim goes from `was` to `is`. */
  #recount(container: NftName, was: Claim | undefined, is: Claim | undefined): void {
    const group = this.#groups.get(container);
    if (group === undefined) return;
    const change = (is === undefined ? 0 : group.count(is.rest)) -
      (was === undefined ? 0 : group.count(was.rest));
    this.#grouped.set(container, (this.#grouped.get(container) ?? 0) + change);
  }

  /** Returns the effective element text of `key` in `container`, or undefined when nobody claims it. */
  effective(container: NftName, key: string): string | undefined {
    const rest = this.#effectiveRest(container, key);
    return rest === undefined ? undefined : key + rest;
  }

  #effectiveRest(container: NftName, key: string): string | undefined {
    const slot = this.#slots.get(container)?.get(key);
    return slot === undefined ? undefined : first(slot).rest;
  }

  /**
   * Returns, per container, the keys to delete and the element texts to add so that the kernel,
   * holding what `touched` recorded, ends up holding the book.
   */
  diff(touched: Touched): Map<NftName, { del: string[]; add: string[] }> {
    const out = new Map<NftName, { del: string[]; add: string[] }>();
    for (const [container, keys] of touched) {
      const del: string[] = [];
      const add: string[] = [];
      const group = this.#groups.get(container);
      const change = (key: string, before: string | undefined, after: string | undefined) => {
        if (before === after) return;
        if (before !== undefined) del.push(key);
        if (after !== undefined) add.push(key + after);
      };
      for (const [key, before] of keys) {
        const after = this.#effectiveRest(container, key);
        if (group === undefined) change(key, before, after);
        else if (before !== after) {
          // Element by element: a group that changed in one endpoint writes that endpoint only.
          const was = new Map(before === undefined ? [] : group.elements(key, before));
          const is = after === undefined ? [] : group.elements(key, after);
          for (const [k, r] of is) {
            change(k, was.get(k), r);
            was.delete(k);
          }
          for (const [k, r] of was) change(k, r, undefined);
        }
      }
      if (del.length > 0 || add.length > 0) out.set(container, { del, add });
    }
    return out;
  }

  /** Number of elements of `container` someone claims (keys; a grouped container's, its groups' elements). */
  size(container: NftName): number {
    if (this.#groups.has(container)) return this.#grouped.get(container) ?? 0;
    return this.#slots.get(container)?.size ?? 0;
  }

  /**
   * Returns up to `count` keys of `container`, going on from where the last call stopped and
   * starting over after the last: every key held meanwhile comes round, each call costing `count`
   * however many the container holds. None twice in one call.
   */
  window(container: NftName, count: number): string[] {
    const keys = this.#slots.get(container);
    if (keys === undefined) return [];
    let cursor = this.#cursors.get(container);
    // A full sync fills new maps: a cursor over the old one would name keys long gone.
    if (cursor?.keys !== keys) this.#cursors.set(container, cursor = { keys, at: keys.keys() });
    const out: string[] = [];
    for (let restarted = false; out.length < Math.min(count, keys.size);) {
      const n = cursor.at.next();
      if (!n.done) {
        out.push(n.value);
      } else if (restarted) {
        break;
      } else {
        cursor.at = keys.keys();
        restarted = true;
      }
    }
    return out;
  }

  /**
   * Returns a reader of `container`'s effective element texts in the order their keys were first
   * claimed, each once, going on from where it stopped (within a group too). While the book is
   * filled from scratch ({@linkcode fill} only: a key's first claim stays its effective one), what
   * it read stays true, so a new table can load it before the fill ends.
   */
  reader(container: NftName): ElementReader {
    const group = this.#groups.get(container);
    let keys: Map<string, Slot> | undefined;
    let at: Iterator<[string, Slot]> | undefined;
    /** The group being read, when a read stopped within one. */
    let within: Iterator<string> | undefined;
    let keysRead = 0;
    let read = 0;
    const slots = () => keys ??= this.#slots.get(container);
    return {
      pending: () => this.size(container) - read,
      *texts(limit = Infinity) {
        for (let left = limit; left > 0;) {
          const n = within?.next();
          if (n !== undefined && !n.done) {
            read++;
            left--;
            yield n.value;
            continue;
          }
          within = undefined;
          // A Map's live iterator also visits keys added after it began; it is never run past the
          // end (that would finish it for good), only up to the keys held now.
          if (keysRead >= (slots()?.size ?? 0)) return;
          at ??= keys!.entries();
          const [key, slot] = at.next().value as [string, Slot];
          keysRead++;
          if (group !== undefined) {
            within = group.texts(key, first(slot).rest)[Symbol.iterator]();
            continue;
          }
          read++;
          left--;
          yield key + first(slot).rest;
        }
      },
    };
  }

  /** Every element of `containers`, by container, for a full sync to write after its transaction. */
  sources(containers: readonly NftName[]): NftElementSource[] {
    return containers.map((c) => ({ container: c, count: this.size(c), texts: this.texts(c) }));
  }

  /**
   * Yields every effective element text of `container` (for a full sync's refill), one at a time:
   * a full sync writes hundreds of thousands, and each is garbage once its statement is written.
   */
  *texts(container: NftName): Generator<string> {
    const group = this.#groups.get(container);
    for (const [key, slot] of this.#slots.get(container) ?? []) {
      if (group === undefined) yield key + first(slot).rest;
      else yield* group.texts(key, first(slot).rest);
    }
  }
}

/** The message for claim `waiting`, which loses to `holder`'s different value of the same key. */
function waits(holder: Claim, waiting: Claim): string {
  return `${waiting.container} ${waiting.key}: claimed by ${holder.owner}; ${waiting.owner} waits`;
}

/** Notes the effective element of `c`'s key (its rest) before this round's first change of it. */
function noteBefore(touched: Touched, c: Claim, slot: Slot | undefined): void {
  let before = touched.get(c.container);
  if (before === undefined) touched.set(c.container, before = new Map());
  if (!before.has(c.key)) before.set(c.key, slot === undefined ? undefined : first(slot).rest);
}
