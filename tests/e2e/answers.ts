/**
 * Who answers a Service: requests made one after another, the set of their answers.
 * @module
 */

/**
 * Returns the set of answers of requests made one after another: `n` of them, then, while some
 * answer of `want` has not come, more, up to four times `n` in all. A mode that picks at random
 * shows only one of two endpoints in twelve tries once in 2,048 (a suite asks that dozens of
 * times); in 48, once in 10^14. So an endpoint that never answers still fails the comparison, and
 * chance no longer does, at no cost when every wanted answer came early.
 */
export async function answers(
  n: number,
  ask: () => Promise<string>,
  want: ReadonlySet<string> = new Set(),
): Promise<Set<string>> {
  const out = new Set<string>();
  for (let i = 0; i < 4 * n; i++) {
    if (i >= n && [...want].every((w) => out.has(w))) break;
    out.add(await ask());
  }
  return out;
}
