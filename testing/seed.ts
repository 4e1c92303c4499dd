import { randomBytes } from "node:crypto";
import { privateKeyToAccount } from "viem/accounts";
import type { Db } from "../origin/db/client.ts";
import { keyBatches, keyPool } from "../origin/db/schema.ts";
import {
  type ProvisionedIdentity,
  type ProvisionIdentityParams,
  provisionIdentity,
} from "../origin/keypool/provision.ts";

export type SeededKey = { keyRef: string; address: `0x${string}`; privateKey: `0x${string}` };

/**
 * Test fixture: `count` free keys in an `available` batch, made here rather than by the enclave.
 * For tests of what happens to pool rows (claims, auth, reads) where the key's custody is not
 * under test; the private keys are returned so a test can sign as the wallet if it must.
 */
export async function seedFreeKeys(db: Db, count: number): Promise<SeededKey[]> {
  const keys: SeededKey[] = Array.from({ length: count }, () => {
    const privateKey = `0x${randomBytes(32).toString("hex")}` as const;
    const account = privateKeyToAccount(privateKey);
    return {
      keyRef: randomBytes(32).toString("hex"),
      address: account.address.toLowerCase() as `0x${string}`,
      privateKey,
    };
  });
  if (count === 0) return keys;
  const [batch] = await db
    .insert(keyBatches)
    .values({ size: count, status: "available" })
    .returning({ batchId: keyBatches.batchId });
  for (let i = 0; i < keys.length; i += 500) {
    await db.insert(keyPool).values(
      keys.slice(i, i + 500).map((key) => ({
        keyRef: key.keyRef,
        batchId: batch!.batchId,
        address: key.address,
        publicKey: privateKeyToAccount(key.privateKey).publicKey,
        status: "free",
      })),
    );
  }
  return keys;
}

/**
 * Test fixture: an identity on a free key (seedFreeKeys), for tests whose subject is what the
 * token does next; a refusal here is the fixture's failure, thrown with its code.
 */
export async function provisionedIdentity(
  db: Db,
  params: ProvisionIdentityParams,
): Promise<ProvisionedIdentity> {
  const result = await provisionIdentity(db, params);
  if (!result.ok) throw new Error(`provisioning failed: ${result.error.code}`);
  return result.value;
}

/** Test fixture: `count` operator identities with the read capability, each on a key seeded for it; their tokens. */
export async function readTokens(db: Db, count: number): Promise<string[]> {
  await seedFreeKeys(db, count);
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) {
    tokens.push((await provisionedIdentity(db, { capabilities: ["read"], origin: "operator" })).token);
  }
  return tokens;
}
