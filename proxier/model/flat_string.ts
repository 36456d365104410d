/**
 * Strings kept for long held flat: V8 holds a concatenation as a tree of its parts until something
 * reads its characters, and a tree read late (once old) keeps its nodes.
 * @module
 */

/**
 * Returns `s` flattened: the same characters, held as one flat string once the next collection
 * drops the tree. V8 keeps the result of `a + b` (and of a template literal) longer than 12
 * characters as a tree of its parts until something reads its characters; a kept string costs more
 * as such a tree (an endpoint's `ip:port` as two nodes and the port's own text), and one first read
 * once old keeps its nodes beside the flat copy. (`normalize()` reads every character of its
 * receiver, which flattens it; for ASCII it returns the same characters.)
 */
export function flat(s: string): string {
  return s.normalize();
}
