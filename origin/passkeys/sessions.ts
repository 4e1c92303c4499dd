/**
 * Console sessions (docs/operations.md#signing-in-with-a-passkey), kept in operator_sessions by the
 * SHA-256 of their token: the token is answered once and never stored, so the table alone signs
 * no one in. Looked up at every request, so a sign-out, an expiry or the passkey's revocation holds
 * from the next one.
 */
import { createHash, randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import type { Operator } from "../../shared/operator.ts";
import { type Db, queryRows } from "../db/client.ts";

/** Ours: how long a sign-in lasts; an operator signs in again after a working day. */
export const SESSION_HOURS = 8;

const tokenHash = (token: string): string => createHash("sha256").update(token).digest("hex");

export type StartedSession = { token: string; operator: Operator; expiresAt: Date };

/** A new session for the operator: 32 random bytes, base64url, stored only as their SHA-256. */
export async function startSession(db: Db, operator: Operator): Promise<StartedSession> {
  const token = randomBytes(32).toString("base64url");
  const [row] = await queryRows<{ expires_at: Date | string }>(
    db,
    sql`insert into operator_sessions (token_hash, operator, key_id, expires_at)
        values (${tokenHash(token)}, ${operator.name}, ${operator.keyId},
                now() + make_interval(hours => ${SESSION_HOURS}))
        returning expires_at`,
  );
  // Raw statements answer timestamps as text: one Date, whichever the driver gave.
  return { token, operator, expiresAt: new Date(row!.expires_at) };
}

export type LiveSession = { operator: Operator; expiresAt: Date };

/**
 * The session a token names, if it is neither expired nor ended, and the passkey that signed it in
 * is not revoked: revoking a passkey ends its sessions from their next request, whoever holds them
 * (docs/operations.md#revoking-a-passkey). Checked here rather than by ending the rows when the
 * passkey is revoked, so a sign-in that raced the revoke ends too.
 */
export async function findLiveSession(db: Db, token: string): Promise<LiveSession | null> {
  const [row] = await queryRows<{ operator: string; key_id: string; expires_at: Date | string }>(
    db,
    sql`select s.operator, s.key_id, s.expires_at from operator_sessions s
        where s.token_hash = ${tokenHash(token)} and s.ended_at is null and s.expires_at > now()
          and not exists (select 1 from operator_passkeys p
                          where p.key_id = s.key_id and p.revoked_at is not null)`,
  );
  return row
    ? { operator: { name: row.operator, keyId: row.key_id }, expiresAt: new Date(row.expires_at) }
    : null;
}

/**
 * Ends every live session of an operator (signing out everywhere: another browser, a lost
 * laptop) and answers how many it ended; those ended or expired already are left as they are.
 */
export async function endOperatorSessions(db: Db, operatorName: string): Promise<number> {
  const ended = await queryRows<{ token_hash: string }>(
    db,
    sql`update operator_sessions set ended_at = now()
        where operator = ${operatorName} and ended_at is null and expires_at > now()
        returning token_hash`,
  );
  return ended.length;
}

/** Ends the session a token names (signing out); ending an ended session changes nothing. */
export async function endSession(db: Db, token: string): Promise<void> {
  await db.execute(
    sql`update operator_sessions set ended_at = now() where token_hash = ${tokenHash(token)} and ended_at is null`,
  );
}

/**
 * Ours: days a session's row is kept once it has stopped working (expired, or ended at most
 * SESSION_HOURS before that), for whoever asks the database who signed in when; nothing in the
 * service reads an ended row.
 */
export const ENDED_SESSION_RETENTION_DAYS = 30;

/**
 * Deletes the sessions that expired more than ENDED_SESSION_RETENTION_DAYS days ago (an ended
 * session expires too, by SESSION_HOURS after it began); answers how many. A working day of
 * sign-ins is a few rows, so one statement does.
 */
export async function sweepEndedSessions(db: Db): Promise<number> {
  const deleted = await queryRows<{ token_hash: string }>(
    db,
    sql`delete from operator_sessions
        where expires_at < now() - make_interval(days => ${ENDED_SESSION_RETENTION_DAYS})
        returning token_hash`,
  );
  return deleted.length;
}
