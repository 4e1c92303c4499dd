/**
 * The one signature of an x402 action (SPEC "Agent action": x402 authorization stores the signed
 * payment payload and returns it again on a repeat). The action row is locked while the enclave
 * signs, so of concurrent duplicates exactly one signs and the others read what it stored; a
 * request that died mid-way released its lock, and the next duplicate signs.
 */
import { sql } from "drizzle-orm";
import { z } from "zod";
import { type Db, queryRows } from "../db/client.ts";
import type { SignerFailure, SignerResult } from "../signer/types.ts";

/** What an x402 action's `signed_payload` holds: the header value, whose bytes a repeat returns. */
const storedAuthorizationSchema = z.object({ payment_signature: z.string().min(1) });

export type SignOnceOutcome =
  | { kind: "signed"; paymentSignature: string }
  /** The action ended without a signature (the tracker abandoned it): this nonce is spent. */
  | { kind: "ended"; status: string }
  | { kind: "refused"; failure: SignerFailure };

/** The stored header value of a signed x402 action, or undefined when it holds none. */
export function storedPaymentSignature(signedPayload: unknown): string | undefined {
  const parsed = storedAuthorizationSchema.safeParse(signedPayload);
  return parsed.success ? parsed.data.payment_signature : undefined;
}

/**
 * Signs the `requested` action `actionId` with `sign` (which returns the header value), unless it
 * is signed already, and stores the result; under the action's row lock throughout.
 */
export async function signActionOnce(
  db: Db,
  actionId: string,
  sign: () => Promise<SignerResult<string>>,
): Promise<SignOnceOutcome> {
  return db.transaction(async (tx): Promise<SignOnceOutcome> => {
    const [row] = await queryRows<{ status: string; signed_payload: unknown }>(
      tx,
      sql`select status, signed_payload from agent_actions where action_id = ${actionId} for update`,
    );
    if (!row) throw new Error(`action ${actionId} vanished`); // a bug: actions are never deleted
    if (row.status === "signed") {
      const stored = storedPaymentSignature(row.signed_payload);
      if (!stored) throw new Error(`x402 action ${actionId} is signed without a payload`);
      return { kind: "signed", paymentSignature: stored };
    }
    if (row.status !== "requested") return { kind: "ended", status: row.status };
    const signed = await sign();
    if (!signed.ok) return { kind: "refused", failure: signed.error };
    await tx.execute(
      sql`update agent_actions
          set status = 'signed', signed_payload = ${JSON.stringify({ payment_signature: signed.value })}::jsonb,
              signed_at = now(), updated_at = now()
          where action_id = ${actionId}`,
    );
    return { kind: "signed", paymentSignature: signed.value };
  });
}
