import { and, eq, inArray, sql } from "drizzle-orm";
import { type Db, queryRows } from "../db/client.ts";
import { keyBatches, keyPool } from "../db/schema.ts";

/** The key batch states, in order; `failed` may be reached from any intermediate one. */
export const IN_PROGRESS_STATES = ["requested", "generated", "backup_written", "backup_verified"] as const;
export type BatchState = (typeof IN_PROGRESS_STATES)[number] | "available" | "failed";

export type GeneratedKey = { keyRef: string; publicKey: string; address: string };

export async function createBatch(db: Db, size: number): Promise<string> {
  const [row] = await db
    .insert(keyBatches)
    .values({ size, status: "requested" })
    .returning({ id: keyBatches.batchId });
  return row!.id;
}

/** The advisory lock key of a refill's decision to start a batch ("kpoo" in ASCII), one per database. */
export const START_BATCH_LOCK = 0x6b706f6f;

/**
 * Creates a batch of `size` only while the free stock and the batches on their way (poolStock) are
 * short of `target`, or answers null. The read and the insert are one decision under an advisory
 * lock: refills of several origins woken together each read the same shortfall, and each made it
 * up in full, where one of them should.
 */
export async function createBatchWhileShort(
  db: Db,
  params: { size: number; target: number },
): Promise<string | null> {
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${START_BATCH_LOCK})`);
    const stock = await poolStock(tx);
    if (stock.free + stock.pendingInBatches >= params.target) return null;
    return createBatch(tx, params.size);
  });
}

/**
 * Moves a batch from `from` to `to` only if it is still in `from`, so a batch the sweeper has
 * failed meanwhile is never resurrected. Returns false when the batch had moved on.
 */
export async function advanceBatch(
  db: Db,
  batchId: string,
  from: BatchState,
  to: BatchState,
  fields: { backupPath?: string; backupSha256?: string } = {},
): Promise<boolean> {
  const updated = await db
    .update(keyBatches)
    .set({ status: to, statusChangedAt: sql`clock_timestamp()`, ...fields })
    .where(and(eq(keyBatches.batchId, batchId), eq(keyBatches.status, from)))
    .returning({ id: keyBatches.batchId });
  return updated.length === 1;
}

/**
 * requested → generated, storing the enclave's public keys as `pending`: one statement, atomic as
 * any, where a transaction took four round trips. No key is stored unless the batch moved.
 */
export async function recordGeneratedKeys(db: Db, batchId: string, keys: GeneratedKey[]): Promise<boolean> {
  // Three array parameters, not five per key: building the query for a batch of 100 keys one
  // value at a time cost about 9 ms of the origin's CPU.
  const [row] = await queryRows<{ stored: number }>(
    db,
    sql`
    with advanced as (
      update key_batches set status = 'generated', status_changed_at = clock_timestamp()
      where batch_id = ${batchId} and status = 'requested'
      returning batch_id
    ), stored as (
      insert into key_pool (key_ref, batch_id, address, public_key, status)
      select generated.key_ref, advanced.batch_id, generated.address, generated.public_key, 'pending'
      from advanced, unnest(
        ${sql.param(keys.map((key) => key.keyRef))}::text[],
        ${sql.param(keys.map((key) => key.address.toLowerCase()))}::text[],
        ${sql.param(keys.map((key) => key.publicKey.toLowerCase()))}::text[]
      ) as generated(key_ref, address, public_key)
      returning 1
    )
    select count(*)::int as stored from stored`,
  );
  return (row?.stored ?? 0) > 0;
}

/** backup_verified → available and its keys pending → free, together, in one statement. */
export async function releaseBatch(db: Db, batchId: string): Promise<boolean> {
  const [row] = await queryRows<{ released: number }>(
    db,
    sql`
    with released as (
      update key_batches set status = 'available', status_changed_at = clock_timestamp()
      where batch_id = ${batchId} and status = 'backup_verified'
      returning batch_id
    ), freed as (
      update key_pool set status = 'free'
      where batch_id in (select batch_id from released) and status = 'pending'
    )
    select count(*)::int as released from released`,
  );
  return row?.released === 1;
}

/** Fails a batch that is still in progress and quarantines its keys; keys never become free. */
export async function failBatch(db: Db, batchId: string, reason: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    const failed = await tx
      .update(keyBatches)
      .set({ status: "failed", failureReason: reason, statusChangedAt: sql`clock_timestamp()` })
      .where(and(eq(keyBatches.batchId, batchId), inArray(keyBatches.status, [...IN_PROGRESS_STATES])))
      .returning({ id: keyBatches.batchId });
    if (failed.length === 0) return false;
    await tx
      .update(keyPool)
      .set({ status: "quarantined" })
      .where(and(eq(keyPool.batchId, batchId), eq(keyPool.status, "pending")));
    return true;
  });
}

/**
 * Batches that have sat in an intermediate state for more than `stuckAfterSeconds`, by the
 * database's clock: it stamps each step (clock_timestamp()), so it alone says how long ago that
 * was. Against the origin's clock, a host five minutes ahead would find a batch that stepped a
 * moment ago five minutes old, and fail it while the refill is still making it.
 */
export async function findStuckBatches(
  db: Db,
  stuckAfterSeconds: number,
): Promise<{ batchId: string; status: string }[]> {
  return db
    .select({ batchId: keyBatches.batchId, status: keyBatches.status })
    .from(keyBatches)
    .where(
      and(
        inArray(keyBatches.status, [...IN_PROGRESS_STATES]),
        sql`${keyBatches.statusChangedAt} < clock_timestamp() - make_interval(secs => ${stuckAfterSeconds})`,
      ),
    );
}

export type PoolStock = { free: number; pendingInBatches: number };

/**
 * How long after its last step a batch still counts as on its way. Each step takes well under a
 * second on a working enclave and disk; a batch silent for longer was left by a process that died
 * between its steps, and waits for the sweeper (KEY_BATCH_STUCK_SECONDS, 300 by default). Counted
 * meanwhile, its keys, which will never be free, would hold the refill back and leave a node at
 * the reserve refusing registrations. A batch that is only slow costs at worst one batch too many.
 */
export const BATCH_STEP_SILENT_SECONDS = 60;

/**
 * Free keys, and keys of batches still on their way to `available` (they will become free; a batch
 * silent for BATCH_STEP_SILENT_SECONDS is not). Read
 * through the free keys' partial index and the batches' status index: a count over key_pool
 * itself read every key ever assigned, about 30 ms at 300,000 keys, once a refill round and on
 * every console overview. A batch past `requested` holds exactly its size in pending keys
 * (recordGeneratedKeys inserts them as it advances), so its size counts them.
 */
export async function poolStock(db: Db): Promise<PoolStock> {
  const [row] = await db
    .select({
      free: sql<number>`(select count(*)::int from ${keyPool} where ${keyPool.status} = 'free')`,
      pending: sql<number>`coalesce(sum(${keyBatches.size}), 0)::int`,
    })
    .from(keyBatches)
    .where(
      and(
        inArray(keyBatches.status, [...IN_PROGRESS_STATES]),
        sql`${keyBatches.statusChangedAt} > clock_timestamp() - make_interval(secs => ${BATCH_STEP_SILENT_SECONDS})`,
      ),
    );
  return { free: row?.free ?? 0, pendingInBatches: row?.pending ?? 0 };
}
