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
import * as z from "zod";
import type { PolicyDecision } from "../../../shared/agent-policy.ts";
import type { Hex } from "../../../shared/hex.ts";
import { refusalFieldsToStore } from "../../agent-actions/refusal-fields.ts";
import type { Db } from "../../db/client.ts";
import { openPipelinedTransaction, type PipelinedTransaction } from "../../db/pipelined-transaction.ts";
import { preparedStatement } from "../../db/prepared.ts";
import { policyDenied } from "../../policy/refusal.ts";
import { type PolicyState, policyStatement, policyStateOf, policyValues } from "../../policy/store.ts";
import type { SignerFailure, SignerResult } from "../../signer/types.ts";
import { endsTooSoonToSettle } from "../settle-window.ts";
import type { PaymentAuthorization } from "./authorize-envelope.ts";

/** What a signing stores: the authorization as the envelope spells it, and the payer's signature. */
export type SignedAuthorization = { authorization: PaymentAuthorization; signature: string };

/** What the enclave signed, and the UTC day it counted it on (null: an enclave that does not say). */
export type EnclaveSigned = { signed: SignedAuthorization; countedOn: string | null };

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
  /** AGENT_X402_VALIDITY_MARGIN_SECONDS: a held authorization with less left than this is over. */
  validityMarginSeconds: number;
  /**
   * The agent's policy over this payment, given the policy state read under the day's lock and
   * whether an operator approved the held authorization; null when nothing bounds the agent.
   */
  decide: (state: PolicyState, approved: boolean) => PolicyDecision | null;
  /** The enclave's own policy answer in a refusal (its re-check, ahead of the gateway's view); null for any other refusal. */
  enclavePolicy: (failure: SignerFailure) => PolicyFinding | null;
};

/** The action's row, locked for the signing. */
export const signLockActionStatement = preparedStatement<"actionId">(
  "x402_sign_lock_action",
  sql`select status, signed_payload from agent_actions
      where action_id = ${sql.placeholder("actionId")}::uuid for update`,
).returns({ status: "text", signed_payload: "jsonb?" });

/** The lock: the day's row, made if it is the day's first (an upsert that changes nothing locks it). */
export const signLockDayStatement = preparedStatement<"agentId" | "day">(
  "x402_sign_lock_day",
  sql`insert into x402_daily_authorizations as d (agent_id, day, authorizations)
      values (${sql.placeholder("agentId")}::uuid, ${sql.placeholder("day")}::date, 0)
      on conflict (agent_id, day) do update set authorizations = d.authorizations
      returning authorizations`,
).returns({ authorizations: "int" });

/**
 * The signature counts in the day's count, units and the payee's units with the action's update,
 * in one statement: the day's row stays locked until the commit, so no other authorization of the
 * agent read the usage in between, and a refused one never counted. The day is the one the enclave
 * counted it on: the locked one but across a midnight, when the enclave read its clock after it
 * (then that day's row is made here if it is its first).
 */
export const signStoreStatement = preparedStatement<
  "actionId" | "agentId" | "day" | "units" | "payTo" | "signed"
>(
  "x402_sign_store",
  sql`with counted as (
        insert into x402_daily_authorizations as d (agent_id, day, authorizations, units)
        values (${sql.placeholder("agentId")}::uuid, ${sql.placeholder("day")}::date, 1,
                ${sql.placeholder("units")}::numeric)
        on conflict (agent_id, day) do update
          set authorizations = d.authorizations + 1, units = d.units + excluded.units),
      payee as (
        insert into x402_daily_payee_units as p (agent_id, day, pay_to, units)
        values (${sql.placeholder("agentId")}::uuid, ${sql.placeholder("day")}::date,
                ${sql.placeholder("payTo")}::text, ${sql.placeholder("units")}::numeric)
        on conflict (agent_id, day, pay_to) do update set units = p.units + excluded.units)
      update agent_actions
      set status = 'signed', signed_payload = ${sql.placeholder("signed")}::jsonb,
          signed_at = now(), updated_at = now()
      where action_id = ${sql.placeholder("actionId")}::uuid`,
).returns({});

/** Approved after the quote's validity ran out: the action ends `expired`, as the sweep would end it. */
export const signExpireStatement = preparedStatement<"actionId">(
  "x402_sign_expire",
  sql`update agent_actions set status = 'expired', updated_at = now()
      where action_id = ${sql.placeholder("actionId")}::uuid`,
).returns({});

/** The policy holds it: `held` with its rule until the authorization's own validity ends. */
export const signHoldStatement = preparedStatement<"actionId" | "rule" | "validBefore" | "held">(
  "x402_sign_hold",
  sql`update agent_actions
      set status = 'held', hold_rule = ${sql.placeholder("rule")}::text,
          hold_expires_at = to_timestamp(${sql.placeholder("validBefore")}::bigint),
          signed_payload = ${sql.placeholder("held")}::jsonb, updated_at = now()
      where action_id = ${sql.placeholder("actionId")}::uuid`,
).returns({});

/**
 * The policy refuses it: `failed` with `policy_denied`, keeping the rule and what remained, and the
 * answer's fields (agent-actions/refusal-fields.ts) a repeat answers again.
 */
export const signDenyStatement = preparedStatement<
  "actionId" | "code" | "message" | "fields" | "rule" | "denied"
>(
  "x402_sign_deny",
  sql`update agent_actions
      set status = 'failed', error_code = ${sql.placeholder("code")}::text,
          error_message = ${sql.placeholder("message")}::text, error_fields = ${sql.placeholder("fields")}::jsonb,
          hold_rule = ${sql.placeholder("rule")}::text,
          signed_payload = ${sql.placeholder("denied")}::jsonb, updated_at = now()
      where action_id = ${sql.placeholder("actionId")}::uuid`,
).returns({});

/**
 * Signs the `requested` (or operator-`approved`) action with `sign`, unless it is signed already,
 * and stores the result; under the action's row lock throughout. The day's row of
 * x402_daily_authorizations is locked next and stays locked until the commit: concurrent
 * authorizations of one agent, on any origin, wait for each other there, so the gateway's count,
 * units and per-payee units hold exactly (the enclave's sealed counts are the hard bound). Under
 * that lock the agent's policy decides (deny wins, then hold, then allow); an allowed one counts
 * with its signature, before the lock is released, and one the enclave refused never counts.
 *
 * One pipelined transaction (db/pipelined-transaction.ts): `begin`, the two locks and the policy's
 * read leave in one write, and the stored outcome with `commit` in another, where each was a round
 * trip of its own (an agent's payment made about ten; docs/performance.md). Postgres still takes
 * them in that order, so the locks are taken as before: the action's, then the day's. The day's is
 * now taken for a repeat of a signed or held action too, which so waits out a signing of the same
 * agent already under way: a repeat is rare, and the wait is one signature's.
 */
export async function signActionOnce(
  db: Db,
  params: SignActionOnceParams,
  sign: (validBefore: bigint) => Promise<SignerResult<EnclaveSigned>>,
): Promise<SignOnceOutcome> {
  const tx = await openPipelinedTransaction(db);
  try {
    const locked = tx.run(signLockActionStatement, { actionId: params.actionId });
    const counted = tx.run(signLockDayStatement, { agentId: params.agentId, day: params.day });
    const policy = tx.run(policyStatement, policyValues(params.agentId, params.now));
    // Awaited below, unless the action's status ends the signing first.
    counted.catch(() => {});
    policy.catch(() => {});
    const outcome = await signLocked(tx, params, sign, {
      action: (await locked)[0],
      counted: async () => (await counted)[0]?.authorizations,
      policy: async () => policyStateOf((await policy)[0]),
    });
    // The outcome's write, if any, went out before `commit`, in the same round trip.
    await tx.commit();
    return outcome;
  } catch (error) {
    await tx.rollback();
    throw error;
  }
}

/** What signActionOnce read under its locks, each awaited only when it is needed. */
type LockedReads = {
  action: { status: string; signed_payload: unknown } | undefined;
  counted: () => Promise<number | undefined>;
  policy: () => Promise<PolicyState>;
};

/** signActionOnce's decisions under the locks; each write is issued on `tx` and not awaited. */
async function signLocked(
  tx: PipelinedTransaction,
  params: SignActionOnceParams,
  sign: (validBefore: bigint) => Promise<SignerResult<EnclaveSigned>>,
  read: LockedReads,
): Promise<SignOnceOutcome> {
  const { actionId, agentId, day, dailyLimit, payment } = params;
  const row = read.action;
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
  // Approved after the quote's validity ran out (before the sweep ended it), or so near its end
  // that no facilitator would settle it (the rule the enclave also signs by, settle-window.ts): it
  // would pay for a quote the seller no longer honours, so it ends `expired` as the sweep would
  // have ended it, where the enclave's refusal of the margin read as a validity too long.
  const nowSeconds = BigInt(Math.floor(params.now.getTime() / 1000));
  if (held && endsTooSoonToSettle(validBefore, nowSeconds, BigInt(params.validityMarginSeconds))) {
    written(tx.run(signExpireStatement, { actionId }));
    return { kind: "ended", status: "expired" };
  }
  const authorizations = await read.counted();
  if (authorizations === undefined || authorizations >= dailyLimit) return { kind: "daily_limit" };
  const decision = params.decide(await read.policy(), approved);
  const authorization = { ...payment, validBefore: validBefore.toString() };
  const ending = { tx, actionId, now: params.now };
  if (decision && decision.decision !== "allow") return holdOrDeny(ending, decision, authorization);
  const signed = await sign(validBefore);
  if (!signed.ok) {
    // Nothing was counted yet: a refusal leaves the day's budgets as they were.
    const finding = params.enclavePolicy(signed.error);
    if (finding) return holdOrDeny(ending, finding, authorization);
    return { kind: "refused", failure: signed.error };
  }
  const { signed: authorized, countedOn } = signed.value;
  written(
    tx.run(signStoreStatement, {
      actionId,
      agentId,
      // The enclave's day: its sealed count is the bound, so the gateway's count of each day must
      // be its count, for the checks and the 429 of the next day to be the gateway's own.
      day: countedOn ?? day,
      units: payment.amountUnits.toString(),
      payTo: payment.payTo,
      signed: JSON.stringify(authorized),
    }),
  );
  return { kind: "signed", stored: { kind: "signed", signed: authorized } };
}

/**
 * A write behind which `commit` follows on the wire: if it fails, so does the commit (the
 * transaction is aborted), and that failure is the one thrown.
 */
function written(statement: Promise<unknown>): void {
  statement.catch(() => {});
}

/**
 * Stores the policy's answer on the action: `held` with its rule, until the authorization's own
 * validity ends (the quote bounds the hold), keeping the authorization an approval will cover; or
 * `failed` with `policy_denied`, keeping the rule and what remained for a repeat's answer.
 */
function holdOrDeny(
  ending: { tx: PipelinedTransaction; actionId: string; now: Date },
  finding: PolicyFinding,
  authorization: { nonce: Hex; payTo: string; amountUnits: bigint; validBefore: string },
): SignOnceOutcome {
  const { tx, actionId } = ending;
  if (finding.decision === "hold") {
    const held: HeldAuthorization = {
      nonce: authorization.nonce,
      validBefore: authorization.validBefore,
      payTo: authorization.payTo,
      amountUnits: authorization.amountUnits.toString(),
    };
    written(
      tx.run(signHoldStatement, {
        actionId,
        rule: finding.rule,
        validBefore: authorization.validBefore,
        held: JSON.stringify({ held }),
      }),
    );
    return { kind: "held" };
  }
  const refusal = policyDenied(finding);
  written(
    tx.run(signDenyStatement, {
      actionId,
      code: refusal.code,
      message: refusal.message,
      fields: JSON.stringify(refusalFieldsToStore(refusal.fields, ending.now)),
      rule: finding.rule,
      denied: JSON.stringify({ denied: { rule: finding.rule, remaining: finding.remaining ?? "0" } }),
    }),
  );
  return { kind: "denied", finding };
}
