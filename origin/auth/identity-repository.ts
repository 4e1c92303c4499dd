import { eq, sql } from "drizzle-orm";
import type { Capability } from "../../shared/constants.ts";
import type { Db } from "../db/client.ts";
import { agentIdentities, agentTokens } from "../db/schema.ts";

export type TokenIdentity = {
  tokenId: string;
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
      tokenId: agentTokens.tokenId,
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
    .where(sql`${agentTokens.tokenId} = any(${sql.placeholder("tokenIds")}::text[])`)
    .prepare("agent_token_lookup");
}

// The lookup runs on every authenticated request: build it once per database handle and let
// Postgres keep the plan (a named prepared statement per connection).
const lookups = new WeakMap<Db, ReturnType<typeof buildLookup>>();

/** Reads the identities behind the given token ids in one indexed query. */
export async function findIdentitiesByTokenIds(
  db: Db,
  tokenIds: readonly string[],
): Promise<TokenIdentity[]> {
  let lookup = lookups.get(db);
  if (!lookup) {
    lookup = buildLookup(db);
    lookups.set(db, lookup);
  }
  const rows = await lookup.execute({ tokenIds });
  return rows.map((row) => ({
    ...row,
    capabilities: row.capabilities as Capability[],
    assignedWallet: row.assignedWallet as `0x${string}`,
  }));
}

/** One token's identity, read now (revocation and disable apply to the very next request). */
export async function findIdentityByTokenId(db: Db, tokenId: string): Promise<TokenIdentity | undefined> {
  const [identity] = await findIdentitiesByTokenIds(db, [tokenId]);
  return identity;
}

export type TokenLookup = (tokenId: string) => Promise<TokenIdentity | undefined>;

/**
 * Token lookups of the requests that arrive in the same event-loop turn go to the database as
 * one query, read after every one of them arrived (setImmediate runs once the turn's I/O has
 * been handled). Nothing outlives the turn, so each request still sees the database as of its
 * own arrival or later: revocation and disable still apply to the very next request.
 */
export type CreateTokenLookupOptions = {
  maxBatch?: number;
  /** The batch read; tests wrap the real one to count round trips. */
  find?: typeof findIdentitiesByTokenIds;
};

export function createTokenLookup(db: Db, options: CreateTokenLookupOptions = {}): TokenLookup {
  const maxBatch = options.maxBatch ?? 64;
  const find = options.find ?? findIdentitiesByTokenIds;
  type Waiter = { resolve: (identity: TokenIdentity | undefined) => void; reject: (error: unknown) => void };
  type Batch = { waiters: Map<string, Waiter[]>; sent: boolean };
  let open: Batch | null = null;

  const send = (batch: Batch): void => {
    if (batch.sent) return;
    batch.sent = true;
    if (open === batch) open = null;
    find(db, [...batch.waiters.keys()]).then(
      (identities) => {
        const byId = new Map(identities.map((identity) => [identity.tokenId, identity]));
        for (const [tokenId, waiters] of batch.waiters) {
          for (const waiter of waiters) waiter.resolve(byId.get(tokenId));
        }
      },
      (error: unknown) => {
        for (const waiters of batch.waiters.values()) for (const waiter of waiters) waiter.reject(error);
      },
    );
  };

  return (tokenId) =>
    new Promise((resolve, reject) => {
      let batch = open;
      if (!batch) {
        const fresh: Batch = { waiters: new Map(), sent: false };
        open = fresh;
        batch = fresh;
        setImmediate(() => send(fresh));
      }
      const waiters = batch.waiters.get(tokenId) ?? [];
      waiters.push({ resolve, reject });
      batch.waiters.set(tokenId, waiters);
      if (batch.waiters.size >= maxBatch) send(batch);
    });
}
