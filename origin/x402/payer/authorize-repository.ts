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
 *
 * Under an agent's spending policy (docs/x402.md#many-sellers-the-node-ceiling-and-the-agents-policy)
 * the day's row of x402_daily_authorizations is the lock: the policy and the day's usage are read
 * under it, and an allowed authorization's units are counted there and in x402_daily_payee_units
 * before the enclave is asked. A held action stores the authorization it would sign (`held`), so
 * an operator's approval covers exactly that one; a denied one stores the rule (`denied`).
 */
import { sql } from "drizzle-orm";
import { z } from "zod";
import type { PolicyDecision } from "../../../shared/agent-policy.ts";
import type { Hex } from "../../../shared/hex.ts";
import { type Db, queryRows } from "../../db/client.ts";
import { policyDenied } from "../../policy/refusal.ts";
import { type PolicyState, readPolicyState } from "../../policy/store.ts";
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

/**
 * What a held authorization will be once approved: its nonce (the approval's ref), its validity's
 * end (the hold's, the quote's own validity) and what it pays. `signed_payload.held` of the action.
 */
export type HeldAuthorization = {
  nonce: Hex;
  /** Unix seconds. */
  validBefore: string;
  /** Lowercase. */
  payTo: string;
  amountUnits: string;
};

const heldSchema = z.object({
  held: z.object({
    nonce: z.string().regex(/^0x[0-9a-f]{64}$/),
    validBefore: z.string().regex(/^[0-9]+$/),
    payTo: z.string(),
    amountUnits: z.string().regex(/^[0-9]+$/),
  }),
});

/** The authorization a held (or approved) x402 action stores, or undefined. */
export function heldAuthorization(signedPayload: unknown): HeldAuthorization | undefined {
  const parsed = heldSchema.safeParse(signedPayload);
  return parsed.success ? { ...parsed.data.held, nonce: parsed.data.held.nonce as Hex } : undefined;
}

/** A policy's deny or hold: the rule that decided, and what remains under it. */
export type PolicyFinding = Exclude<PolicyDecision, { decision: "allow" }>;

export type SignOnceOutcome =
  | { kind: "signed"; stored: StoredAuthorization }
  /** The policy (the gateway's or the enclave's) holds it: the action is `held`, nothing signed. */
  | { kind: "held" }
  /** The policy (the gateway's or the enclave's) refuses it: the action ended `failed`. */
  | { kind: "denied"; finding: PolicyFinding }
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
  /** That action's request hash: a repeat names the quote entry it was made for by it. */
  knownRequestHash: string | null;
};

/** One statement, before anything is written: the day's count and whether this is a repeat. */
export async function readDailyAuthorizations(
  db: Db,
  params: { agentId: string; day: string; idempotencyKey: string },
): Promise<DailyAuthorizations> {
  const [row] = await queryRows<{ count: number; known: string | null }>(
    db,
    sql`select
          coalesce((select authorizations from x402_daily_authorizations
                    where agent_id = ${params.agentId} and day = ${params.day}::date), 0) as count,
          (select request_hash from agent_actions
           where agent_id = ${params.agentId} and kind = 'x402'
             and idempotency_key = ${params.idempotencyKey}) as known`,
  );
  const known = row?.known ?? null;
  return { count: Number(row?.count ?? 0), known: known !== null, knownRequestHash: known };
}

export type SignActionOnceParams = {
  actionId: string;
  agentId: string;
  /** The UTC day the signature counts on, as Postgres reads a date. */
  day: string;
  /** The request's time: the policy's windows are read at it (the same UTC day as `day`). */
  now: Date;
  dailyLimit: number;
  /** What the authorization pays: its units count in the day's budgets. */
  payment: { nonce: Hex; payTo: string; amountUnits: bigint };
  /** The validity's end of an authorization signed now (unix seconds); a held one keeps its own. */
  validBefore: () => bigint;
  /**
   * The agent's policy over this payment, given the policy state read under the day's lock and
   * whether an operator approved the held authorization; null when nothing bounds the agent.
   */
  decide: (state: PolicyState, approved: boolean) => PolicyDecision | null;
  /** The enclave's own policy answer in a refusal (its re-check, ahead of the gateway's view); null for any other refusal. */
  enclavePolicy: (failure: SignerFailure) => PolicyFinding | null;
};

/**
 * Signs the `requested` (or operator-`approved`) action with `sign`, unless it is signed already,
 * and stores the result; under the action's row lock throughout. The day's row of
 * x402_daily_authorizations is locked next and stays locked until the commit: concurrent
 * authorizations of one agent, on any origin, wait for each other there, so the gateway's count,
 * units and per-payee units hold exactly (the enclave's sealed counts are the hard bound). Under
 * that lock the agent's policy decides (deny wins, then hold, then allow); an allowed one counts
 * with its signature, before the lock is released, and one the enclave refused never counts.
 */
export async function signActionOnce(
  db: Db,
  params: SignActionOnceParams,
  sign: (validBefore: bigint) => Promise<SignerResult<SignedAuthorization>>,
): Promise<SignOnceOutcome> {
  const { actionId, agentId, day, dailyLimit, payment } = params;
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
    if (row.status === "held") return { kind: "held" };
    if (row.status !== "requested" && row.status !== "approved") return { kind: "ended", status: row.status };
    // An approval covers exactly the authorization that was held: its nonce, validity and payment.
    const approved = row.status === "approved";
    const held = approved ? heldAuthorization(row.signed_payload) : undefined;
    if (approved && !held)
      throw new Error(`x402 action ${actionId} is approved without its held authorization`);
    const validBefore = held ? BigInt(held.validBefore) : params.validBefore();
    // Approved after the quote's validity ran out (before the sweep ended it): it would pay for a
    // quote the seller no longer honours, so it ends `expired` as the sweep would have ended it.
    if (held && validBefore <= BigInt(Math.floor(params.now.getTime() / 1000))) {
      await tx.execute(
        sql`update agent_actions set status = 'expired', updated_at = now() where action_id = ${actionId}`,
      );
      return { kind: "ended", status: "expired" };
    }
    // The lock: the day's row, made if it is the day's first (an upsert that changes nothing locks it).
    const [counted] = await queryRows<{ authorizations: number }>(
      tx,
      sql`insert into x402_daily_authorizations as d (agent_id, day, authorizations)
          values (${agentId}::uuid, ${day}::date, 0)
          on conflict (agent_id, day) do update set authorizations = d.authorizations
          returning authorizations`,
    );
    if (!counted || counted.authorizations >= dailyLimit) return { kind: "daily_limit" };
    const decision = params.decide(await readPolicyState(tx, agentId, params.now), approved);
    if (decision && decision.decision !== "allow") {
      return holdOrDeny(tx, actionId, decision, { ...payment, validBefore: validBefore.toString() });
    }
    const signed = await sign(validBefore);
    if (!signed.ok) {
      // Nothing was counted yet: a refusal leaves the day's budgets as they were.
      const finding = params.enclavePolicy(signed.error);
      if (finding)
        return holdOrDeny(tx, actionId, finding, { ...payment, validBefore: validBefore.toString() });
      return { kind: "refused", failure: signed.error };
    }
    // The signature counts in the day's count, units and the payee's units with the action's
    // update, in one statement: the day's row stays locked until the commit, so no other
    // authorization of the agent read the usage in between, and a refused one never counted.
    const units = payment.amountUnits.toString();
    await tx.execute(
      sql`with counted as (
            update x402_daily_authorizations
            set authorizations = authorizations + 1, units = units + ${units}::numeric
            where agent_id = ${agentId} and day = ${day}::date),
          payee as (
            insert into x402_daily_payee_units as p (agent_id, day, pay_to, units)
            values (${agentId}::uuid, ${day}::date, ${payment.payTo}, ${units}::numeric)
            on conflict (agent_id, day, pay_to) do update set units = p.units + excluded.units)
          update agent_actions
          set status = 'signed', signed_payload = ${JSON.stringify(signed.value)}::jsonb,
              signed_at = now(), updated_at = now()
          where action_id = ${actionId}`,
    );
    return { kind: "signed", stored: { kind: "signed", signed: signed.value } };
  });
}

/**
 * Stores the policy's answer on the action: `held` with its rule, until the authorization's own
 * validity ends (the quote bounds the hold), keeping the authorization an approval will cover; or
 * `failed` with `policy_denied`, keeping the rule and what remained for a repeat's answer.
 */
async function holdOrDeny(
  tx: Db,
  actionId: string,
  finding: PolicyFinding,
  authorization: { nonce: Hex; payTo: string; amountUnits: bigint; validBefore: string },
): Promise<SignOnceOutcome> {
  if (finding.decision === "hold") {
    const held: HeldAuthorization = {
      nonce: authorization.nonce,
      validBefore: authorization.validBefore,
      payTo: authorization.payTo,
      amountUnits: authorization.amountUnits.toString(),
    };
    await tx.execute(
      sql`update agent_actions
          set status = 'held', hold_rule = ${finding.rule},
              hold_expires_at = to_timestamp(${authorization.validBefore}::bigint),
              signed_payload = ${JSON.stringify({ held })}::jsonb, updated_at = now()
          where action_id = ${actionId}`,
    );
    return { kind: "held" };
  }
  const refusal = policyDenied(finding);
  await tx.execute(
    sql`update agent_actions
        set status = 'failed', error_code = ${refusal.code}, error_message = ${refusal.message},
            hold_rule = ${finding.rule},
            signed_payload = ${JSON.stringify({ denied: { rule: finding.rule, remaining: finding.remaining ?? "0" } })}::jsonb,
            updated_at = now()
        where action_id = ${actionId}`,
  );
  return { kind: "denied", finding };
}
