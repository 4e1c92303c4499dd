import { eq } from "drizzle-orm";
import type { Capability } from "../../shared/constants.ts";
import type { Db } from "../db/client.ts";
import { agentIdentities, agentTokens } from "../db/schema.ts";

export type TokenIdentity = {
  agentId: string;
  secretHash: Buffer;
  enabled: boolean;
  revoked: boolean;
  capabilities: Capability[];
  assignedWallet: `0x${string}`;
  keyRef: string;
};

/** One indexed read per request: revocation and disable apply to the very next request. */
export async function findIdentityByTokenId(db: Db, tokenId: string): Promise<TokenIdentity | undefined> {
  const [row] = await db
    .select({
      agentId: agentIdentities.agentId,
      secretHash: agentTokens.secretHash,
      enabled: agentIdentities.enabled,
      revoked: agentIdentities.revoked,
      capabilities: agentIdentities.capabilities,
      assignedWallet: agentIdentities.assignedWallet,
      keyRef: agentIdentities.agentTransferKeyRef,
    })
    .from(agentTokens)
    .innerJoin(agentIdentities, eq(agentIdentities.agentId, agentTokens.agentId))
    .where(eq(agentTokens.tokenId, tokenId))
    .limit(1);
  if (!row) return undefined;
  return {
    ...row,
    capabilities: row.capabilities as Capability[],
    assignedWallet: row.assignedWallet as `0x${string}`,
  };
}
