/**
 * The one canonical JSON of x402 values: the same value gives the same string whatever order its
 * keys arrived in, so its hash can be stored and compared.
 *
 * `canonicalJson` sorts object keys as strings at every level and writes a key whose value is
 * `undefined` as `null`. The settler hashes each payment's requirement and payload with it.
 *
 * `sortedKeysJson` is not a second canonical form to choose from: it reproduces, byte for byte,
 * the string x402 authorize hashed its copied quote parts with before it hashed them as sent.
 * Repeats of those stored rows must still match, so its output can never change. It differs from
 * `canonicalJson` where `JSON.stringify` does: integer-like keys ("2", "10") come first in numeric
 * order, a key whose value is `undefined` is left out, and `toJSON` is honoured. For values parsed
 * from JSON only the first can occur.
 */

/** Keys sorted as strings at every level; `undefined` (in an object or on its own) is `null`. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** `JSON.stringify` with each object's keys re-inserted in string order: frozen, see above. */
export function sortedKeysJson(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner !== null && typeof inner === "object" && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : inner,
  );
}
