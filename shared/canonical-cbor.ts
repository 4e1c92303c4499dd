/**
 * Deterministic CBOR encoding (RFC 8949 §4.2.1 "core deterministic encoding") of the small value
 * set that capabilities and their bound params use: text strings, integers, byte strings, booleans,
 * null, arrays and string-keyed maps. Floats, undefined, tags and indefinite lengths are refused, so
 * two parties that agree on the value always agree on the bytes (the capability `sig`
 * and `payload_binding` are computed over "canonical CBOR").
 *
 * cbor-x is not used here on purpose: it encodes integers above 2^32 as float64 and keeps the
 * insertion order of object keys, neither of which is deterministic enough to sign.
 * Runtime-neutral: no `node:` imports (the edge bundles `shared/`).
 */

export type CanonicalValue =
  | string
  | number
  | bigint
  | boolean
  | null
  | Uint8Array
  | readonly CanonicalValue[]
  | { readonly [key: string]: CanonicalValue };

/** Thrown for a value outside the canonical set; callers treat it as a malformed input. */
export class CanonicalCborError extends Error {
  override readonly name = "CanonicalCborError";
}

const MAJOR_UNSIGNED = 0;
const MAJOR_NEGATIVE = 1;
const MAJOR_BYTES = 2;
const MAJOR_TEXT = 3;
const MAJOR_ARRAY = 4;
const MAJOR_MAP = 5;
const SIMPLE_FALSE = 0xf4;
const SIMPLE_TRUE = 0xf5;
const SIMPLE_NULL = 0xf6;
const MAX_UINT64 = (1n << 64n) - 1n;

const textEncoder = new TextEncoder();

/** Encodes `value` in core deterministic CBOR; throws CanonicalCborError for unsupported values. */
export function encodeCanonicalCbor(value: unknown): Uint8Array {
  const out: number[] = [];
  writeValue(out, value, 0);
  return Uint8Array.from(out);
}

function writeValue(out: number[], value: unknown, depth: number): void {
  if (depth > 32) throw new CanonicalCborError("nesting too deep");
  if (value === null) {
    out.push(SIMPLE_NULL);
  } else if (typeof value === "boolean") {
    out.push(value ? SIMPLE_TRUE : SIMPLE_FALSE);
  } else if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new CanonicalCborError("only safe integers are canonical");
    writeInteger(out, BigInt(value));
  } else if (typeof value === "bigint") {
    writeInteger(out, value);
  } else if (typeof value === "string") {
    const bytes = textEncoder.encode(value);
    writeHead(out, MAJOR_TEXT, BigInt(bytes.length));
    pushBytes(out, bytes);
  } else if (value instanceof Uint8Array) {
    writeHead(out, MAJOR_BYTES, BigInt(value.length));
    pushBytes(out, value);
  } else if (Array.isArray(value)) {
    writeHead(out, MAJOR_ARRAY, BigInt(value.length));
    for (const item of value) writeValue(out, item, depth + 1);
  } else if (isPlainMap(value)) {
    writeMap(out, value, depth);
  } else {
    throw new CanonicalCborError(`unsupported value of type ${typeof value}`);
  }
}

function writeMap(out: number[], value: Record<string, unknown>, depth: number): void {
  // RFC 8949 §4.2.1: entries sorted by the bytewise order of their encoded keys.
  const entries = Object.keys(value).map((key) => {
    if (value[key] === undefined) throw new CanonicalCborError(`undefined value at key ${key}`);
    return { encodedKey: encodeCanonicalCbor(key), item: value[key] };
  });
  entries.sort((a, b) => compareBytes(a.encodedKey, b.encodedKey));
  writeHead(out, MAJOR_MAP, BigInt(entries.length));
  for (const entry of entries) {
    pushBytes(out, entry.encodedKey);
    writeValue(out, entry.item, depth + 1);
  }
}

function writeInteger(out: number[], value: bigint): void {
  if (value >= 0n) {
    if (value > MAX_UINT64) throw new CanonicalCborError("integer above 64 bits");
    writeHead(out, MAJOR_UNSIGNED, value);
  } else {
    const magnitude = -1n - value;
    if (magnitude > MAX_UINT64) throw new CanonicalCborError("integer below -2^64");
    writeHead(out, MAJOR_NEGATIVE, magnitude);
  }
}

/** Shortest head form (RFC 8949 §4.2.1, preferred serialization of arguments). */
function writeHead(out: number[], major: number, argument: bigint): void {
  const prefix = major << 5;
  if (argument < 24n) {
    out.push(prefix | Number(argument));
  } else if (argument < 0x100n) {
    out.push(prefix | 24, Number(argument));
  } else if (argument < 0x10000n) {
    out.push(prefix | 25);
    pushUint(out, argument, 2);
  } else if (argument < 0x100000000n) {
    out.push(prefix | 26);
    pushUint(out, argument, 4);
  } else {
    out.push(prefix | 27);
    pushUint(out, argument, 8);
  }
}

function pushUint(out: number[], value: bigint, width: number): void {
  for (let shift = (width - 1) * 8; shift >= 0; shift -= 8) {
    out.push(Number((value >> BigInt(shift)) & 0xffn));
  }
}

function pushBytes(out: number[], bytes: Uint8Array): void {
  for (const byte of bytes) out.push(byte);
}

function isPlainMap(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  // cbor-x decodes maps as objects, some with a null prototype.
  return proto === Object.prototype || proto === null;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const diff = (a[i] ?? 0) - (b[i] ?? 0);
    if (diff !== 0) return diff;
  }
  return a.length - b.length;
}
