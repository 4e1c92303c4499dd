import { randomBytes } from "node:crypto";
import type { GeneratedKey } from "../origin/keypool/batch-repository.ts";

/**
 * Rows for a key batch's `generated` step that no enclave made: random key refs, addresses and
 * public keys of the right shapes, for tests of the batch's states in the database alone.
 */
export function randomGeneratedKeys(count: number): GeneratedKey[] {
  return Array.from({ length: count }, () => ({
    keyRef: randomBytes(32).toString("hex"),
    address: `0x${randomBytes(20).toString("hex")}`,
    publicKey: `0x04${randomBytes(64).toString("hex")}`,
  }));
}
