/**
 * Which derived key an authorization without a key or nonce takes (docs/x402.md#payment-identifiers):
 * a retry of a payment must find the authorization it was first given, and a new purchase of the
 * same resource at the same quote, once that authorization can no longer pay, must get a new one.
 *
 * The purchases of one quote by one agent (authorize-payment-key.ts x402Purchase) are one chain
 * of actions: the first's key follows from the purchase, each next one's from the key before it,
 * and each action records its purchase (agent_actions.x402_purchase). The latest answers again
 * while it can pay: held, in flight, or signed and still settleable. Once it is over (too near its
 * end for a facilitator to settle it, or ended unsigned: refused, rejected, expired; asking again is
 * then judged anew, which signs nothing twice) the request takes the next key. So the key depends
 * on what is stored, never on the time or the origin a request is read on: requests that read the
 * same latest action choose the same key and claim one action, and one that reads after the next
 * action was claimed finds it as the latest.
 */
import { sql } from "drizzle-orm";
import { type Db, pgArrayLiteral, queryRows } from "../../db/client.ts";
import { endsTooSoonToSettle } from "../settle-window.ts";
import { legacyKeys } from "./authorize-legacy-keys.ts";
import { derivedPaymentKey, x402Purchase } from "./authorize-payment-key.ts";
import { storedAuthorization } from "./authorize-repository.ts";

type Quote = { resource: { url: string }; accepts: unknown };

type Row = { idempotency_key: string; status: string; signed_payload: unknown; request_hash: string };

/** Statuses of an action that ended without an authorization that can pay. */
const ENDED_UNSIGNED = new Set(["failed", "rejected", "expired"]);

/**
 * That purchase is over: it ended unsigned (the policy refused it, an operator rejected it, nobody
 * decided in time), or its signed authorization ends too soon for a facilitator to settle it (the
 * rule the facilitator itself applies, settle-window.ts).
 */
function spent(row: Row, nowSeconds: number, marginSeconds: number): boolean {
  if (ENDED_UNSIGNED.has(row.status)) return true;
  if (row.status !== "signed") return false;
  const stored = storedAuthorization(row.signed_payload);
  return (
    stored?.kind === "signed" &&
    endsTooSoonToSettle(
      BigInt(stored.signed.authorization.validBefore),
      BigInt(nowSeconds),
      BigInt(marginSeconds),
    )
  );
}

/**
 * The key this request takes, the request hash of the action already under it (null: none) and
 * the purchase to record with a new one: one read of the purchase's latest action, and of the
 * actions a purchase made before migration 0044 may be under (authorize-legacy-keys.ts).
 */
export async function chooseDerivedKey(
  db: Db,
  params: {
    agentId: string;
    quote: Quote;
    now: Date;
    /** AGENT_X402_VALIDITY_MARGIN_SECONDS, as the facilitator counts it. */
    validityMarginSeconds: number;
  },
): Promise<{ key: string; knownRequestHash: string | null; purchase: string }> {
  const nowSeconds = Math.floor(params.now.getTime() / 1000);
  const purchase = x402Purchase(params);
  const rows = await queryRows<Row & { latest: boolean }>(
    db,
    sql`(select idempotency_key, status, signed_payload, request_hash, true as latest from agent_actions
         where agent_id = ${params.agentId}::uuid and x402_purchase = ${purchase} and kind = 'x402'
         order by created_at desc limit 1)
        union all
        (select idempotency_key, status, signed_payload, request_hash, false from agent_actions
         where agent_id = ${params.agentId}::uuid and kind = 'x402' and x402_purchase is null
           and idempotency_key = any(${pgArrayLiteral(legacyKeys({ ...params, nowSeconds }))}::text[]))`,
  );
  const latest = rows.find((row) => row.latest);
  // The latest first; then one made before 0044 (rows of one chain: at most one of them can pay).
  const payable = [...(latest ? [latest] : []), ...rows.filter((row) => !row.latest)].find(
    (row) => !spent(row, nowSeconds, params.validityMarginSeconds),
  );
  if (payable) return { key: payable.idempotency_key, knownRequestHash: payable.request_hash, purchase };
  return {
    key: derivedPaymentKey(purchase, latest?.idempotency_key ?? null),
    knownRequestHash: null,
    purchase,
  };
}

/** The request hash of the agent's x402 action under `idempotencyKey`, or null when it has none. */
export async function knownRequestHash(
  db: Db,
  params: { agentId: string; idempotencyKey: string },
): Promise<string | null> {
  const [row] = await queryRows<{ request_hash: string }>(
    db,
    sql`select request_hash from agent_actions
        where agent_id = ${params.agentId}::uuid and kind = 'x402'
          and idempotency_key = ${params.idempotencyKey}`,
  );
  return row?.request_hash ?? null;
}
