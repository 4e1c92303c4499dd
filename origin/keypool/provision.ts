import { eq, sql } from "drizzle-orm";
import * as z from "zod";
import { CAPABILITIES, type Capability } from "../../shared/constants.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { sleep } from "../../shared/sleep.ts";
import { issueToken } from "../auth/token.ts";
import { type Batcher, createBatcher } from "../db/batcher.ts";
import { type Db, queryRows } from "../db/client.ts";
import { CommitOutcomeUnknown, transactionAnsweringLostCommit } from "../db/lost-commit.ts";
import { keyPool } from "../db/schema.ts";

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

export type ProvisionResult = Result<ProvisionedIdentity, ProvisionFailure>;

/**
 * Thrown by provisionIdentity when the database link was lost while the identity's transaction
 * committed and whether it did could not be learnt: the identity may be there, with a token
 * nobody was shown. Names it (never its token), so the operator can look for it and, if it is
 * there, give it a new token.
 */
export class ProvisionOutcomeUnknown extends Error {
  override readonly name = "ProvisionOutcomeUnknown";
  readonly agentId: string;
  readonly assignedWallet: `0x${string}`;
  constructor(
    identity: Pick<ProvisionedIdentity, "agentId" | "assignedWallet">,
    cause: CommitOutcomeUnknown,
  ) {
    super(
      `the identity ${identity.agentId} (wallet ${identity.assignedWallet}) may have been made: ${cause.message}`,
      { cause },
    );
    this.agentId = identity.agentId;
    this.assignedWallet = identity.assignedWallet;
  }
}

const capabilitiesSchema = z
  .array(z.enum(CAPABILITIES))
  .min(1)
  .transform((list) => CAPABILITIES.filter((capability) => list.includes(capability)));

/** How long to wait for in-flight claims to settle before answering `busy`. */
const BUSY_RETRIES = [5, 10, 20, 40, 80];

/**
 * One transaction (docs/api.md#identities-keys-and-the-sweep) inserts the identity and its token
 * and claims one free key with a row lock that skips rows locked by others, so two provisionings
 * never take the same key. A claimed key never returns to the pool. With no free key, nothing is
 * written.
 */
export async function provisionIdentity(db: Db, params: ProvisionIdentityParams): Promise<ProvisionResult> {
  const parsed = capabilitiesSchema.safeParse(params.capabilities);
  if (!parsed.success) {
    return err({
      code: "validation_failed",
      message: `capabilities must be a non-empty subset of ${CAPABILITIES.join(", ")}`,
    });
  }
  for (let attempt = 0; ; attempt++) {
    const result = await claimOnce(db, parsed.data, params.origin);
    // Every free row was locked by concurrent claims: once they commit, the pool is either
    // exhausted or has a key again; wait briefly before calling it busy.
    if (result.ok || result.error.code !== "agent_key_pool_busy" || attempt >= BUSY_RETRIES.length)
      return result;
    await sleep(BUSY_RETRIES[attempt]!);
  }
}

async function claimOnce(
  db: Db,
  capabilities: Capability[],
  origin: "operator" | "public",
): Promise<ProvisionResult> {
  let claim = claimBatchers.get(db);
  if (!claim) {
    claim = createBatcher((requests) => claimTogether(db, requests), {
      maxBatch: MAX_CLAIMS_TOGETHER,
      maxInFlight: 2,
      keyOf: (request) => `${request.origin}:${request.capabilities.join(",")}`,
    });
    claimBatchers.set(db, claim);
  }
  const result = await claim({ capabilities, origin });
  if (result instanceof ProvisionOutcomeUnknown) throw result;
  return result;
}

/**
 * Provisionings that arrive together share one transaction and one commit: a transaction each
 * was bounded by the commit's flush (about 500 a second with 32 callers, docs/performance.md). A
 * batch holds one kind of identity (its origin and capabilities); its callers get its keys, oldest
 * first, in the order they called. Two batches run at once, so either may take the oldest keys.
 */
const MAX_CLAIMS_TOGETHER = 64;
const claimBatchers = new WeakMap<
  Db,
  Batcher<ClaimKeyForIdentityParams, ProvisionResult | ProvisionOutcomeUnknown>
>();

async function claimTogether(
  db: Db,
  requests: ClaimKeyForIdentityParams[],
): Promise<(ProvisionResult | ProvisionOutcomeUnknown)[]> {
  const { capabilities, origin } = requests[0]!;
  /** What this transaction writes: what a commit without an answer made. */
  let writing: ClaimedKeys | undefined;
  try {
    // The tokens are shown nowhere but in this answer: a commit whose answer the lost link took
    // would leave identities, and their keys, taken by tokens nobody holds.
    const claimed = await transactionAnsweringLostCommit(
      db,
      async (tx, committing): Promise<ClaimKeysResult> => {
        const result = await claimKeysForIdentities(tx, { capabilities, origin, count: requests.length });
        if (!result.ok) return result;
        writing = result.value;
        const [first] = result.value.identities;
        return committing(result, {
          // The claim locked its keys' rows, and updated them, until its end.
          awaitEnd: sql`select 1 from key_pool where key_ref = ${first!.keyRef} for share`,
          made: sql`select 1 from agent_identities where agent_id = ${first!.agentId}::uuid`,
        });
      },
    );
    return requests.map((_, index) => {
      if (!claimed.ok) return claimed;
      const identity = claimed.value.identities[index];
      return identity ? ok(identity) : err({ code: claimed.value.shortfall! });
    });
  } catch (error) {
    if (!(error instanceof CommitOutcomeUnknown) || writing === undefined) throw error;
    const { identities, shortfall } = writing;
    // Each caller is told of its own identity, which may have been made or not; one the claim
    // found no key for was not.
    return requests.map((_, index) => {
      const identity = identities[index];
      return identity ? new ProvisionOutcomeUnknown(identity, error) : err({ code: shortfall! });
    });
  }
}

export type ClaimKeyForIdentityParams = {
  /** Already validated against the closed enum (provisionIdentity parses them at its boundary). */
  capabilities: readonly Capability[];
  origin: "operator" | "public";
};

/**
 * The claim itself, inside the caller's transaction (the owner of an invariant opens the
 * transaction and passes `tx` down). See claimKeysForIdentities; this is the one-key case.
 */
export async function claimKeyForIdentity(
  tx: Db,
  params: ClaimKeyForIdentityParams,
): Promise<ProvisionResult> {
  const claimed = await claimKeysForIdentities(tx, { ...params, count: 1 });
  return claimed.ok ? ok(claimed.value.identities[0]!) : claimed;
}

export type ClaimKeysForIdentitiesParams = ClaimKeyForIdentityParams & { count: number };

type ClaimFailure = Exclude<ProvisionFailure, { code: "validation_failed" }>;

/** `shortfall`: why fewer identities than asked for were made. */
type ClaimedKeys = { identities: ProvisionedIdentity[]; shortfall?: ClaimFailure["code"] };

export type ClaimKeysResult = Result<ClaimedKeys, ClaimFailure>;

/**
 * Up to `count` identities, each on its own key, inside the caller's transaction: one statement
 * takes the oldest free keys with a row lock that skips rows locked by others, inserts an
 * identity and its token for each, and marks the keys assigned. Fewer keys than asked for: the
 * identities that could be made, in order. None: busy or exhausted, and nothing is written.
 */
export async function claimKeysForIdentities(
  tx: Db,
  params: ClaimKeysForIdentitiesParams,
): Promise<ClaimKeysResult> {
  const tokens = Array.from({ length: params.count }, () => issueToken());
  const capabilities = CAPABILITIES.filter((capability) => params.capabilities.includes(capability));
  const list = <T>(values: T[], cast: string) =>
    sql`array[${sql.join(
      values.map((value) => sql`${value}`),
      sql`, `,
    )}]::${sql.raw(cast)}`;
  const claimed = await queryRows<{
    n: string;
    agent_id: string;
    assigned_wallet: string;
    agent_transfer_key_ref: string;
  }>(
    tx,
    sql`with claimed as (
          select key_ref, address, row_number() over (order by created_at, key_ref) as n
          from (
            select key_ref, address, created_at from key_pool
            where status = 'free'
            order by created_at, key_ref
            limit ${params.count}
            for update skip locked
          ) free_keys
        ), identity as (
          insert into agent_identities (assigned_wallet, agent_transfer_key_ref, capabilities, origin)
          select address, key_ref, ${`{${capabilities.join(",")}}`}::text[], ${params.origin} from claimed order by n
          returning agent_id, assigned_wallet, agent_transfer_key_ref
        ), assigned as (
          update key_pool set status = 'assigned', assigned_agent_id = identity.agent_id, assigned_at = now()
          from identity where key_pool.key_ref = identity.agent_transfer_key_ref
        ), token as (
          insert into agent_tokens (token_id, agent_id, secret_hash)
          select t.token_id, identity.agent_id, t.secret_hash
          from identity
          join claimed on claimed.key_ref = identity.agent_transfer_key_ref
          join unnest(${list(
            tokens.map((token) => token.tokenId),
            "text[]",
          )}, ${list(
            tokens.map((token) => token.secretHash),
            "bytea[]",
          )}) with ordinality as t(token_id, secret_hash, n) on t.n = claimed.n
        )
        select claimed.n, identity.agent_id, identity.assigned_wallet, identity.agent_transfer_key_ref
        from identity join claimed on claimed.key_ref = identity.agent_transfer_key_ref
        order by claimed.n`,
  );
  let shortfall: ClaimFailure["code"] | undefined;
  if (claimed.length < params.count) {
    // Without the lock, rows claimed by transactions still in flight still read as free.
    const [stillFree] = await tx
      .select({ keyRef: keyPool.keyRef })
      .from(keyPool)
      .where(eq(keyPool.status, "free"))
      .limit(1);
    shortfall = stillFree ? "agent_key_pool_busy" : "agent_key_pool_exhausted";
  }
  if (claimed.length === 0) return err({ code: shortfall! });
  return ok({
    identities: claimed.map((row) => ({
      token: tokens[Number(row.n) - 1]!.token,
      agentId: row.agent_id,
      assignedWallet: row.assigned_wallet as `0x${string}`,
      keyRef: row.agent_transfer_key_ref,
      capabilities,
    })),
    ...(shortfall ? { shortfall } : {}),
  });
}
