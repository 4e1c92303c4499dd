/** A passkey's public key as the enclave takes it (0x04 ‖ X ‖ Y), from the credential's COSE key. */
import { createHash } from "node:crypto";
import { cose, decodeCredentialPublicKey, isoCBOR } from "@simplewebauthn/server/helpers";
import { type Hex, toHex } from "../../shared/hex.ts";

/** The uncompressed P-256 point of an EC2 / ES256 COSE key, or null for any other key. */
export function coseToUncompressedP256(coseKey: Uint8Array<ArrayBuffer>): Hex | null {
  const decoded = decodeCredentialPublicKey(coseKey);
  if (!cose.isCOSEPublicKeyEC2(decoded)) return null;
  const crv = decoded.get(cose.COSEKEYS.crv);
  const alg = decoded.get(cose.COSEKEYS.alg);
  const x = decoded.get(cose.COSEKEYS.x);
  const y = decoded.get(cose.COSEKEYS.y);
  if (crv !== cose.COSECRV.P256 || alg !== cose.COSEALG.ES256 || !x || !y) return null;
  if (x.length !== 32 || y.length !== 32) return null;
  return toHex(Uint8Array.from([4, ...x, ...y]));
}

/** The first 16 hex digits of SHA-256 of the public point: the passkey's fingerprint. */
export function passkeyFingerprint(publicKey: string): string {
  return createHash("sha256")
    .update(Buffer.from(publicKey.slice(2), "hex"))
    .digest("hex")
    .slice(0, 16);
}

/** The key id a registered passkey is enrolled under: `pk-` and its fingerprint. */
export function passkeyKeyId(publicKey: string): string {
  return `pk-${passkeyFingerprint(publicKey)}`;
}

/** The EC2 / ES256 COSE key of an uncompressed P-256 point (0x04 ‖ X ‖ Y): what a verifier takes. */
export function uncompressedP256ToCose(publicKey: string): Uint8Array<ArrayBuffer> {
  const point = Buffer.from(publicKey.slice(2), "hex");
  const key = new Map<number, number | Uint8Array>([
    [cose.COSEKEYS.kty, cose.COSEKTY.EC2],
    [cose.COSEKEYS.alg, cose.COSEALG.ES256],
    [cose.COSEKEYS.crv, cose.COSECRV.P256],
    [cose.COSEKEYS.x, Uint8Array.from(point.subarray(1, 33))],
    [cose.COSEKEYS.y, Uint8Array.from(point.subarray(33, 65))],
  ]);
  return isoCBOR.encode(key) as Uint8Array<ArrayBuffer>;
}
