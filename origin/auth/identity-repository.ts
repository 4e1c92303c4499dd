import { eq, inArray, sql } from "drizzle-orm";
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
  /** The agent has a spending policy (docs/agents.md#your-spending-policy). */
  hasPolicy: boolean;
};

function buildLookup(db: Db, arity: number) {
  const ids = Array.from({ length: arity }, (_, i) => sql.placeholder(`t${i}`));
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
      // One probe of agent_policies' key, in the lookup every request makes anyway.
      hasPolicy: sql<boolean>`exists(select 1 from agent_policies p where p.agent_id = ${agentIdentities.agentId})`,
    })
    .from(agentTokens)
    .innerJoin(agentIdentities, eq(agentIdentities.agentId, agentTokens.agentId))
    .where(arity === 1 ? eq(agentTokens.tokenId, ids[0]!) : inArray(agentTokens.tokenId, ids))
    .prepare(`agent_token_lookup_${arity}`);
}

/**
 * The lookup runs on every authenticated request, so its plan must be cached. A statement whose
 * parameter count is fixed gets a generic plan from Postgres after a few runs; `= any($1)` with an
 * array would be re-planned on every run (its custom plan, sized for the actual array, always
 * looks cheaper than the generic one), which doubled the query's cost. Batches are padded to the
 * next power of two (repeating an id; the index scan drops duplicates), so at most seven
 * statements exist per connection.
 */
const lookups = new WeakMap<Db, Map<number, ReturnType<typeof buildLookup>>>();

function lookupFor(db: Db, arity: number): ReturnType<typeof buildLookup> {
  let byArity = lookups.get(db);
  if (!byArity) {
    byArity = new Map();
    lookups.set(db, byArity);
  }
  let lookup = byArity.get(arity);
  if (!lookup) {
    lookup = buildLookup(db, arity);
    byArity.set(arity, lookup);
  }
  return lookup;
}

/** Reads the identities behind the given token ids in one indexed query. */
export async function findIdentitiesByTokenIds(
  db: Db,
  tokenIds: readonly string[],
): Promise<TokenIdentity[]> {
  if (tokenIds.length === 0) return [];
  let arity = 1;
  while (arity < tokenIds.length) arity *= 2;
  const values: Record<string, string> = {};
  for (let i = 0; i < arity; i++) values[`t${i}`] = tokenIds[Math.min(i, tokenIds.length - 1)]!;
  const rows = await lookupFor(db, arity).execute(values);
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

export type CreateTokenLookupOptions = {
  /** Distinct token ids per query. */
  maxBatch?: number;
  /** Queries out at once; more requests wait to join the next batch. */
  maxInFlight?: number;
  /** The batch read; tests wrap the real one to count round trips. */
  find?: typeof findIdentitiesByTokenIds;
};

/**
 * Token lookups go to the database in batches. A batch collects the requests of one event-loop
 * turn (setImmediate runs once the turn's I/O has been handled); while `maxInFlight` reads are
 * already out, it keeps collecting until one returns. A sequential caller therefore waits for
 * nothing, and under load one query answers many requests, which saves both processes the cost
 * of a round trip per request. Every read is sent after each of its requests arrived and nothing
 * is kept once it is answered, so each request sees the database as of its own arrival or later:
 * revocation and disable apply to the very next request.
 */
export function createTokenLookup(db: Db, options: CreateTokenLookupOptions = {}): TokenLookup {
  const maxBatch = options.maxBatch ?? 64;
  const maxInFlight = options.maxInFlight ?? 2;
  const find = options.find ?? findIdentitiesByTokenIds;
  type Waiter = { resolve: (identity: TokenIdentity | undefined) => void; reject: (error: unknown) => void };
  type Batch = { waiters: Map<string, Waiter[]>; due: boolean };
  // Batches not sent yet, oldest first. A batch is due once full or once its turn has ended; the
  // open one (if any) takes new arrivals until it is sent.
  const queue: Batch[] = [];
  let open: Batch | null = null;
  let inFlight = 0;

  const pump = (): void => {
    while (inFlight < maxInFlight && queue.length > 0 && queue[0]!.due) {
      const batch = queue.shift()!;
      if (open === batch) open = null;
      inFlight++;
      find(db, [...batch.waiters.keys()])
        .then(
          (identities) => {
            const byId = new Map(identities.map((identity) => [identity.tokenId, identity]));
            for (const [tokenId, waiters] of batch.waiters) {
              for (const waiter of waiters) waiter.resolve(byId.get(tokenId));
            }
          },
          (error: unknown) => {
            for (const waiters of batch.waiters.values()) for (const waiter of waiters) waiter.reject(error);
          },
        )
        .finally(() => {
          inFlight--;
          pump();
        });
    }
  };

  const close = (batch: Batch): void => {
    if (batch.due) return;
    batch.due = true;
    // Shipped now if a read may start; otherwise it stays open to later arrivals until one returns.
    pump();
  };

  return (tokenId) =>
    new Promise((resolve, reject) => {
      let batch = open;
      if (!batch) {
        const fresh: Batch = { waiters: new Map(), due: false };
        open = fresh;
        queue.push(fresh);
        batch = fresh;
        setImmediate(() => close(fresh));
      }
      const waiters = batch.waiters.get(tokenId) ?? [];
      waiters.push({ resolve, reject });
      batch.waiters.set(tokenId, waiters);
      if (batch.waiters.size >= maxBatch) {
        if (open === batch) open = null;
        close(batch);
      }
    });
}
