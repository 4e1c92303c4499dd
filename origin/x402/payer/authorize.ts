/**
 * POST /agent/v1/x402/authorize (docs/x402.md#an-agent-pays-with-its-token-authorize): the enclave
 * signs a TransferWithAuthorization from the caller's wallet for the quote's `exact` / eip155:77
 * entry, and the answer carries the exact `PAYMENT-SIGNATURE` header value of the paid retry. The
 * amount and payTo are the node's (AGENT_X402_AMOUNT, AGENT_X402_PAY_TO), the validity at most
 * AGENT_X402_MAX_TIMEOUT_SECONDS. The faucet/transfer funding gate, restore-evidence ceilings and
 * transfer quotas do not apply (docs/api.md#x402-stands-apart-from-transfers), so nothing of them
 * is read here, nor the transfer switch. An agent signs at most AGENT_X402_DAILY_LIMIT a UTC day
 * (429 x402_daily_limit past it, nothing written or signed).
 *
 * An agent with a spending policy, or any agent of a frozen node, pays under it
 * (docs/x402.md#many-sellers-the-node-ceiling-and-the-agents-policy): any payee and amount the
 * node's sealed ceiling and the policy both allow; a deny is 403 `policy_denied` (the action ends
 * `failed`), a hold 202 with the `held` action until an operator approves it and the agent repeats.
 */

import type { Context, Handler } from "hono";
import * as z from "zod";
import { evaluateX402, NO_AGENT_POLICY, type PolicyDecision } from "../../../shared/agent-policy.ts";
import {
  AGENT_POLICY_REFUSAL_DETAILS,
  KEY_REFUSAL_DETAILS,
  X402_AUTHORIZATION_REFUSAL_DETAILS,
} from "../../../shared/enclave-protocol.ts";
import {
  type X402AuthorizeResponse,
  type X402PaymentRequired,
  x402AuthorizeRequestSchema,
} from "../../../shared/gateway-schemas.ts";
import { normaliseHex } from "../../../shared/hex.ts";
import { err, ok, type Result } from "../../../shared/result.ts";
import { nonceForKey, paymentIdForKey } from "../../../shared/x402-payment-key.ts";
import { idempotencyConflict, runIdempotentAction } from "../../agent-actions/idempotent-action.ts";
import {
  type ActionRow,
  createActionClaimer,
  findAction,
  requestHash,
} from "../../agent-actions/repository.ts";
import { secondsToNextUtcDay, utcDate } from "../../agent-actions/utc-day.ts";
import { actionView, endingRefusal } from "../../agent-actions/view.ts";
import type { Clock } from "../../clock.ts";
import type { Db } from "../../db/client.ts";
import { AppError } from "../../errors.ts";
import type { AppEnv } from "../../http/env.ts";
import { parseJsonValue, readJsonBody } from "../../http/json-body.ts";
import { policyDenied } from "../../policy/refusal.ts";
import { type PolicyState, readPolicyState } from "../../policy/store.ts";
import { CLIENT_FAILURE } from "../../signer/failure-class.ts";
import { KEY_BINDING_MISMATCH, keyUnavailable } from "../../signer/key-binding.ts";
import { refusalDetailAmong } from "../../signer/refusal-detail.ts";
import type { SignerClient, SignerFailure } from "../../signer/types.ts";
import { sortedKeysJson } from "../canonical-json.ts";
import { chooseDerivedKey, knownRequestHash } from "./authorize-derived-key.ts";
import {
  buildPaymentEnvelope,
  decodeStoredPaymentSignature,
  encodePaymentSignature,
  paymentAuthorization,
} from "./authorize-envelope.ts";
import { withPaymentId } from "./authorize-payment-key.ts";
import { chooseUnderPolicy, type X402Ceiling, type X402NodeTerms } from "./authorize-policy.ts";
import {
  type PolicyFinding,
  type SignOnceOutcome,
  type StoredAuthorization,
  signActionOnce,
  storedAuthorization,
} from "./authorize-repository.ts";
import {
  type ChosenRequirement,
  chooseRequirement,
  type RequirementRefusal,
  sentVersionRefusal,
  type X402AuthorizePolicy,
} from "./authorize-requirement.ts";

export type X402AuthorizeDeps = {
  db: Db;
  signer: Pick<SignerClient, "signX402Authorization">;
  clock: Clock;
  policy: X402AuthorizePolicy;
  /** The enclave's sealed x402 ceiling, read at start (get_policy); null: the pair only. */
  ceiling: X402Ceiling | null;
  /** AGENT_X402_DAILY_LIMIT: authorizations one agent may have signed per UTC day. */
  dailyLimit: number;
  /**
   * AGENT_X402_VALIDITY_MARGIN_SECONDS: an authorization ending within it of now can no longer be
   * settled, so asking again for its quote is a new purchase (authorize-derived-key.ts).
   */
  validityMarginSeconds: number;
  /** Told of each decision the agent's policy made under the lock (metrics). */
  decided?: (decision: PolicyDecision) => void;
};

/** A quote with a long description or extensions is larger than the money routes' 4 KiB bodies. */
const MAX_BODY_BYTES = 32 * 1024;

export function x402AuthorizeHandler(deps: X402AuthorizeDeps): Handler<AppEnv> {
  // Claims that arrive together share one insert (actions/repository.ts).
  const claim = createActionClaimer(deps.db);
  const terms: X402NodeTerms = { pair: deps.policy, ceiling: deps.ceiling };
  /** Which of the enclave's refusals is its policy's answer (its re-check, ahead of the gateway's view). */
  const enclavePolicy = (failure: SignerFailure): PolicyFinding | null => {
    const detail = refusalDetailAmong(failure, SIGN_X402_AUTHORIZATION_DETAILS);
    // The enclave names the rule (shared/enclave-protocol.ts, the error's `rule`).
    const rule = failure.rule ?? "policy";
    if (detail === "policy_denied") return { decision: "deny", rule, remaining: "0" };
    if (detail === "policy_held") return { decision: "hold", rule, remaining: null };
    return null;
  };
  return async (c) => {
    const { raw } = await readJsonBody(c, z.unknown(), MAX_BODY_BYTES);
    // Another x402 version first: its quote has another shape, which is not the agent's fault.
    const version = sentVersionRefusal(raw);
    if (version) throw new AppError(version.code, version.message);
    const body = parseJsonValue(x402AuthorizeRequestSchema, raw);
    // What goes into the envelope is the quote as sent (schema parsing reorders keys).
    const quote = (raw as { payment_required: Record<string, unknown> }).payment_required;
    const agent = c.get("agent");
    const given = body.nonce === undefined ? undefined : normaliseHex(body.nonce, 32);
    const now = deps.clock.now();
    const day = utcDate(now);
    // The key, the action already under it (a repeat) and the agent's policy, before anything is
    // written. Past the day's count (the policy's read tells it, policy or not), a new
    // authorization stores nothing; a repeat of one already recorded goes on (its answer is
    // stored, or its signing counts).
    const [keyed, state] = await Promise.all([
      keyAndKnown(deps.db, {
        agentId: agent.agentId,
        quote: body.payment_required,
        now,
        validityMarginSeconds: deps.validityMarginSeconds,
        givenKey: body.idempotency_key ?? (given === undefined ? undefined : `x402:${given}`),
      }),
      readPolicyState(deps.db, agent.agentId, now),
    ]);
    const { key: idempotencyKey, knownRequestHash: known, purchase } = keyed;
    const nonce = given ?? normaliseHex(await nonceForKey(idempotencyKey), 32);
    const paymentId = await paymentIdForKey(idempotencyKey);
    // The key a retry repeats the request with, named whatever the answer is.
    c.header("Idempotency-Key", idempotencyKey);

    const bounded = state.stored !== null || state.nodeFrozen;
    const chosen = bounded
      ? choosePolicyEntry(body.payment_required, terms, state, (index) =>
          known === null ? false : entryHashes(nonce, quote, index).includes(known),
        )
      : chooseNodeEntry(body.payment_required, deps.policy);
    // Refusals that depend on nothing but the request and the node: answered before anything is written.
    if (!chosen.ok) throw new AppError(chosen.error.code, chosen.error.message);
    const { requirement, amountUnits } = chosen.value;
    const copied = copiedParts(quote, requirement.index);
    // What the envelope carries: the copied parts, with the payment id when the quote declares the
    // extension (never part of the request hash, which binds the request as sent).
    const enveloped = { ...copied, extensions: withPaymentId(copied.extensions, paymentId) };
    if (state.usage.x402.dayCount >= deps.dailyLimit && known === null) {
      throw dailyLimitReached(deps.dailyLimit, now);
    }
    const resource = body.payment_required.resource.url;
    const payment = { nonce, payTo: requirement.payTo, amountUnits };

    return runIdempotentAction(claim, {
      claim: {
        agentId: agent.agentId,
        kind: "x402",
        idempotencyKey,
        // The resource URL is bound to the request hash, not to the signed authorization
        // (docs/x402.md#an-agent-pays-with-its-token-authorize); so is the rest of what the
        // envelope copies from the quote, byte for byte: the same hash rebuilds the same envelope
        // from a repeat's own body, but for the payee's offers, which it carries as they come.
        requestHash: requestHash("x402", { nonce, ...exactly(copied) }),
        amountUnits,
        toAddress: requirement.payTo,
        ...(purchase === undefined ? {} : { x402Purchase: purchase }),
      },
      formerRequestHashes: () => formerHashes(nonce, copied),
      answerStored: (action) => {
        // One the tracker's sweep ended without a signature answers as a transfer's does (409
        // `abandoned`): this key's request is over, a fresh nonce is needed. One the policy
        // refused answers its refusal again; one an operator rejected, or nobody decided in time,
        // answers its ending.
        const ended = endedRefusal(action, deps.clock.now());
        if (ended) throw ended;
        // Held: the held action again, until an operator approves (then the repeat signs it).
        if (action.status === "held") return c.json(actionView(action), 202);
        const stored = storedAuthorization(action.signedPayload);
        return action.status === "signed" && stored
          ? answer(c, action.actionId, stored, enveloped)
          : undefined;
      },
      run: async ({ actionId }) => {
        const outcome = await signActionOnce(
          deps.db,
          {
            actionId,
            agentId: agent.agentId,
            day,
            now,
            dailyLimit: deps.dailyLimit,
            payment,
            validBefore: () =>
              BigInt(Math.floor(deps.clock.now().getTime() / 1000)) + BigInt(requirement.maxTimeoutSeconds),
            validityMarginSeconds: deps.validityMarginSeconds,
            decide: (current, approved) => {
              if (!current.stored && !current.nodeFrozen) return null;
              const decision = evaluateX402(
                current.stored?.policy ?? NO_AGENT_POLICY,
                current.usage,
                { payTo: deps.policy.payTo, amountUnits: deps.policy.amountUnits },
                { payTo: requirement.payTo, amountUnits, resource },
                { nodeFrozen: current.nodeFrozen, approved },
              );
              deps.decided?.(decision);
              return decision;
            },
            enclavePolicy,
          },
          async (validBefore) => {
            const signed = await deps.signer.signX402Authorization({
              keyRef: agent.keyRef,
              // The enclave signs only when the key's address is the token's wallet (key binding).
              from: agent.assignedWallet,
              to: requirement.payTo,
              valueUnits: amountUnits,
              validAfter: 0n,
              validBefore,
              nonce,
            });
            if (!signed.ok) return signed;
            const { authorization, signature, countedOn } = signed.value;
            return ok({
              signed: {
                // Addresses as given (docs/x402.md#an-agent-pays-with-its-token-authorize): the
                // enclave signed for these two.
                authorization: paymentAuthorization({
                  from: agent.assignedWallet,
                  to: requirement.quotedPayTo,
                  value: requirement.amount,
                  validBefore: authorization.validBefore,
                  nonce: authorization.nonce,
                }),
                signature,
              },
              countedOn,
            });
          },
        );
        if (outcome.kind === "ended") {
          // Ended by the sweep between the claim and the signing: its stored refusal, as a repeat gets.
          const action = await findAction(deps.db, agent.agentId, actionId);
          throw (action && endedRefusal(action, deps.clock.now())) ?? endedConflict(actionId, outcome.status);
        }
        if (outcome.kind === "held") {
          // Answered from the row the hold stored (a 202 and a later GET agree).
          const action = await findAction(deps.db, agent.agentId, actionId);
          if (!action) throw new Error(`action ${actionId} vanished`);
          return c.json(actionView(action), 202);
        }
        return answerOutcome(c, deps, { actionId, outcome, copied: enveloped, now, amountUnits });
      },
    });
  };
}

/**
 * One logical payment, one key (docs/x402.md#payment-identifiers): the key the request gives (its
 * own, or `x402:<nonce>`), else one derived from the agent, the resource and the quote, so asking
 * again for the same quote answers the first authorization; the nonce and the envelope's payment
 * id follow from the key. With it, the request hash of the action already under the key (null:
 * none), and for a derived key the purchase a new action under it records.
 */
async function keyAndKnown(
  db: Db,
  params: {
    agentId: string;
    quote: X402PaymentRequired;
    now: Date;
    validityMarginSeconds: number;
    givenKey: string | undefined;
  },
): Promise<{ key: string; knownRequestHash: string | null; purchase?: string }> {
  const { givenKey: key, ...derive } = params;
  if (key === undefined) return chooseDerivedKey(db, derive);
  return {
    key,
    knownRequestHash: await knownRequestHash(db, { agentId: params.agentId, idempotencyKey: key }),
  };
}

/** What one signing of the action answers: the authorization, or why there is none. */
function answerOutcome(
  c: Context<AppEnv>,
  deps: X402AuthorizeDeps,
  params: {
    actionId: string;
    outcome: Exclude<SignOnceOutcome, { kind: "held" }>;
    copied: CopiedParts;
    now: Date;
    amountUnits: bigint;
  },
): Response {
  const { actionId, outcome, copied, now } = params;
  switch (outcome.kind) {
    case "signed":
      return answer(c, actionId, outcome.stored, copied);
    case "ended":
      throw endedConflict(actionId, outcome.status);
    case "daily_limit":
      throw dailyLimitReached(deps.dailyLimit, now);
    case "denied": {
      const refusal = policyDenied(outcome.finding);
      throw new AppError(refusal.code, refusal.message, {
        fields: { ...refusal.fields, action_id: actionId },
      });
    }
    case "refused": {
      const refusal = signerRefusal(outcome.failure, {
        ceiling: deps.ceiling,
        amountUnits: params.amountUnits,
      });
      const retryAfter = refusal.code === "x402_daily_limit" ? secondsToNextUtcDay(deps.clock.now()) : null;
      throw new AppError(refusal.code, refusal.message, {
        fields: { action_id: actionId, ...(retryAfter === null ? {} : { retry_after: retryAfter }) },
        headers: retryAfter === null ? {} : { "Retry-After": String(retryAfter) },
      });
    }
  }
}

/**
 * The refusal an x402 action that ended without a signature answers, as a money action's repeat
 * does (agent-actions/view.ts endingRefusal, its fields and headers as first answered):
 * `abandoned` for one the sweep ended. Undefined otherwise.
 */
function endedRefusal(action: ActionRow, now: Date): AppError | undefined {
  const ended = endingRefusal(action, now);
  return ended
    ? new AppError(ended.code, ended.message, {
        headers: ended.headers,
        fields: { ...ended.fields, action_id: action.actionId },
      })
    : undefined;
}

function endedConflict(actionId: string, status: string): AppError {
  return idempotencyConflict(
    actionId,
    `this authorization ended ${status} without a signature; authorize again with a fresh nonce`,
  );
}

/**
 * What the envelope copies from the quote, as the agent sent it. Extensions given as null are
 * none, as the official packages read them: absent from the envelope and the same request as a
 * quote without them.
 */
type CopiedParts = { resource: unknown; accepted: unknown; extensions: unknown };

function copiedParts(quote: Record<string, unknown>, index: number): CopiedParts {
  return {
    resource: quote.resource,
    accepted: (quote.accepts as unknown[])[index],
    extensions: quote.extensions ?? undefined,
  };
}

/** The request hashes (now's and the former forms) of this nonce with the quote's entry `index`. */
function entryHashes(nonce: string, quote: Record<string, unknown>, index: number): string[] {
  const copied = copiedParts(quote, index);
  return [requestHash("x402", { nonce, ...exactly(copied) }), ...formerHashes(nonce, copied)];
}

/**
 * The request hashes rows written before took: the parts with their keys sorted, and, before the
 * offers were left out (boundExtensions), the extensions whole, as sent and sorted.
 */
function formerHashes(nonce: string, copied: CopiedParts): string[] {
  return [
    requestHash("x402", { nonce, ...sortedKeys(copied) }),
    requestHash("x402", { nonce, ...exactly(copied, { withOffers: true }) }),
    requestHash("x402", { nonce, ...sortedKeys(copied, { withOffers: true }) }),
  ];
}

type EntryChoice = Result<{ requirement: ChosenRequirement; amountUnits: bigint }, RequirementRefusal>;

/** Without a policy: the node's pair exactly, as always. */
function chooseNodeEntry(quote: X402PaymentRequired, pair: X402AuthorizePolicy): EntryChoice {
  const chosen = chooseRequirement(quote, pair);
  return chosen.ok ? ok({ requirement: chosen.value, amountUnits: pair.amountUnits }) : chosen;
}

/**
 * Under a policy (or a frozen node): the first entry the node and the policy allow, or the one a
 * repeat was made for; its decision is taken again under the day's lock (signActionOnce).
 */
function choosePolicyEntry(
  quote: X402PaymentRequired,
  terms: X402NodeTerms,
  state: PolicyState,
  prefer: (index: number) => boolean,
): EntryChoice {
  const chosen = chooseUnderPolicy(
    quote,
    terms,
    { policy: state.stored?.policy ?? null, usage: state.usage, nodeFrozen: state.nodeFrozen },
    { prefer },
  );
  if (!chosen.ok) return err(chosen.error);
  return ok({ requirement: chosen.value.chosen, amountUnits: chosen.value.amountUnits });
}

/**
 * The answer: the same bytes every time for one action and one request hash. A stored header
 * value (rows written before only the signature was stored) is returned as it is.
 */
function answer(
  c: Context<AppEnv>,
  actionId: string,
  stored: StoredAuthorization,
  copied: CopiedParts,
): Response {
  const paymentSignature =
    stored.kind === "header"
      ? stored.paymentSignature
      : encodePaymentSignature(buildPaymentEnvelope({ ...copied, ...stored.signed }));
  const envelope = decodeStoredPaymentSignature(paymentSignature);
  const body: X402AuthorizeResponse = {
    action_id: actionId,
    payment_signature: paymentSignature,
    payment_payload: envelope as X402AuthorizeResponse["payment_payload"],
    valid_before: envelope.payload.authorization.validBefore,
  };
  // A signed payment is as good as money until it is settled or expires: no cache keeps it.
  c.header("cache-control", "no-store");
  return c.json(body, 200);
}

/** 429 until the next UTC day; nothing was written or signed. */
function dailyLimitReached(limit: number, now: Date): AppError {
  const seconds = secondsToNextUtcDay(now);
  return new AppError(
    "x402_daily_limit",
    `this agent may authorize ${limit} x402 payments per UTC day (AGENT_X402_DAILY_LIMIT)`,
    { fields: { retry_after: seconds }, headers: { "Retry-After": String(seconds) } },
  );
}

/** What sign_x402_authorization is refused with: the key, the sealed x402 terms, the agent's policy. */
const SIGN_X402_AUTHORIZATION_DETAILS = [
  ...KEY_REFUSAL_DETAILS,
  ...X402_AUTHORIZATION_REFUSAL_DETAILS,
  ...AGENT_POLICY_REFUSAL_DETAILS,
];

/**
 * The enclave re-checks amount, payTo, validity, the key's daily count and the key binding under
 * its sealed policy; a node configured unlike it (or a policy changed since start) is refused there
 * with the same meaning. A switch over the refusal's detail (never its text), exhaustive over
 * sign_x402_authorization's.
 */
function signerRefusal(
  failure: SignerFailure,
  context: { ceiling: X402Ceiling | null; amountUnits: bigint },
): {
  code:
    | "x402_amount_not_allowed"
    | "x402_pay_to_not_allowed"
    | "x402_validity_too_long"
    | "x402_daily_limit"
    | "agent_key_binding_mismatch"
    | "agent_key_unavailable"
    | "agent_signer_unavailable";
  message: string;
} {
  const message = `the signer's sealed policy refused this authorization (${failure.reason})`;
  switch (refusalDetailAmong(failure, SIGN_X402_AUTHORIZATION_DETAILS)) {
    case "x402_amount":
      return { code: "x402_amount_not_allowed", message };
    case "x402_pay_to":
      return { code: "x402_pay_to_not_allowed", message };
    case "x402_validity":
      return { code: "x402_validity_too_long", message };
    case "x402_ceiling":
      // Over the sealed ceiling's amount, or to a payee off its list: the enclave's rule says which
      // (the gateway's view of the ceiling, read at start, may lag it); without one, that view.
      if (failure.rule === "x402_payees") return { code: "x402_pay_to_not_allowed", message };
      if (failure.rule === "x402_max_per_payment_units") return { code: "x402_amount_not_allowed", message };
      return context.ceiling && context.amountUnits <= context.ceiling.maxPerPaymentUnits
        ? { code: "x402_pay_to_not_allowed", message }
        : { code: "x402_amount_not_allowed", message };
    case "x402_daily":
      return { code: "x402_daily_limit", message: `${message}; the count resets at the next UTC day` };
    case "key_binding":
      return KEY_BINDING_MISMATCH;
    // The policy's answers are taken under the lock (signActionOnce's enclavePolicy), never here.
    case "policy_denied":
    case "policy_held":
    case "x402_payer":
    case undefined:
      // Without a sealed bound named, key_purpose_mismatch means the enclave holds no such key.
      if (failure.code === "key_purpose_mismatch") return keyUnavailable("wallet");
      // A request the enclave answered too late may still be signed there, and counted against the
      // key's sealed daily count (durable before a signature leaves), though nobody holds it: the
      // agent near its limit must not be told nothing was signed (as a transfer's is not: not-signed.ts).
      if (failure.code === CLIENT_FAILURE.timeout) {
        return {
          code: "agent_signer_unavailable",
          message: `the signer did not answer in time (${failure.code}): nothing was stored or sent, though a signature it made meanwhile may still count against the wallet's sealed daily x402 limit; retry with the same nonce (and idempotency_key), which answers once the signer does`,
        };
      }
      return {
        code: "agent_signer_unavailable",
        message: `the signer cannot sign this authorization (${failure.code}); nothing was signed: retry with the same nonce (and idempotency_key), which signs it once the signer can`,
      };
  }
}

/**
 * The copied parts as sent, keys in the sender's order: equal strings build equal envelopes, but
 * for the payee's offers, which a repeat's envelope carries as its own quote has them.
 */
function exactly(copied: CopiedParts, former = { withOffers: false }): Record<string, string | null> {
  const extensions = former.withOffers ? copied.extensions : boundExtensions(copied.extensions);
  return {
    resource: JSON.stringify(copied.resource),
    accepted: JSON.stringify(copied.accepted),
    extensions: extensions === undefined ? null : JSON.stringify(extensions),
  };
}

/** The copied parts as the request hash took them before: object keys sorted at every level. */
function sortedKeys(copied: CopiedParts, former = { withOffers: false }): Record<string, string | null> {
  const extensions = former.withOffers ? copied.extensions : boundExtensions(copied.extensions);
  return {
    resource: sortedKeysJson(copied.resource),
    accepted: sortedKeysJson(copied.accepted),
    extensions: extensions === undefined ? null : sortedKeysJson(extensions),
  };
}

/**
 * The payee's signed offers (docs/x402.md#offers-and-receipts): a node signs them anew once half
 * their validity has passed, and each node its own, so the 402 a retry of one purchase gets can
 * carry another. They are no part of which request it is: the same authorization answers it.
 */
const OFFER_RECEIPT = "offer-receipt";

/**
 * The extensions that tell one request from another: all but the payee's offers, none when the
 * offers were all (a node past its client's window of offers serves its quote without one).
 */
function boundExtensions(extensions: unknown): unknown {
  if (typeof extensions !== "object" || extensions === null || !(OFFER_RECEIPT in extensions)) {
    return extensions;
  }
  const { [OFFER_RECEIPT]: _offers, ...rest } = extensions as Record<string, unknown>;
  return Object.keys(rest).length === 0 ? undefined : rest;
}
