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

/** `{status, payer, payee, amount, network, transaction, block_number, reason?, updated_at}`. */
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
  updated_at: string;
};

/** How a settlement is looked up: the payment's (payer, nonce), or its transaction's hash; all lower case. */
export type SettlementKey = { payer: string; nonce: string } | { transaction: string };

/** The settlement, or undefined when none is known by that key. */
export async function readSettlementView(db: Db, key: SettlementKey): Promise<SettlementView | undefined> {
  const [row] = await queryRows<{ view: SettlementView }>(
    db,
    "transaction" in key
      ? // By the transaction's own unique key, then the claim's index on tx_id: the claim keeps
        // no index on its hash.
        sql`select x402_settlement_view(x, t) as view
            from outgoing_transactions t join x402_settlements x on x.tx_id = t.tx_id
            where t.tx_hash = ${key.transaction} and t.purpose = 'settlement'`
      : sql`select x402_settlement_view(x, t) as view
            from x402_settlements x left join outgoing_transactions t on t.tx_id = x.tx_id
            where x.payer = ${key.payer} and x.nonce = ${key.nonce}`,
  );
  return row?.view;
}
