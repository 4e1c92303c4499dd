/** P-256 public keys as the enclave holds them (0x04 ‖ X ‖ Y), for node:crypto's verify. */
import { createPublicKey, type KeyObject } from "node:crypto";
import { fromHex } from "../shared/hex.ts";

/** The node:crypto key of an uncompressed P-256 point, or null when it is not one (not on the curve). */
export function p256PublicKey(publicKeyHex: string): KeyObject | null {
  const bytes = fromHex(publicKeyHex);
  if (bytes.length !== 65 || bytes[0] !== 4) return null;
  try {
    return createPublicKey({
      key: {
        kty: "EC",
        crv: "P-256",
        x: Buffer.from(bytes.subarray(1, 33)).toString("base64url"),
        y: Buffer.from(bytes.subarray(33)).toString("base64url"),
      },
      format: "jwk",
    });
  } catch {
    return null;
  }
}
