/**
 * The facilitator without a web framework (docs/x402.md#the-demo-and-the-facilitator):
 * `supported`, `verify` and `settle` take a request as data (its body, already read, and the
 * client's address) and answer the reference's shapes with an HTTP status, which the routes
 * (facilitator.ts) write as they are and the demo (demo.ts) settles through. Failures are data with
 * status 200 from verify, as the reference facilitator answers them; a settle that did not pay is
 * never 200 (settle-answer.ts settleStatus). A body that is not JSON is 400, one too large 413; the
 * chain out of reach is 503 `chain_unavailable` from both, the database out of reach 503
 * `service_unavailable` (whileDatabaseAnswers). The body's own `x402Version` must be 2,
 * as the envelope's must.
 *
 * Each request is counted for what it is (client-limit.ts): one the pure checks refuse against its
 * client's address, a signed payment against its payer and its address's payment budget; past
 * either, 429 `rate_limited` with a Retry-After. A payer or address that has made as many
 * settlements revert as it may is refused 429 `invalid_exact_evm_too_many_reverts`
 * (revert-guard.ts), and a settle holds a slot of both while it runs.
 */

import { CAIP2_NETWORK } from "../../../shared/constants.ts";
import type { Hex } from "../../../shared/hex.ts";
import { err, ok } from "../../../shared/result.ts";
import { isDatabaseUnavailable } from "../../db/unavailable.ts";
import { X402_REASONS, type X402Reason } from "../reasons.ts";
import type { X402Runtime } from "../setup.ts";
import { type CatalogueEntry, settledResourceOf } from "./catalogue-entry.ts";
import type { X402Limits } from "./client-limit.ts";
import { heldPresentation, sha256 } from "./earlier-presentation.ts";
import { type PaymentKey, paidAnswerAwaits, returnPaidAnswer } from "./paid-answers.ts";
import { type Parsed, type PaymentEnvelope, parseEnvelope } from "./payment.ts";
import { PAYMENT_IDENTIFIER, paymentFingerprint, paymentIdOf } from "./payment-identifier.ts";
import { type PaymentIdRequest, paymentIdStanding } from "./payment-ids.ts";
import { X402_VERSION } from "./requirements.ts";
import { guardReason, type RevertGuard, revertUsedElsewhere } from "./revert-guard.ts";
import {
  respond,
  type SettleOutcome,
  type SettleResponse,
  settlementStatusPath,
  settleStatus,
} from "./settle-answer.ts";
import { settleOncePerId } from "./settle-once-per-id.ts";
import { settledOutcome } from "./settled-outcome.ts";
import { hasSettlement, hasSignedSettlement } from "./settlement-view.ts";
import { authorizationUseOf } from "./used-elsewhere.ts";
import {
  checkClosedPayment,
  checkContext,
  checkPayment,
  compareRequirements,
  type VerifyDeps,
  verifyFacts,
} from "./verify.ts";

/** `@x402/core`'s VerifyResponse. */
export type VerifyResponse = { isValid: boolean; invalidReason?: string; payer?: string };

/** `@x402/core`'s SupportedResponse, for the one kind this facilitator settles. */
export type SupportedResponse = {
  kinds: { x402Version: number; scheme: string; network: string; extra: unknown }[];
  extensions: string[];
  signers: Record<string, string[]>;
};

/**
 * What a route writes: the body, its status, how long to wait first when it is 429, and for a
 * settle of a payment, the path below {base} of its settlement's status (the route makes it a URL).
 */
export type FacilitatorAnswer<Body> = {
  status: 200 | 400 | 409 | 413 | 429 | 503 | 504;
  body: Body;
  retryAfterSeconds?: number;
  statusPath?: string;
  /**
   * The payment whose one paid answer this answer took (a settle answered as paid): the route gives
   * it back when its caller is gone before the answer is written (returnPaidAnswer).
   */
  paidAnswer?: PaymentKey;
};

/**
 * A request's body as the route read it: its JSON, or why there is none (`too_deep`: nested past
 * MAX_JSON_DEPTH, which the payment's hashes, a recursive walk, could not take).
 */
export type FacilitatorBody = { json: unknown } | "not_json" | "too_large" | "too_deep";

/** A payment that passed the pure checks, as the demo and `/settle` hand it to the settler. */
export type CheckedPayment = {
  payer: string;
  envelope: PaymentEnvelope;
  authorization: PaymentEnvelope["authorization"];
  /** The `payment-identifier` id the payment carries (payment-identifier.ts), if any. */
  paymentId?: string;
  /**
   * Past its window (validBefore) but otherwise sound (verify.ts checkClosedPayment): answered
   * from its settlement when one is kept, else refused as past its window (windowStands).
   */
  windowClosed?: true;
};

/**
 * What settling a checked payment came to: the settler's outcome, with the nonce of the settlement
 * that answers it (another presentation's, when the payment id names one); or why nothing was
 * settled: turned away first, or its payment id bound to another request.
 */
export type SettleChecked =
  | { outcome: SettleOutcome; nonce: string }
  | { turned: Turned }
  | { conflict: true };

/** Refused before anything was settled: the reason, and the wait when the refusal is a 429. */
export type Turned = { reason: X402Reason; retryAfterSeconds?: number };

export type Facilitator = {
  supported(): SupportedResponse;
  verify(body: FacilitatorBody, clientIp: string): Promise<FacilitatorAnswer<VerifyResponse>>;
  settle(body: FacilitatorBody, clientIp: string): Promise<FacilitatorAnswer<SettleResponse>>;
  /** A refusal of the pure checks the caller made itself, counted against the address (the demo's header). */
  refused(clientIp: string, reason: X402Reason): Turned;
  /**
   * The payment's own checks, as the demo runs them on its PAYMENT-SIGNATURE: a refusal counts
   * against the client's address (past its window: `rate_limited` with the wait).
   */
  checkEnvelope(envelope: PaymentEnvelope, clientIp: string): CheckedPayment | { turned: Turned };
  /**
   * Settles a checked payment within its payer's and address's windows and the revert guard's
   * slot: the settler's outcome, or why it was turned away first (a 429 with its wait).
   */
  settleChecked(payment: CheckedPayment, clientIp: string): Promise<SettleChecked>;
  /**
   * Gives back the paid answer of the settlement a presentation was answered by (its payer, and
   * SettleChecked's nonce, or a settle's `paidAnswer`), whose caller left before that answer was
   * written (paid-answers.ts returnPaidAnswer): the payer's retry is paid.
   */
  returnPaidAnswer(payment: PaymentKey): Promise<void>;
};

export type FacilitatorDeps = {
  runtime: X402Runtime;
  verifyDeps: VerifyDeps;
  limits: X402Limits;
  guard: RevertGuard;
  /** How long a settle waits for a receipt (AGENT_X402_RECEIPT_TIMEOUT_MS): a payment id's earlier settlement is waited for as long. */
  receiptTimeoutMs: number;
};

export function createFacilitator({
  runtime,
  verifyDeps,
  limits,
  guard,
  receiptTimeoutMs,
}: FacilitatorDeps): Facilitator {
  /** Whether the chain holds the payer's authorization as used (undefined: it did not answer). */
  const authorizationUsed = async (payer: Hex, nonce: Hex): Promise<boolean | undefined> =>
    (await verifyDeps.payerFacts(payer, nonce))?.nonceUsed;
  /** A refusal of the pure checks, counted against the address: past its window, rate_limited. */
  const refusedFrom = (clientIp: string, reason: X402Reason): Turned => {
    const wait = limits.refused(clientIp);
    return wait === undefined ? { reason } : { reason: X402_REASONS.rateLimited, retryAfterSeconds: wait };
  };

  /**
   * checkPayment; a payment refused only for its closed window is a payment all the same, marked
   * so: a settlement of it may have settled it (a retry after `settlement_pending` comes when it
   * comes), and it is answered from that settlement, never told it expired.
   */
  const checkSigned = (envelope: PaymentEnvelope): Parsed<Omit<CheckedPayment, "envelope">> => {
    const context = checkContext(verifyDeps);
    const checked = checkPayment(envelope, runtime.requirements, context);
    if (checked.ok || checked.error.code !== X402_REASONS.validBefore) return checked;
    const closed = checkClosedPayment(envelope, runtime.requirements, context);
    return closed.ok ? ok({ ...closed.value, windowClosed: true }) : checked;
  };
  /** A payment past its window that no settlement of ours answers for: refused as past it. */
  const windowStands = async (payment: CheckedPayment): Promise<boolean> =>
    payment.windowClosed === true && !(await hasSettlement(verifyDeps.db, payment.authorization));

  /**
   * Parses `{x402Version, paymentPayload, paymentRequirements}` and runs the checks that need
   * neither the chain nor the database (verify.ts checkPayment).
   */
  const check = (body: unknown): Parsed<CheckedPayment> => {
    const request = fieldsOf(body);
    const envelope = parseEnvelope(request.paymentPayload);
    if (!envelope.ok) return envelope;
    const payer = envelope.value.authorization.from;
    if (request.x402Version !== X402_VERSION) return err({ code: X402_REASONS.invalidX402Version, payer });
    const given = request.paymentRequirements;
    if (typeof given !== "object" || given === null) {
      return err({ code: X402_REASONS.invalidPaymentRequirements, payer });
    }
    const differs = compareRequirements(given as Record<string, unknown>, runtime.requirements);
    if (differs) return err({ code: differs, payer });
    const checked = checkSigned(envelope.value);
    if (!checked.ok) return checked;
    const id = paymentIdOf(envelope.value.raw);
    if ("refused" in id) return err({ code: id.refused, payer });
    return ok({ ...checked.value, envelope: envelope.value, ...id });
  };

  const idRequest = (payment: CheckedPayment & { paymentId: string }): PaymentIdRequest => ({
    payer: payment.payer,
    paymentId: payment.paymentId,
    fingerprint: paymentFingerprint({
      resourceUrl: payment.envelope.resource.url,
      accepted: payment.envelope.accepted,
    }),
    nonce: payment.authorization.nonce,
  });

  /**
   * What a request comes to before the chain or the database is read: the checked payment, or why
   * it was refused (the pure checks, counted against the address; a window that is full) with
   * the payer it names and the status to answer.
   */
  const admit = (
    body: FacilitatorBody,
    clientIp: string,
  ): CheckedPayment | { turned: Turned; payer: string; status: 200 | 400 | 413 | 429 } => {
    const refused = (reason: X402Reason, payer: string, status: 200 | 400 | 413) => {
      const turned = refusedFrom(clientIp, reason);
      return { turned, payer, status: turned.retryAfterSeconds === undefined ? status : (429 as const) };
    };
    if (body === "too_large") return refused(X402_REASONS.invalidPayload, "", 413);
    if (body === "not_json") return refused(X402_REASONS.invalidPayloadJson, "", 400);
    if (body === "too_deep") return refused(X402_REASONS.invalidPayload, "", 400);
    const checked = check(body.json);
    if (!checked.ok) return refused(checked.error.code, checked.error.payer ?? "", 200);
    const wait = limits.payment(clientIp, checked.value.payer, checked.value.authorization.nonce);
    if (wait !== undefined) {
      return {
        turned: { reason: X402_REASONS.rateLimited, retryAfterSeconds: wait },
        payer: checked.value.payer,
        status: 429,
      };
    }
    return checked.value;
  };

  /**
   * Within the payer's and address's revert-guard slot, the settler's outcome. `resource`: what the
   * catalogue lists once the payment settles (a /settle request's, never the demo's).
   */
  const settleInSlot = async (
    payment: CheckedPayment,
    clientIp: string,
    resource: CatalogueEntry | undefined,
  ): Promise<{ outcome: SettleOutcome } | { turned: Turned }> => {
    // The wait for a slot and then for the receipt together within one receipt wait.
    const answerBy = Date.now() + receiptTimeoutMs;
    const slot = await guard.enter(clientIp, payment.payer, payment.authorization.nonce);
    if (!slot.ok) {
      // A payment whose settlement is signed already signs nothing more, so it can make nothing
      // revert: presented again (the retry a settlement_pending answer asked for), it is answered
      // from that settlement as it stands now, not refused for reverts its payer or address made
      // since (docs/x402.md#windows-and-reverted-settlements).
      if (
        slot.error.code === "too_many_reverts" &&
        (await hasSignedSettlement(verifyDeps.db, payment.authorization))
      ) {
        const answered = await heldPresentation(
          {
            db: verifyDeps.db,
            receiptTimeoutMs,
            validityMarginSeconds: verifyDeps.validityMarginSeconds,
            chainAuthorizationUsed: authorizationUsed,
          },
          { authorization: payment.authorization, payload: payment.envelope.raw.payload },
          Date.now(),
          { paymentId: payment.paymentId },
        );
        if (answered !== "released") return { outcome: answered };
      }
      return { turned: { reason: guardReason(slot.error), retryAfterSeconds: slot.error.retryAfterSeconds } };
    }
    // A repeat of a settle whose answer was lost is a duplicate: answered from the stored
    // settlement (its transaction), never signed again.
    const outcome = await settledOutcome(
      slot.value,
      () =>
        runtime.settler.settle({
          authorization: payment.authorization,
          signature: payment.envelope.signature,
          requirement: payment.envelope.accepted,
          payload: payment.envelope.raw.payload,
          ...(resource ? { resource } : {}),
          // Only a payment whose id was bound to this request reaches the settler with one.
          ...(payment.paymentId === undefined ? {} : { paymentId: payment.paymentId }),
          answerBy,
        }),
      // A revert of a front-run (another relayer used the authorization first) is not the payer's.
      () => revertUsedElsewhere(verifyDeps.db, authorizationUsed, payment.authorization),
    );
    return { outcome };
  };

  const settleOnce = async (
    payment: CheckedPayment,
    clientIp: string,
    resource: CatalogueEntry | undefined,
  ): ReturnType<Facilitator["settleChecked"]> => {
    if (await windowStands(payment)) return { turned: { reason: X402_REASONS.validBefore } };
    const { paymentId } = payment;
    if (paymentId === undefined) {
      const settled = await settleInSlot(payment, clientIp, resource);
      return "turned" in settled ? settled : { ...settled, nonce: payment.authorization.nonce };
    }
    // One request under one id settles once, whatever authorization each presentation carries.
    let turned: Turned | undefined;
    const settled = await settleOncePerId(
      {
        db: verifyDeps.db,
        receiptTimeoutMs,
        holdBeyondReceiptMs: runtime.holdBeyondReceiptMs,
        chainAuthorizationUsed: authorizationUsed,
        validityMarginSeconds: verifyDeps.validityMarginSeconds,
        // An id's second presentation waits on its first's settlement: at shutdown, no longer.
        stopping: runtime.stopping,
      },
      idRequest({ ...payment, paymentId }),
      async () => {
        const inSlot = await settleInSlot(payment, clientIp, resource);
        if ("outcome" in inSlot) return inSlot.outcome;
        turned = inSlot.turned;
        // Turned away before settling: nothing claimed, so the id is released.
        return { kind: "failed", response: respond(payment.payer, "", inSlot.turned.reason) };
      },
    );
    return turned ? { turned } : settled;
  };
  const settleChecked: Facilitator["settleChecked"] = (payment, clientIp) =>
    settleOnce(payment, clientIp, undefined);

  /** A verify past admission: the payment id's standing, the revert guard, then the payment's facts. */
  const verifyAdmitted = async (
    admitted: CheckedPayment,
    clientIp: string,
  ): Promise<FacilitatorAnswer<VerifyResponse>> => {
    const refuse = (turned: Turned, payer: string, status: 409 | 429) => ({
      status,
      body: { isValid: false, invalidReason: turned.reason, ...(payer ? { payer } : {}) },
      ...retryAfter(turned),
    });
    // An id its payer gave another request would be refused by settle: say so now. One whose
    // request has a settlement is answered by settle from it, whatever this authorization's own
    // facts (its nonce, the balance left after that payment) and whatever the revert guard says
    // of the payer since (settle signs nothing for it): valid, as the retry of a purchase whose
    // answer was lost must be for a seller that verifies before it settles.
    const { paymentId } = admitted;
    if (paymentId !== undefined) {
      const standing = await paymentIdStanding(
        verifyDeps.db,
        idRequest({ ...admitted, paymentId }),
        verifyDeps.validityMarginSeconds,
      );
      if (standing === "conflict")
        return refuse({ reason: X402_REASONS.paymentIdentifierConflict }, admitted.payer, 409);
      if (standing === "answered") return { status: 200, body: { isValid: true, payer: admitted.payer } };
      // Its settlement under the id ended without ours moving money: settle gives the id to this
      // authorization only if the chain says the bound one is unused; if another relayer used it,
      // the id answers transaction_failed from that settlement, and so does verify.
      if (typeof standing === "object") {
        // What the settlement keeps, once final; else the chain, whose answer it then keeps.
        const used = await authorizationUseOf(
          verifyDeps.db,
          authorizationUsed,
          { from: admitted.authorization.from, nonce: standing.ended as Hex },
          standing.kept,
        );
        if (used === undefined)
          return {
            status: 503,
            body: { isValid: false, invalidReason: X402_REASONS.chainUnavailable, payer: admitted.payer },
          };
        if (used)
          return {
            status: 200,
            body: { isValid: false, invalidReason: X402_REASONS.transactionFailed, payer: admitted.payer },
          };
      }
    }
    // A settle now would be refused: say so rather than that it would settle. Not for the retry a
    // settlement_pending answer asked for, which settle answers from its signed settlement, paid.
    const held = await guard.check(clientIp, admitted.payer);
    if (
      held &&
      !(await paidAnswerAwaits(verifyDeps.db, admitted.authorization, sha256(admitted.envelope.raw.payload)))
    ) {
      return refuse(
        { reason: guardReason(held), retryAfterSeconds: held.retryAfterSeconds },
        admitted.payer,
        429,
      );
    }
    const result = await verifyFacts(verifyDeps, admitted);
    // A payment whose settlement owes this payload its paid answer (the retry a settlement_pending
    // answer asked for) is answered paid by settle: valid, or a seller that verifies first never
    // settles it.
    if (
      !result.ok &&
      result.error.code === X402_REASONS.nonceUsed &&
      (await paidAnswerAwaits(verifyDeps.db, admitted.authorization, sha256(admitted.envelope.raw.payload)))
    )
      return { status: 200, body: { isValid: true, payer: admitted.payer } };
    return {
      // The chain out of reach says nothing of the payment: a named 503, not a verdict.
      status: !result.ok && result.error.code === X402_REASONS.chainUnavailable ? 503 : 200,
      body: result.ok
        ? { isValid: true, payer: result.value.payer }
        : {
            isValid: false,
            invalidReason: result.error.code,
            ...(result.error.payer ? { payer: result.error.payer } : {}),
          },
    };
  };

  /** A settle past admission: settled once, its answer with the path of its status. */
  const settleAdmitted = async (
    admitted: CheckedPayment,
    clientIp: string,
  ): Promise<FacilitatorAnswer<SettleResponse>> => {
    // The resource the request names is listed by discovery once this payment settles
    // (docs/x402.md#discovery-the-resource-catalogue).
    const settled = await settleOnce(admitted, clientIp, settledResourceOf(admitted.envelope.raw.resource));
    if ("conflict" in settled) {
      return { status: 409, body: failed(X402_REASONS.paymentIdentifierConflict, admitted.payer) };
    }
    if ("turned" in settled) {
      const answer = failed(settled.turned.reason, admitted.payer);
      return {
        status: settled.turned.retryAfterSeconds === undefined ? settleStatus(answer) : 429,
        body: answer,
        ...retryAfter(settled.turned),
      };
    }
    const { response } = settled.outcome;
    return {
      status: settleStatus(response),
      body: response,
      statusPath: settlementStatusPath(admitted.payer, settled.nonce),
      ...(settled.outcome.kind === "settled"
        ? { paidAnswer: { from: admitted.authorization.from, nonce: settled.nonce as Hex } }
        : {}),
    };
  };

  return {
    supported: () => ({
      kinds: [
        {
          x402Version: X402_VERSION,
          scheme: runtime.requirements.scheme,
          network: runtime.requirements.network,
          extra: runtime.requirements.extra,
        },
      ],
      extensions: [PAYMENT_IDENTIFIER],
      signers: { "eip155:*": [runtime.settlerAddress] },
    }),

    async verify(body, clientIp) {
      const refuse = (turned: Turned, payer: string, status: 200 | 400 | 409 | 413 | 429) => ({
        status,
        body: { isValid: false, invalidReason: turned.reason, ...(payer ? { payer } : {}) },
        ...retryAfter(turned),
      });
      const admitted = admit(body, clientIp);
      if ("turned" in admitted) return refuse(admitted.turned, admitted.payer, admitted.status);
      return whileDatabaseAnswers(
        async () =>
          (await windowStands(admitted))
            ? refuse({ reason: X402_REASONS.validBefore }, admitted.payer, 200)
            : verifyAdmitted(admitted, clientIp),
        () => ({
          status: 503,
          body: { isValid: false, invalidReason: X402_REASONS.serviceUnavailable, payer: admitted.payer },
          retryAfterSeconds: DATABASE_RETRY_AFTER_SECONDS,
        }),
      );
    },

    // Never 200 with `success: false` (settle-answer.ts settleStatus): a client that takes a 200 for
    // a settlement must never be handed a failure.
    async settle(body, clientIp) {
      const admitted = admit(body, clientIp);
      if ("turned" in admitted) {
        const answer = failed(admitted.turned.reason, admitted.payer);
        return {
          status: admitted.status === 200 ? settleStatus(answer) : admitted.status,
          body: answer,
          ...retryAfter(admitted.turned),
        };
      }
      return whileDatabaseAnswers(
        () => settleAdmitted(admitted, clientIp),
        () => ({
          status: 503,
          body: failed(X402_REASONS.serviceUnavailable, admitted.payer),
          retryAfterSeconds: DATABASE_RETRY_AFTER_SECONDS,
        }),
      );
    },

    checkEnvelope(envelope, clientIp) {
      const checked = checkSigned(envelope);
      if (!checked.ok) return { turned: refusedFrom(clientIp, checked.error.code) };
      const id = paymentIdOf(envelope.raw);
      if ("refused" in id) return { turned: refusedFrom(clientIp, id.refused) };
      // A signed payment reads the chain and may settle: it counts against its payer and its address.
      const wait = limits.payment(clientIp, checked.value.payer, checked.value.authorization.nonce);
      if (wait !== undefined)
        return { turned: { reason: X402_REASONS.rateLimited, retryAfterSeconds: wait } };
      return { ...checked.value, envelope, ...id };
    },

    settleChecked,
    returnPaidAnswer: (payment) => returnPaidAnswer(verifyDeps.db, payment),
    refused: refusedFrom,
  };
}

function retryAfter(turned: Turned): { retryAfterSeconds?: number } {
  return turned.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: turned.retryAfterSeconds };
}

/** A request's fields; a JSON body that is no object (`null`, a number) has none, so its payload is missing. */
function fieldsOf(body: unknown): Record<string, unknown> {
  return (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
}

function failed(reason: string, payer: string): SettleResponse {
  return {
    success: false,
    errorReason: reason as SettleResponse["errorReason"],
    payer,
    transaction: "",
    network: CAIP2_NETWORK,
  };
}

/** Seconds a client waits before presenting a payment again while the database does not answer. */
const DATABASE_RETRY_AFTER_SECONDS = 1;

/**
 * A verify or settle whose database did not answer is answered in its own shape, 503 with
 * `service_unavailable` and Retry-After (docs/x402.md#what-settle-answers), not in the gateway's
 * envelope an x402 client cannot read: the payment is presented again, and settles once.
 */
async function whileDatabaseAnswers<Body>(
  run: () => Promise<FacilitatorAnswer<Body>>,
  down: () => FacilitatorAnswer<Body>,
): Promise<FacilitatorAnswer<Body>> {
  try {
    return await run();
  } catch (error) {
    if (!isDatabaseUnavailable(error)) throw error;
    return down();
  }
}
