import { hash, randomBytes, timingSafeEqual } from "node:crypto";

/** Issues `agt_<token_id>_<secret>` (shared/agent-token.ts parses it). */
export type IssuedToken = {
  /** The whole bearer token; shown once, never stored or logged. */
  token: string;
  tokenId: string;
  secretHash: Buffer;
};

export function issueToken(): IssuedToken {
  const tokenId = randomBytes(16).toString("hex");
  const secret = randomBytes(32).toString("hex");
  return { token: `agt_${tokenId}_${secret}`, tokenId, secretHash: hashSecret(secret) };
}

/**
 * SHA-256 of the secret's 32 raw bytes. Every authenticated request hashes once: the one-shot
 * `hash` costs about two thirds of a createHash object's update and digest.
 */
export function hashSecret(secretHex: string): Buffer {
  return hash("sha256", Buffer.from(secretHex, "hex"), "buffer");
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function secretMatches(secretHex: string, storedHash: Buffer): boolean {
  const presented = hashSecret(secretHex);
  return storedHash.length === presented.length && timingSafeEqual(presented, storedHash);
}
