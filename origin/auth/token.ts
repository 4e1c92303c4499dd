import { hash, randomBytes, timingSafeEqual } from "node:crypto";
import { bearerCredentials } from "../http/authorization.ts";

/** A token is `agt_<token_id>_<secret>`, 16-byte id and 32-byte secret, lowercase hex. */
const TOKEN_PATTERN = /^agt_([0-9a-f]{32})_([0-9a-f]{64})$/;

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

export type ParsedToken = { tokenId: string; secret: string };

/** Parses an `Authorization` header value; anything but a bearer `agt_…` of the exact shape is null. */
export function parseBearerHeader(header: string | undefined): ParsedToken | null {
  const match = TOKEN_PATTERN.exec(bearerCredentials(header) ?? "");
  return match ? { tokenId: match[1]!, secret: match[2]! } : null;
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
