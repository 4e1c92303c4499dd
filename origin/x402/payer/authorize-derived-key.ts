/**
 * Which derived key an authorization without a key or nonce takes (docs/x402.md#payment-identifiers):
 * a retry of a payment must find the authorization it was first given, and a new purchase of the
 * same resource at the same quote, once that authorization can no longer pay, must get a new one.
 *
 * An authorization is valid at most the quote's longest `maxTimeoutSeconds` (W) after it is signed.
 * The key is the agent's, the resource's and the quote's in a window of W seconds: the previous
 * window's key is tried first, as its authorization may still be valid; then this window's. A
 * signed authorization too near its end to be settled is a purchase that is over, so its key is passed
 * over for the next in this window's short chain (an entry of the quote with a shorter timeout
 * than W can end within the window), and so is one that ended unsigned (refused, rejected,
 * expired: asking again is judged anew, which signs nothing twice). An action held, in flight or
 * signed and still settleable answers again as it stands, which is what a retry wants.
 */
import { sql } from "drizzle-orm";
import { type Db, pgArrayLiteral, queryRows } from "../../db/client.ts";
import { endsTooSoonToSettle } from "../settle-window.ts";
import { derivedPaymentKey } from "./authorize-payment-key.ts";
import { storedAuthorization } from "./authorize-repository.ts";

/** Keys of this window tried after its first: purchases of one quote within one window. */
const CHAIN = 8;
/** The widest window: a quote's timeout past a day is taken as a day. */
const MAX_WINDOW_SECONDS = 86_400;

type Quote = { resource: { url: string }; accepts: unknown };

/** The window: the longest timeout among the quote's entries, at least 1 s. */
export function derivedKeyWindow(quote: Quote): number {
  const timeouts = Array.isArray(quote.accepts)
    ? quote.accepts.map((entry) => (entry as { maxTimeoutSeconds?: unknown } | null)?.maxTimeoutSeconds)
    : [];
  const longest = Math.max(
    1,
    ...timeouts.filter(
      (each): each is number => typeof each === "number" && Number.isInteger(each) && each > 0,
    ),
  );
  return Math.min(longest, MAX_WINDOW_SECONDS);
}

/** The previous window's key, then this window's chain, in the order they are tried. */
export function derivedKeyCandidates(params: { agentId: string; quote: Quote; nowSeconds: number }): {
  previous: string;
  current: string[];
} {
  const window = Math.floor(params.nowSeconds / derivedKeyWindow(params.quote));
  const key = (slot: number, link: number) =>
    derivedPaymentKey({ agentId: params.agentId, quote: params.quote, slot: `${slot}.${link}` });
  return {
    previous: key(window - 1, 0),
    current: Array.from({ length: CHAIN }, (_, link) => key(window, link)),
  };
}

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
 * The key this request takes, and the request hash of the action already under it (null: none):
 * one read of the agent's x402 actions under the candidates.
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
): Promise<{ key: string; knownRequestHash: string | null }> {
  const nowSeconds = Math.floor(params.now.getTime() / 1000);
  const { previous, current } = derivedKeyCandidates({ ...params, nowSeconds });
  const rows = await queryRows<Row>(
    db,
    sql`select idempotency_key, status, signed_payload, request_hash from agent_actions
        where agent_id = ${params.agentId}::uuid and kind = 'x402'
          and idempotency_key = any(${pgArrayLiteral([previous, ...current])}::text[])`,
  );
  const byKey = new Map(rows.map((row) => [row.idempotency_key, row]));
  const taken = (key: string) => ({ key, knownRequestHash: byKey.get(key)?.request_hash ?? null });
  const before = byKey.get(previous);
  if (before && !spent(before, nowSeconds, params.validityMarginSeconds)) return taken(previous);
  for (const key of current) {
    const row = byKey.get(key);
    if (!row || !spent(row, nowSeconds, params.validityMarginSeconds)) return taken(key);
  }
  // Every purchase of this window is over (more than CHAIN of one quote within W): a key of this
  // moment, which a retry within the same second finds again. Read on its own, as a given key is.
  const key = derivedPaymentKey({ agentId: params.agentId, quote: params.quote, slot: `at.${nowSeconds}` });
  return {
    key,
    knownRequestHash: await knownRequestHash(db, { agentId: params.agentId, idempotencyKey: key }),
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
