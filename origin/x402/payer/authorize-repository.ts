/**
 * The one signature of an x402 action (the action stores the signed authorization and answers a
 * repeat with it: docs/x402.md#an-agent-pays-with-its-token-authorize), and the agent's count of
 * them per UTC day (AGENT_X402_DAILY_LIMIT). The action row is locked while the enclave signs, so
 * of concurrent duplicates exactly one signs and the others read what it stored; a request that
 * died mid-way released its lock, and the next duplicate signs.
 *
 * What is stored is what the answer cannot be rebuilt without: the signed authorization and its
 * signature, a few hundred bytes. The quote's `resource`, `accepted` and `extensions` are bound
 * to the action by its request hash and come back with the repeat's own body, so nothing of their
 * size (up to the schema's bounds) is written per request. Rows written before that hold the whole
 * header value (`payment_signature`) and are answered from it.
 */
import { sql } from "drizzle-orm";
import { z } from "zod";
import { type Db, queryRows } from "../../db/client.ts";
import type { SignerFailure, SignerResult } from "../../signer/types.ts";
import type { PaymentAuthorization } from "./authorize-envelope.ts";

/** What a signing stores: the authorization as the envelope spells it, and the payer's signature. */
export type SignedAuthorization = { authorization: PaymentAuthorization; signature: string };

/** An x402 action's `signed_payload`, as written now or (`header`) before. */
export type StoredAuthorization =
  | { kind: "signed"; signed: SignedAuthorization }
  | { kind: "header"; paymentSignature: string };

const signedSchema = z.object({
  authorization: z.object({
    from: z.string(),
    to: z.string(),
    value: z.string(),
    validAfter: z.string(),
    validBefore: z.string(),
    nonce: z.string(),
  }),
  signature: z.string().min(1),
});
const headerSchema = z.object({ payment_signature: z.string().min(1) });

export type SignOnceOutcome =
  | { kind: "signed"; stored: StoredAuthorization }
  /** The action ended without a signature (the tracker abandoned it): this nonce is spent. */
  | { kind: "ended"; status: string }
  /** The agent has signed AGENT_X402_DAILY_LIMIT authorizations today: nothing was signed. */
  | { kind: "daily_limit" }
  | { kind: "refused"; failure: SignerFailure };

/** The stored signature of a signed x402 action, or undefined when it holds none. */
export function storedAuthorization(signedPayload: unknown): StoredAuthorization | undefined {
  const signed = signedSchema.safeParse(signedPayload);
  if (signed.success) return { kind: "signed", signed: signed.data };
  const header = headerSchema.safeParse(signedPayload);
  return header.success ? { kind: "header", paymentSignature: header.data.payment_signature } : undefined;
}

export type DailyAuthorizations = {
  /** Authorizations the agent has signed on `day`. */
  count: number;
  /** Whether the agent already has an x402 action under this idempotency key (a repeat). */
  known: boolean;
};

/** One statement, before anything is written: the day's count and whether this is a repeat. */
export async function readDailyAuthorizations(
  db: Db,
  params: { agentId: string; day: string; idempotencyKey: string },
): Promise<DailyAuthorizations> {
  const [row] = await queryRows<{ count: number; known: boolean }>(
    db,
    sql`select
          coalesce((select authorizations from x402_daily_authorizations
                    where agent_id = ${params.agentId} and day = ${params.day}::date), 0) as count,
          exists(select 1 from agent_actions
                 where agent_id = ${params.agentId} and kind = 'x402'
                   and idempotency_key = ${params.idempotencyKey}) as known`,
  );
  return { count: Number(row?.count ?? 0), known: row?.known ?? false };
}

export type SignActionOnceParams = {
  actionId: string;
  agentId: string;
  /** The UTC day the signature counts on, as Postgres reads a date. */
  day: string;
  dailyLimit: number;
};

/**
 * Signs the `requested` action with `sign`, unless it is signed already, and stores the result;
 * under the action's row lock throughout. The day's count goes up before the enclave is asked,
 * only while it is below the limit, and its row stays locked until the commit: concurrent
 * authorizations of one agent wait for each other there, so the gateway's count holds exactly
 * (the enclave's sealed count is the hard bound). A refusal by the enclave gives it back.
 */
export async function signActionOnce(
  db: Db,
  params: SignActionOnceParams,
  sign: () => Promise<SignerResult<SignedAuthorization>>,
): Promise<SignOnceOutcome> {
  const { actionId, agentId, day, dailyLimit } = params;
  return db.transaction(async (tx): Promise<SignOnceOutcome> => {
    const [row] = await queryRows<{ status: string; signed_payload: unknown }>(
      tx,
      sql`select status, signed_payload from agent_actions where action_id = ${actionId} for update`,
    );
    if (!row) throw new Error(`action ${actionId} vanished`); // a bug: actions are never deleted
    if (row.status === "signed") {
      const stored = storedAuthorization(row.signed_payload);
      if (!stored) throw new Error(`x402 action ${actionId} is signed without a payload`);
      return { kind: "signed", stored };
    }
    if (row.status !== "requested") return { kind: "ended", status: row.status };
    const [counted] = await queryRows<{ authorizations: number }>(
      tx,
      sql`insert into x402_daily_authorizations as d (agent_id, day, authorizations)
          select ${agentId}::uuid, ${day}::date, 1 where ${dailyLimit}::int >= 1
          on conflict (agent_id, day) do update set authorizations = d.authorizations + 1
            where d.authorizations < ${dailyLimit}::int
          returning authorizations`,
    );
    if (!counted) return { kind: "daily_limit" };
    const signed = await sign();
    if (!signed.ok) {
      await tx.execute(
        sql`update x402_daily_authorizations set authorizations = authorizations - 1
            where agent_id = ${agentId} and day = ${day}::date`,
      );
      return { kind: "refused", failure: signed.error };
    }
    await tx.execute(
      sql`update agent_actions
          set status = 'signed', signed_payload = ${JSON.stringify(signed.value)}::jsonb,
              signed_at = now(), updated_at = now()
          where action_id = ${actionId}`,
    );
    return { kind: "signed", stored: { kind: "signed", signed: signed.value } };
  });
}
