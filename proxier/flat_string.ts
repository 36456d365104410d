/**
 * Flat copies of strings the model keeps for long.
 *
 * V8 keeps the result of `a + b` (and of a template literal) longer than 12 characters as a tree
 * of its parts, flattened only when something reads its characters. A kept element text or rule
 * key built by concatenation costs about 130 bytes more as such a tree than flat, and a partial
 * sync's new texts stay trees until read, so the model's size would depend on which sync built
 * it. Flattening what is kept makes it one size however it was built.
 * @module
 */

/**
 * Returns `s` flattened: the same characters, held as one flat string once the next collection
 * drops the tree. (`normalize()` reads every character of its receiver, which flattens it; for
 * the ASCII the model holds it returns the same characters.)
 */
export function flat(s: string): string {
  return s.normalize();
}
