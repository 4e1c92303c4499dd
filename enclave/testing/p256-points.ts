/**
 * P-256 points in the enclave's encoding (0x04 ‖ X ‖ Y), checked and made by the curve's equation
 * in bigint arithmetic, apart from node:crypto, which the enclave's own check (../p256.ts) uses:
 * the socket fuzz holds enrolled operator keys to this, and makes its edge cases with it. Fresh
 * keys come from node:crypto.
 */
import { generateKeyPairSync } from "node:crypto";
import { publicPoint } from "../../ops/lib/operator-key.ts";
import type { Hex } from "../../shared/hex.ts";

/** The field's prime, the curve's b (a is −3) and its generator (SEC 2, secp256r1). */
const P = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffffn;
const B = 0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604bn;
const GX = 0x6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296n;
const GY = 0x4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5n;

const mod = (value: bigint): bigint => ((value % P) + P) % P;

function power(base: bigint, exponent: bigint): bigint {
  let result = 1n;
  let square = mod(base);
  for (let rest = exponent; rest > 0n; rest >>= 1n) {
    if (rest & 1n) result = mod(result * square);
    square = mod(square * square);
  }
  return result;
}

/** A fresh P-256 public key in the enclave's encoding. */
export const randomP256PublicKey = (): Hex =>
  publicPoint(generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey);

/** y² of the curve at x. */
const rightSide = (x: bigint): bigint => mod(x * x * x - 3n * x + B);

/** A point's encoding, each coordinate below 2²⁵⁶. */
function encodePoint(x: bigint, y: bigint): Hex {
  const word = (value: bigint) => value.toString(16).padStart(64, "0");
  return `0x04${word(x)}${word(y)}`;
}

/** A point's coordinates, or null when `hex` is not 0x04 ‖ 32 bytes ‖ 32 bytes. */
function decodePoint(hex: string): { x: bigint; y: bigint } | null {
  if (!/^0x04[0-9a-f]{128}$/.test(hex)) return null;
  return { x: BigInt(`0x${hex.slice(4, 68)}`), y: BigInt(`0x${hex.slice(68)}`) };
}

/** True when `hex` encodes a point of P-256, each coordinate in its canonical range. */
export function onP256(hex: string): boolean {
  const point = decodePoint(hex);
  return point !== null && point.x < P && point.y < P && mod(point.y * point.y) === rightSide(point.x);
}

/**
 * Encodings at the edges of what an enclave must take as a key: the generator and `key`'s
 * negation (points of the curve), and `key` with y changed by one, the point (0, 0), and the
 * curve's point of least x with P added to x (not points, or not canonical).
 */
export function edgePoints(key: Hex): { onCurve: Hex[]; offCurve: Hex[] } {
  const { x, y } = decodePoint(key)!;
  let least = 0n;
  // p ≡ 3 (mod 4): a square's root is its (p + 1) / 4th power.
  while (power(power(rightSide(least), (P + 1n) / 4n), 2n) !== rightSide(least)) least += 1n;
  const leastY = power(rightSide(least), (P + 1n) / 4n);
  return {
    onCurve: [encodePoint(GX, GY), encodePoint(x, P - y)],
    offCurve: [encodePoint(x, y ^ 1n), encodePoint(0n, 0n), encodePoint(least + P, leastY)],
  };
}
