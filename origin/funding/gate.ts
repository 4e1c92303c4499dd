/**
 * The funding gate (docs/api.md, "The funding gate"): faucet and transfer move funds only for a
 * wallet whose identity is enabled, not revoked and verified, and whose key batch is backed up: the
 * wallet that sends a transfer, the wallet a payout pays, and a transfer's recipient when it is one
 * of the service's agent wallets. A batch without restore evidence holds the wallet to its pre-restore
 * ceiling, `zero_only` unless an active `approved_non_zero` exception grants one (balance after the
 * move ≤ ceiling). Only evidence of a restore into a new enclave from the recovery key counts. x402
 * skips this gate (docs/api.md#x402-stands-apart-from-transfers).
 */
import { type SQL, sql } from "drizzle-orm";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import { RESTORE_METHOD_NEW_ENCLAVE } from "../db/schema.ts";

export type GateReason =
  | "no_restore_evidence"
  | "ceiling_exceeded"
  | "identity_not_verified"
  | "identity_disabled"
  | "identity_revoked"
  | "batch_not_backed_up"
  | "treasury_low";

export type GateRefusal = { reason: GateReason; message: string };

/** What the gate needs to know of a wallet, as walletGateSql reads it. */
export type WalletGateRow = {
  enabled: boolean;
  /** Revocation leaves `enabled` as it was, and is final: nothing uses the wallet again. */
  revoked: boolean;
  verified: boolean;
  batch_status: string;
  restored: boolean;
  ceiling_units: string | null;
};

/**
 * The gate's facts about agent wallets (lowercase; a text[] expression, e.g. a parameter), as one
 * SQL expression: a JSON object from wallet to its facts; a wallet that is not the service's is
 * absent. Read with a caller's other checks, after its locks.
 */
export function walletGatesSql(wallets: SQL): SQL {
  return sql`(select json_object_agg(i.assigned_wallet, json_build_object(
      'enabled', i.enabled,
      'revoked', i.revoked,
      'verified', i.last_verified_at is not null,
      'batch_status', b.status,
      'restored', exists (select 1 from restore_evidence r
        where r.batch_id = k.batch_id and r.method = ${RESTORE_METHOD_NEW_ENCLAVE}),
      'ceiling_units', (select max(e.ceiling_units)::text from funding_exceptions e
        where e.wallet = i.assigned_wallet and e.revoked_at is null and e.expires_at > now())))
    from agent_identities i
    join key_pool k on k.key_ref = i.agent_transfer_key_ref
    join key_batches b on b.batch_id = k.batch_id
    where i.assigned_wallet = any(${wallets}))`;
}

/**
 * Whether the gate's verdict on `row` turns on the wallet's balance after the move: its identity
 * and batch let funds move, no restore drill has reproduced the batch, and an exception grants a
 * ceiling. It is the only case in which evaluateWalletGate reads the balance, so the only one in
 * which a caller needs to read it (gate.test.ts holds the two to each other).
 */
export function ceilingApplies(row: WalletGateRow | null): row is WalletGateRow {
  if (!row) return false;
  return (
    row.enabled &&
    !row.revoked &&
    row.verified &&
    row.batch_status === "available" &&
    !row.restored &&
    row.ceiling_units !== null
  );
}

/** The gate's verdict on a wallet whose balance after the move will be `balanceAfterWei`. */
export function evaluateWalletGate(row: WalletGateRow | null, balanceAfterWei: bigint): GateRefusal | null {
  if (!row) return { reason: "batch_not_backed_up", message: "the wallet is not one of this service's" };
  // Before the enabled flag, which a revocation leaves as it was: a disabled identity may be
  // enabled again, a revoked one never is.
  if (row.revoked) return { reason: "identity_revoked", message: "the identity is revoked" };
  if (!row.enabled) return { reason: "identity_disabled", message: "the identity is disabled" };
  if (!row.verified) {
    return { reason: "identity_not_verified", message: "the enclave has not yet proven custody of this key" };
  }
  if (row.batch_status !== "available") {
    return { reason: "batch_not_backed_up", message: "the key's batch has no verified backup" };
  }
  if (row.restored) return null;
  if (row.ceiling_units === null) {
    return {
      reason: "no_restore_evidence",
      message: "no restore drill has reproduced this key's batch yet; until one does, no funds may move",
    };
  }
  if (balanceAfterWei > BigInt(row.ceiling_units) * WEI_PER_UNIT) {
    return {
      reason: "ceiling_exceeded",
      message: `before a restore drill this wallet may hold at most ${row.ceiling_units} units`,
    };
  }
  return null;
}
