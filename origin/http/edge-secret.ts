import { createHash, timingSafeEqual } from "node:crypto";

/** Whether a presented X-svc-Edge-Secret is the configured one. */
export type EdgeSecretVerifier = (presented: string | undefined) => boolean;

/**
 * The origin compares the edge secret in constant time. Both sides are hashed first,
 * so the comparison takes the same time whatever the presented length, and the expected digest
 * is computed once: a request pays one SHA-256 of a short string. No secret configured: nothing
 * verifies.
 */
export function createEdgeSecretVerifier(secret: string | undefined): EdgeSecretVerifier {
  if (secret === undefined || secret === "") return () => false;
  const expected = createHash("sha256").update(secret).digest();
  return (presented) => {
    if (presented === undefined) return false;
    return timingSafeEqual(createHash("sha256").update(presented).digest(), expected);
  };
}
