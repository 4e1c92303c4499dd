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

/**
 * Encodes `value` in core deterministic CBOR; throws CanonicalCborError for unsupported values.
 * Every capability is signed and checked over this encoding, once on each side of every privileged
 * enclave request, so it writes into one growing buffer with number heads, and ASCII text without
 * TextEncoder (docs/performance.md, "Provisioning and the key pool").
 */
export function encodeCanonicalCbor(value: unknown): Uint8Array {
  const writer = new Writer();
  writer.value(value, 0);
  return writer.bytes();
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

class Writer {
  private buffer = new Uint8Array(256);
  private length = 0;

  bytes(): Uint8Array {
    return this.buffer.slice(0, this.length);
  }

  value(value: unknown, depth: number): void {
    if (depth > 32) throw new CanonicalCborError("nesting too deep");
    if (value === null) {
      this.byte(SIMPLE_NULL);
    } else if (typeof value === "boolean") {
      this.byte(value ? SIMPLE_TRUE : SIMPLE_FALSE);
    } else if (typeof value === "number") {
      if (!Number.isSafeInteger(value)) throw new CanonicalCborError("only safe integers are canonical");
      if (value >= 0) this.head(MAJOR_UNSIGNED, value);
      else this.head(MAJOR_NEGATIVE, -1 - value);
    } else if (typeof value === "bigint") {
      this.bigInteger(value);
    } else if (typeof value === "string") {
      this.text(value);
    } else if (value instanceof Uint8Array) {
      this.head(MAJOR_BYTES, value.length);
      this.raw(value);
    } else if (Array.isArray(value)) {
      this.head(MAJOR_ARRAY, value.length);
      for (const item of value) this.value(item, depth + 1);
    } else if (isPlainMap(value)) {
      this.map(value, depth);
    } else {
      throw new CanonicalCborError(`unsupported value of type ${typeof value}`);
    }
  }

  private map(value: Record<string, unknown>, depth: number): void {
    const keys = Object.keys(value);
    let ascii = true;
    for (const key of keys) {
      if (value[key] === undefined) throw new CanonicalCborError(`undefined value at key ${key}`);
      ascii &&= isAscii(key);
    }
    // RFC 8949 §4.2.1: entries sorted by the bytewise order of their encoded keys. A text key's
    // head grows with its length, so for ASCII keys that order is by length, then by characters.
    if (ascii) keys.sort(compareAsciiKeys);
    else sortByEncoding(keys);
    this.head(MAJOR_MAP, keys.length);
    for (const key of keys) {
      this.text(key);
      this.value(value[key], depth + 1);
    }
  }

  private text(value: string): void {
    if (!isAscii(value)) {
      const bytes = textEncoder.encode(value);
      this.head(MAJOR_TEXT, bytes.length);
      this.raw(bytes);
      return;
    }
    this.head(MAJOR_TEXT, value.length);
    this.reserve(value.length);
    for (let i = 0; i < value.length; i++) this.buffer[this.length++] = value.charCodeAt(i);
  }

  private bigInteger(value: bigint): void {
    if (value >= 0n) {
      if (value > MAX_UINT64) throw new CanonicalCborError("integer above 64 bits");
      this.head(MAJOR_UNSIGNED, value <= MAX_SAFE ? Number(value) : value);
    } else {
      const magnitude = -1n - value;
      if (magnitude > MAX_UINT64) throw new CanonicalCborError("integer below -2^64");
      this.head(MAJOR_NEGATIVE, magnitude <= MAX_SAFE ? Number(magnitude) : magnitude);
    }
  }

  /** Shortest head form (RFC 8949 §4.2.1, preferred serialization of arguments). */
  private head(major: number, argument: number | bigint): void {
    const prefix = major << 5;
    this.reserve(9);
    if (typeof argument === "bigint") {
      // Only above 2^53, so always the 8-byte form.
      this.buffer[this.length++] = prefix | 27;
      this.uint32(Number(argument >> 32n));
      this.uint32(Number(argument & 0xffffffffn));
    } else if (argument < 24) {
      this.buffer[this.length++] = prefix | argument;
    } else if (argument < 0x100) {
      this.buffer[this.length++] = prefix | 24;
      this.buffer[this.length++] = argument;
    } else if (argument < 0x10000) {
      this.buffer[this.length++] = prefix | 25;
      this.buffer[this.length++] = argument >>> 8;
      this.buffer[this.length++] = argument & 0xff;
    } else if (argument < 0x100000000) {
      this.buffer[this.length++] = prefix | 26;
      this.uint32(argument);
    } else {
      this.buffer[this.length++] = prefix | 27;
      this.uint32(Math.floor(argument / 0x100000000));
      this.uint32(argument >>> 0);
    }
  }

  private uint32(value: number): void {
    this.buffer[this.length++] = value >>> 24;
    this.buffer[this.length++] = (value >>> 16) & 0xff;
    this.buffer[this.length++] = (value >>> 8) & 0xff;
    this.buffer[this.length++] = value & 0xff;
  }

  private raw(bytes: Uint8Array): void {
    this.reserve(bytes.length);
    this.buffer.set(bytes, this.length);
    this.length += bytes.length;
  }

  private byte(value: number): void {
    this.reserve(1);
    this.buffer[this.length++] = value;
  }

  private reserve(extra: number): void {
    if (this.length + extra <= this.buffer.length) return;
    const grown = new Uint8Array(Math.max(this.buffer.length * 2, this.length + extra));
    grown.set(this.buffer.subarray(0, this.length));
    this.buffer = grown;
  }
}

function isAscii(value: string): boolean {
  for (let i = 0; i < value.length; i++) if (value.charCodeAt(i) > 0x7f) return false;
  return true;
}

function compareAsciiKeys(a: string, b: string): number {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}

function sortByEncoding(keys: string[]): void {
  const encoded = new Map(keys.map((key) => [key, encodeCanonicalCbor(key)]));
  keys.sort((a, b) => compareBytes(encoded.get(a)!, encoded.get(b)!));
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
