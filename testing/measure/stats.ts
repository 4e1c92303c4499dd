/** The value at quantile `q` (0–1) of an ascending array: the nearest rank, never interpolated. */
export function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

/** The middle value, or the mean of the middle two. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * P(a < b) + ½·P(a = b) for one value drawn from each sample (the Mann–Whitney U over n·m): 0.5
 * when the two distributions are the same, near 0 or 1 when they barely overlap. A difference of
 * medians moves with noise; this measures the overlap, which noise shared by both samples keeps.
 */
export function probabilityOfSuperiority(a: readonly number[], b: readonly number[]): number {
  let wins = 0;
  for (const x of a) for (const y of b) wins += x < y ? 1 : x === y ? 0.5 : 0;
  return wins / (a.length * b.length);
}
