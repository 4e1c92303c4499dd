/**
 * A settlement as its status routes answer it (docs/x402.md#settlement-status), read from the one
 * rendering Postgres keeps (migration 0020's `x402_settlement_view`), by the payment's
 * (payer, nonce) or by its transaction's hash. A settlement's rows are the claim (x402_settlements)
 * and its transaction (outgoing_transactions); the words are the claim's own states, which
 * follow the transaction's (outbox-follower.ts).
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../../db/client.ts";
import type { SettlementState } from "../../db/schema/x402.ts";
import { type AuthorizationUseColumns, authorizationUseColumns } from "./used-elsewhere.ts";

/**
 * `{status, payer, payee, amount, network, transaction, block_number, reason?,
 * authorization_used_elsewhere?, updated_at}`.
 */
export type SettlementView = {
  status: SettlementState;
  payer: string;
  payee: string;
  /** 6-decimal units, a decimal string. */
  amount: string;
  /** CAIP-2, as the facilitator's other answers name it. */
  network: string;
  /** The settler transaction's hash; null while nothing is signed. */
  transaction: string | null;
  /** The block it was mined in, a decimal string; null until then (and for one never mined). */
  block_number: string | null;
  /** Why a `failed` or `reverted` settlement moved nothing; absent otherwise. */
  reason?: string;
  /**
   * For a `failed` or `reverted` settlement: true when another relayer's transaction used its
   * authorization (the payee was paid by that transaction), false when the chain holds it unused,
   * null when that is not known; absent otherwise.
   */
  authorization_used_elsewhere?: boolean | null;
  updated_at: string;
};

/** How a settlement is looked up: the payment's (payer, nonce), or its transaction's hash; all lower case. */
export type SettlementKey = { payer: string; nonce: string } | { transaction: string };

/**
 * A settlement as its routes answer it, with the nonce of its payment (for a look-up by hash) and
 * whether its authorization's use is final (used-elsewhere.ts authorizationUseColumns).
 */
export type SettlementRead = { view: SettlementView; nonce: string } & AuthorizationUseColumns;

/**
 * The settlement, or undefined when none is known by that key. `marginSeconds`:
 * AGENT_X402_VALIDITY_MARGIN_SECONDS, for when its authorization's use is final.
 */
export async function readSettlementView(
  db: Db,
  key: SettlementKey,
  marginSeconds: number,
): Promise<SettlementRead | undefined> {
  const use = authorizationUseColumns(marginSeconds);
  const [row] = await queryRows<SettlementRead>(
    db,
    "transaction" in key
      ? // By the transaction's own unique key, then the claim's index on tx_id: the claim keeps
        // no index on its hash.
        sql`select x402_settlement_view(x, t) as view, x.nonce, ${use}
            from outgoing_transactions t join x402_settlements x on x.tx_id = t.tx_id
            where t.tx_hash = ${key.transaction} and t.purpose = 'settlement'`
      : sql`select x402_settlement_view(x, t) as view, x.nonce, ${use}
            from x402_settlements x left join outgoing_transactions t on t.tx_id = x.tx_id
            where x.payer = ${key.payer} and x.nonce = ${key.nonce}`,
  );
  return row;
}

/** Whether a settlement of the payment (`from`, `nonce`) is kept, whatever its state. */
export async function hasSettlement(db: Db, payment: { from: string; nonce: string }): Promise<boolean> {
  const rows = await queryRows(
    db,
    sql`select 1 from x402_settlements where payer = ${payment.from} and nonce = ${payment.nonce}`,
  );
  return rows.length > 0;
}

/**
 * Whether the payment's settlement is signed (its transaction stored): nothing more is ever signed
 * for its (from, nonce), whoever presents it (a signed claim is never taken over, settle.ts).
 */
export async function hasSignedSettlement(
  db: Db,
  payment: { from: string; nonce: string },
): Promise<boolean> {
  const rows = await queryRows(
    db,
    sql`select 1 from x402_settlements
        where payer = ${payment.from} and nonce = ${payment.nonce} and tx_id is not null`,
  );
  return rows.length > 0;
}
