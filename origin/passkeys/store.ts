/**
 * The origin's records of operators' passkeys (db/schema/passkeys.ts): credentials registered in
 * the console, pending until the policy authority enrolls them in the enclave, and the audit of each
 * change a passkey approved. Public parts only: the origin never holds a passkey's private key.
 */
import { sql } from "drizzle-orm";
import { err, ok, type Result } from "../../shared/result.ts";
import { type Db, queryRows } from "../db/client.ts";

export type PendingPasskey = {
  credentialId: string;
  keyId: string;
  operator: string;
  publicKey: string;
  rpId: string;
  origin: string;
  enrolledAt: Date | null;
  /** When it was revoked (docs/operations.md#revoking-a-passkey); null while it is not. */
  revokedAt: Date | null;
  revokedReason: string | null;
};

type Row = {
  credential_id: string;
  key_id: string;
  operator: string;
  public_key: string;
  rp_id: string;
  origin: string;
  enrolled_at: Date | null;
  revoked_at: Date | string | null;
  revoked_reason: string | null;
};

const fromRow = (row: Row): PendingPasskey => ({
  credentialId: row.credential_id,
  keyId: row.key_id,
  operator: row.operator,
  publicKey: row.public_key,
  rpId: row.rp_id,
  origin: row.origin,
  enrolledAt: row.enrolled_at,
  // Raw statements answer timestamps as text: one Date, whichever the driver gave.
  revokedAt: row.revoked_at === null ? null : new Date(row.revoked_at),
  revokedReason: row.revoked_reason,
});

const COLUMNS = sql.raw(
  "credential_id, key_id, operator, public_key, rp_id, origin, enrolled_at, revoked_at, revoked_reason",
);

/**
 * Keeps a registered credential, pending, and answers the row kept; or, when its credential id or
 * its key (key id) is registered already, changes nothing and answers the row that holds it.
 */
export async function savePendingPasskey(
  db: Db,
  passkey: Omit<PendingPasskey, "enrolledAt" | "revokedAt" | "revokedReason">,
): Promise<Result<PendingPasskey, { code: "already_registered"; kept: PendingPasskey }>> {
  const [saved] = await queryRows<Row>(
    db,
    sql`insert into operator_passkeys (credential_id, key_id, operator, public_key, rp_id, origin)
        values (${passkey.credentialId}, ${passkey.keyId}, ${passkey.operator}, ${passkey.publicKey},
          ${passkey.rpId}, ${passkey.origin})
        on conflict do nothing
        returning ${COLUMNS}`,
  );
  if (saved) return ok(fromRow(saved));
  const [kept] = await queryRows<Row>(
    db,
    sql`select ${COLUMNS}
        from operator_passkeys where credential_id = ${passkey.credentialId} or key_id = ${passkey.keyId}
        order by credential_id = ${passkey.credentialId} desc limit 1`,
  );
  // Rows are never deleted: the conflicting one is there.
  if (!kept) throw new Error("a passkey conflicted with a row that is not there");
  return err({ code: "already_registered", kept: fromRow(kept) });
}

/** One registered credential, by its credential id or its key id. */
export async function findPasskey(db: Db, id: string): Promise<PendingPasskey | null> {
  const [row] = await queryRows<Row>(
    db,
    sql`select ${COLUMNS}
        from operator_passkeys where credential_id = ${id} or key_id = ${id}`,
  );
  return row ? fromRow(row) : null;
}

/** Every registered credential, pending or enrolled, newest first. */
export async function listPasskeys(db: Db): Promise<PendingPasskey[]> {
  const rows = await queryRows<Row>(
    db,
    sql`select ${COLUMNS}
        from operator_passkeys order by created_at desc, credential_id`,
  );
  return rows.map(fromRow);
}

/** Who revoked a passkey and why, as the audit shows it. */
export type Revocation = {
  reason: string;
  source: "console" | "cli";
  /** The operator signed in with a passkey who revoked it; null under the shared tokens or the CLI. */
  by: { name: string; keyId: string } | null;
};

/**
 * Records a passkey revoked (after the enclave revoked it, for an enrolled one) and answers its row;
 * a passkey revoked already keeps its first revocation, and its row is answered as it is.
 */
export async function markRevoked(db: Db, keyId: string, revocation: Revocation): Promise<PendingPasskey> {
  const [row] = await queryRows<Row>(
    db,
    sql`update operator_passkeys
        set revoked_at = coalesce(revoked_at, now()),
            revoked_reason = coalesce(revoked_reason, ${revocation.reason}),
            revoked_source = coalesce(revoked_source, ${revocation.source}),
            revoked_by = case when revoked_at is null then ${revocation.by?.name ?? null}::text else revoked_by end,
            revoked_by_key_id = case when revoked_at is null then ${revocation.by?.keyId ?? null}::text else revoked_by_key_id end
        where key_id = ${keyId}
        returning ${COLUMNS}`,
  );
  // Rows are never deleted: the caller found it.
  if (!row) throw new Error(`no passkey ${keyId} to mark revoked`);
  return fromRow(row);
}

/** Marks a credential enrolled, once the enclave sealed it. */
export async function markEnrolled(db: Db, credentialId: string): Promise<void> {
  await db.execute(
    sql`update operator_passkeys set enrolled_at = coalesce(enrolled_at, now()) where credential_id = ${credentialId}`,
  );
}

/**
 * The audit of one change a passkey approved: who, with which passkey, what they were shown. Given
 * the change's own transaction (`tx`), so the change and its audit commit together or not at all.
 */
export async function recordPasskeyApproval(
  tx: Db,
  approval: { keyId: string; operator: string; op: string; subject: string; shown: unknown },
): Promise<void> {
  await tx.execute(
    sql`insert into passkey_approvals (key_id, operator, op, subject, shown)
        values (${approval.keyId}, ${approval.operator}, ${approval.op}, ${approval.subject},
          ${JSON.stringify(approval.shown)}::jsonb)`,
  );
}
