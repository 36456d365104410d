/**
 * The percentile the benchmarks report their latencies and floors by.
 * @module
 */

/**
 * Returns the value at percentile `p` (0-1) of `sorted` (ascending): the smallest value at least
 * that share of the values are at or under, so the median of an even count is the lower middle one;
 * NaN for no values.
 */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
}

/** Returns the {@linkcode percentile} 0.5 of `values` in any order (the lower middle one of an even count); NaN for none. */
export function median(values: readonly number[]): number {
  return percentile([...values].sort((a, b) => a - b), 0.5);
}
