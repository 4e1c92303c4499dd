/**
 * 0x-hex helpers for the enclave wire (byte strings in op params travel as lowercase 0x-hex).
 * Runtime-neutral: no `node:` imports.
 */
import { bytesToHex, hexToBytes } from "@noble/hashes/utils";

export type Hex = `0x${string}`;

/** Lowercase 0x-prefixed hex of `bytes`. */
export function toHex(bytes: Uint8Array): Hex {
  return `0x${bytesToHex(bytes)}`;
}

/** Bytes of a hex string, with or without the 0x prefix; throws on odd length or a non-hex digit. */
export function fromHex(hex: string): Uint8Array {
  return hexToBytes(hex.startsWith("0x") || hex.startsWith("0X") ? hex.slice(2) : hex);
}

/** Normalises hex input (any case, optional 0x) to lowercase 0x form, checking the byte length. */
export function normaliseHex(hex: string, byteLength: number): Hex {
  const bytes = fromHex(hex);
  if (bytes.length !== byteLength) throw new Error(`expected ${byteLength} bytes, got ${bytes.length}`);
  return toHex(bytes);
}

/** Constant-time comparison of two byte strings of equal length (false when lengths differ). */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}
