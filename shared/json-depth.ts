/**
 * How deep a JSON value nests. A body of a few KiB can nest thousands deep, and whatever walks it
 * recursively afterwards (JSON.stringify measuring a quote, a merge, a hash of sorted keys, the
 * upstream call's serialisation) then overflows the stack: a 500, or a failure blamed on another
 * part. Runtime-neutral: no `node:` imports.
 */

/**
 * Ours: the deepest any JSON the service is sent may nest, far above what an honest request holds
 * (a policy nests four deep, an x402 quote's bazaar schemas about a dozen) and far below where a
 * recursive walk overflows (thousands).
 */
export const MAX_JSON_DEPTH = 64;

/** Whether `value`'s objects and arrays nest at most `limit` deep, walked without recursion. */
export function nestsAtMost(value: unknown, limit: number): boolean {
  const pending: { value: unknown; depth: number }[] = [{ value, depth: 1 }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    if (typeof next.value !== "object" || next.value === null) continue;
    if (next.depth > limit) return false;
    for (const child of Object.values(next.value)) pending.push({ value: child, depth: next.depth + 1 });
  }
  return true;
}
