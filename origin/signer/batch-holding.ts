/**
 * Whether the enclave holds a key of every key batch whose keys this database assigns to agents:
 * the origin's start check (startup/keys-held.ts). A recovery restores whole batches, one backup
 * file each, and `npm run recover` sees only the files of the folder it is given: a batch whose
 * file was missing from it (or refused) leaves its wallets without a key while every other batch
 * is held. The oldest and the newest identity's keys, which /healthz asks (key-holding.ts), say
 * nothing of the batches between; this asks one assigned key of each batch, and names the batches
 * it finds missing, with their backup files and their agents' wallets, so the operator knows which
 * file to restore. Read-only (`public_identity`, no capability). Revoked identities are left out:
 * their tokens never work again, and revoking them is how a node starts without a batch whose
 * every copy is lost.
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../db/client.ts";
import type { KeyLookup } from "./key-holding.ts";

export type MissingBatch = {
  batchId: string;
  /** The backup file the refill wrote for it, as key_batches records it (null when none is). */
  backupFile: string | null;
  /** Its agents' wallets (not revoked), oldest first. */
  wallets: string[];
};

export type BatchHoldingReport = {
  /** Batches holding a key assigned to an identity that is not revoked. */
  checked: number;
  missing: MissingBatch[];
  /** The signer failure's code when the enclave could not be asked: nothing is concluded then. */
  error?: string;
};

/** One assigned key of each batch (keys not in the pool, should there be any, each on their own). */
type BatchSample = { batch: string; batch_id: string | null; key_ref: string; wallet: string };

export async function checkEveryBatchHeld(db: Db, lookup: KeyLookup): Promise<BatchHoldingReport> {
  const samples = await queryRows<BatchSample>(
    db,
    sql`select distinct on (coalesce(p.batch_id::text, i.agent_transfer_key_ref))
          coalesce(p.batch_id::text, i.agent_transfer_key_ref) as batch,
          p.batch_id::text as batch_id, i.agent_transfer_key_ref as key_ref, i.assigned_wallet as wallet
        from agent_identities i
        left join key_pool p on p.key_ref = i.agent_transfer_key_ref
        where not i.revoked
        order by coalesce(p.batch_id::text, i.agent_transfer_key_ref), i.created_at, i.agent_id`,
  );
  const missingSamples: BatchSample[] = [];
  for (const sample of samples) {
    const answer = await lookup({ keyRef: sample.key_ref });
    if (answer.ok) {
      if (answer.value.address.toLowerCase() !== sample.wallet.toLowerCase()) missingSamples.push(sample);
      continue;
    }
    // The enclave's answer for a key it does not hold (no oracle: docs/security.md).
    if (answer.error.code === "key_purpose_mismatch") {
      missingSamples.push(sample);
      continue;
    }
    return { checked: samples.length, missing: [], error: answer.error.code };
  }
  const missing: MissingBatch[] = [];
  for (const sample of missingSamples) missing.push(await describeMissing(db, sample));
  return { checked: samples.length, missing };
}

/** The batch's backup file and its agents' wallets, for the operator to know what to restore. */
async function describeMissing(db: Db, sample: BatchSample): Promise<MissingBatch> {
  if (sample.batch_id === null) return { batchId: sample.batch, backupFile: null, wallets: [sample.wallet] };
  const [batch] = await queryRows<{ backup_path: string | null }>(
    db,
    sql`select backup_path from key_batches where batch_id = ${sample.batch_id}::uuid`,
  );
  const wallets = await queryRows<{ wallet: string }>(
    db,
    sql`select i.assigned_wallet as wallet from agent_identities i
        join key_pool p on p.key_ref = i.agent_transfer_key_ref
        where p.batch_id = ${sample.batch_id}::uuid and not i.revoked
        order by i.created_at, i.agent_id`,
  );
  return {
    batchId: sample.batch_id,
    backupFile: batch?.backup_path ?? null,
    wallets: wallets.map((row) => row.wallet),
  };
}

/** How many batches, and wallets of each, the start's refusal names before "and N more". */
const NAMED_BATCHES = 10;
const NAMED_WALLETS = 10;

/** The start's refusal: what is missing, and what the operator does about it. */
export function missingBatchesText(report: BatchHoldingReport): string {
  const { missing } = report;
  const named = missing.slice(0, NAMED_BATCHES).map((batch) => {
    const file = batch.backupFile ? `backup file ${batch.backupFile}` : "no backup file recorded";
    const more = batch.wallets.length - NAMED_WALLETS;
    const wallets = batch.wallets.slice(0, NAMED_WALLETS).join(", ") + (more > 0 ? ` and ${more} more` : "");
    return `batch ${batch.batchId} (${file}; its agents' wallets: ${wallets})`;
  });
  const moreBatches = missing.length - NAMED_BATCHES;
  return (
    `the enclave does not hold the keys this database assigns to its agents in ${missing.length} of ` +
    `${report.checked} key batches (it was initialised afresh, is another enclave, or a batch's backup ` +
    `was not restored): nothing was changed. Missing: ${named.join("; ")}` +
    `${moreBatches > 0 ? `; and ${moreBatches} more batches` : ""}. Restore each from its backup file with ` +
    `the recovery runbook (docs/operations.md, "Disaster recovery": npm run recover with a folder holding ` +
    `it) before serving traffic. A batch with no copy of its backup left cannot be restored, nor its ` +
    `wallets' funds moved: revoking its agents (npm run agents -- revoke) lets the origin start without it`
  );
}
