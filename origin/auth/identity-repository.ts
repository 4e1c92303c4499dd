import { eq, sql } from "drizzle-orm";
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

function buildLookup(db: Db) {
  return db
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
    .where(eq(agentTokens.tokenId, sql.placeholder("tokenId")))
    .limit(1)
    .prepare("agent_token_lookup");
}

// The lookup runs on every authenticated request: build it once per database handle and let
// Postgres keep the plan (a named prepared statement per connection).
const lookups = new WeakMap<Db, ReturnType<typeof buildLookup>>();

/** One indexed read per request: revocation and disable apply to the very next request. */
export async function findIdentityByTokenId(db: Db, tokenId: string): Promise<TokenIdentity | undefined> {
  let lookup = lookups.get(db);
  if (!lookup) {
    lookup = buildLookup(db);
    lookups.set(db, lookup);
  }
  const [row] = await lookup.execute({ tokenId });
  if (!row) return undefined;
  return {
    ...row,
    capabilities: row.capabilities as Capability[],
    assignedWallet: row.assignedWallet as `0x${string}`,
  };
}
