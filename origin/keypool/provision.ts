import { eq, sql } from "drizzle-orm";
import { z } from "zod";
import { CAPABILITIES, type Capability } from "../../shared/constants.ts";
import { issueToken } from "../auth/token.ts";
import type { Db } from "../db/client.ts";
import { agentIdentities, agentTokens, keyPool } from "../db/schema.ts";

export type ProvisionIdentityParams = {
  capabilities: readonly string[];
  origin: "operator" | "public";
};

export type ProvisionedIdentity = {
  /** Shown once to the caller; only its hash is stored. */
  token: string;
  agentId: string;
  assignedWallet: `0x${string}`;
  keyRef: string;
  capabilities: Capability[];
};

export type ProvisionFailure =
  | { code: "validation_failed"; message: string }
  | { code: "agent_key_pool_exhausted" }
  | { code: "agent_key_pool_busy" };

export type ProvisionResult =
  | { ok: true; value: ProvisionedIdentity }
  | { ok: false; error: ProvisionFailure };

const capabilitiesSchema = z
  .array(z.enum(CAPABILITIES))
  .min(1)
  .transform((list) => CAPABILITIES.filter((capability) => list.includes(capability)));

/** How long to wait for in-flight claims to settle before answering `busy`. */
const BUSY_RETRIES = [5, 10, 20, 40, 80];

/**
 * SPEC "Key pool entry": one transaction inserts the identity and its token and claims one free
 * key with a row lock that skips rows locked by others, so two provisionings never take the
 * same key. A claimed key never returns to the pool. With no free key, nothing is written.
 */
export async function provisionIdentity(db: Db, params: ProvisionIdentityParams): Promise<ProvisionResult> {
  const parsed = capabilitiesSchema.safeParse(params.capabilities);
  if (!parsed.success) {
    return {
      ok: false,
      error: {
        code: "validation_failed",
        message: `capabilities must be a non-empty subset of ${CAPABILITIES.join(", ")}`,
      },
    };
  }
  for (let attempt = 0; ; attempt++) {
    const result = await claimOnce(db, parsed.data, params.origin);
    // Every free row was locked by concurrent claims: once they commit, the pool is either
    // exhausted or has a key again; wait briefly before calling it busy.
    if (result.ok || result.error.code !== "agent_key_pool_busy" || attempt >= BUSY_RETRIES.length)
      return result;
    await new Promise((resolve) => setTimeout(resolve, BUSY_RETRIES[attempt]));
  }
}

async function claimOnce(
  db: Db,
  capabilities: Capability[],
  origin: "operator" | "public",
): Promise<ProvisionResult> {
  return db.transaction(async (tx) => {
    const [key] = await tx
      .select({ keyRef: keyPool.keyRef, address: keyPool.address })
      .from(keyPool)
      .where(eq(keyPool.status, "free"))
      .orderBy(keyPool.createdAt, keyPool.keyRef)
      .limit(1)
      .for("update", { skipLocked: true });
    if (!key) {
      // Without the lock, rows claimed by transactions still in flight still read as free.
      const [stillFree] = await tx
        .select({ keyRef: keyPool.keyRef })
        .from(keyPool)
        .where(eq(keyPool.status, "free"))
        .limit(1);
      return { ok: false, error: { code: stillFree ? "agent_key_pool_busy" : "agent_key_pool_exhausted" } };
    }
    const [identity] = await tx
      .insert(agentIdentities)
      .values({ assignedWallet: key.address, agentTransferKeyRef: key.keyRef, capabilities, origin })
      .returning({ agentId: agentIdentities.agentId });
    const agentId = identity!.agentId;
    await tx
      .update(keyPool)
      .set({ status: "assigned", assignedAgentId: agentId, assignedAt: sql`now()` })
      .where(eq(keyPool.keyRef, key.keyRef));
    const token = issueToken();
    await tx.insert(agentTokens).values({ tokenId: token.tokenId, agentId, secretHash: token.secretHash });
    return {
      ok: true,
      value: {
        token: token.token,
        agentId,
        assignedWallet: key.address as `0x${string}`,
        keyRef: key.keyRef,
        capabilities,
      },
    };
  });
}
