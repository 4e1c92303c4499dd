import { hash, timingSafeEqual } from "node:crypto";

/** Whether a presented X-svc-Edge-Secret is the configured one. */
export type EdgeSecretVerifier = (presented: string | undefined) => boolean;

/**
 * The origin compares the edge secret in constant time. Both sides are hashed first,
 * so the comparison takes the same time whatever the presented length, and the expected digest
 * is computed once: a request pays one SHA-256 of a short string, through the one-shot `hash`
 * (every request from the edge pays it). No secret configured: nothing verifies.
 */
export function createEdgeSecretVerifier(secret: string | undefined): EdgeSecretVerifier {
  if (secret === undefined || secret === "") return () => false;
  const expected = hash("sha256", secret, "buffer");
  return (presented) => {
    if (presented === undefined) return false;
    return timingSafeEqual(hash("sha256", presented, "buffer"), expected);
  };
}
