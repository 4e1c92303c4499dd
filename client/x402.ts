/**
 * The client's x402 side (docs/x402.md): asking the gateway to authorize a
 * quote, and answering a 402 with it. Never pays twice for one logical request: without a key of
 * the caller's, the gateway derives it from the agent, the resource and the quote
 * (docs/x402.md#payment-identifiers), and the nonce and the payment id follow from the key, so a
 * repeated call presents the same authorization (the gateway returns the stored one) instead of
 * signing a new payment.
 */

import { nonceForKey } from "../shared/x402-payment-key.ts";
import { X402_AUTHORIZATION } from "./answer-shapes.ts";
import { PaymentOutcomeUnknown, PaymentRefused, PolicyHeld, ServiceUnavailable } from "./errors.ts";
import { callJson, type FetchLike, inParentheses, isTimeout, networkErrorCode } from "./request.ts";

/** A requirement object of a quote (`accepts[i]`). */
export type PaymentRequirements = {
  scheme: string;
  network: string;
  asset: string;
  amount: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra?: Record<string, unknown>;
  [field: string]: unknown;
};

/** The 402 body: the quote. */
export type PaymentRequired = {
  x402Version?: number;
  resource?: { url: string; mimeType?: string | null; description?: string | null };
  accepts: PaymentRequirements[];
  error?: string;
  [field: string]: unknown;
};

export type AuthorizeX402Params = {
  /**
   * Fixed per logical payment; when absent (and no nonce is given), the gateway derives it from
   * the agent, the resource and the quote. A repeat returns the stored authorization. A new key
   * pays for the same quote again.
   */
  idempotencyKey?: string;
  /** 32 bytes, 0x-hex; derived from the idempotency key when absent. */
  nonce?: `0x${string}`;
};

/** The answer of POST /agent/v1/x402/authorize. */
export type X402Authorization = {
  action_id: string;
  /** The exact value for the PAYMENT-SIGNATURE header (Base64 of the JSON envelope). */
  payment_signature: string;
  payment_payload: Record<string, unknown>;
  valid_before: string;
  /** The key the authorization is stored under (repeat with it to get the same bytes). */
  idempotency_key: string;
};

export type FetchWithPaymentOptions = {
  /**
   * Names the logical request. Absent, the gateway derives it from the agent, the resource and the
   * quote: a retry of the same call presents the same authorization. Pass a new key to pay for the
   * same resource and quote once more.
   */
  idempotencyKey?: string;
  /**
   * How long a payment answered `settlement_pending` is presented again, the same payment, before
   * the call gives up with PaymentOutcomeUnknown (default 30 s).
   */
  pendingWaitMs?: number;
  /**
   * Told the key the payment is stored under just before the payment is first presented. A caller
   * that may be stopped while the paid request waits can name it: the same call run again with it
   * presents the same payment whenever it runs, where the same call without it, once this
   * authorization can no longer pay, is a new purchase (docs/x402.md#payment-identifiers).
   */
  onPresenting?: (idempotencyKey: string) => void;
};

/** Between two presentations of a payment whose settlement is pending. */
const PENDING_RETRY_MS = 1_000;

export const PAYMENT_SIGNATURE_HEADER = "PAYMENT-SIGNATURE";
export const PAYMENT_REQUIRED_HEADER = "PAYMENT-REQUIRED";
export const PAYMENT_RESPONSE_HEADER = "PAYMENT-RESPONSE";
/** The key the gateway stored an authorization under (the caller's, or the one it derived). */
const IDEMPOTENCY_KEY_HEADER = "Idempotency-Key";

/** SHA-256 of a label and the key: the same key always gives the same nonce (Web Crypto). */
export { nonceForKey };

/** An authorization the policy holds: the action, `held`, with its rule and expiry. */
type HeldAnswer = { action_id: string; status: string; rule?: string | null; expires_at?: string | null };

export type X402Deps = { fetch: FetchLike; baseUrl: string; token: string };

export async function authorizeX402(
  deps: X402Deps,
  quote: PaymentRequired,
  params: AuthorizeX402Params = {},
): Promise<X402Authorization> {
  // A nonce without a key keeps the gateway's `x402:<nonce>` default; neither: the gateway derives both.
  const nonce =
    params.nonce ??
    (params.idempotencyKey === undefined ? undefined : await nonceForKey(params.idempotencyKey));
  const answer = await callJson(deps.fetch, deps.baseUrl, {
    method: "POST",
    path: "/agent/v1/x402/authorize",
    token: deps.token,
    body: {
      payment_required: quote,
      ...(nonce === undefined ? {} : { nonce }),
      ...(params.idempotencyKey === undefined ? {} : { idempotency_key: params.idempotencyKey }),
    },
    shape: X402_AUTHORIZATION,
  });
  const idempotencyKey =
    params.idempotencyKey ?? answer.headers.get(IDEMPOTENCY_KEY_HEADER) ?? `x402:${nonce ?? ""}`;
  if (!("payment_signature" in answer.body) || typeof answer.body.payment_signature !== "string") {
    // 202 with the action held (or approved, not yet signed): nothing to present yet. The same key
    // signs it once an operator has approved it (docs/agents.md#holds).
    const held = answer.body as HeldAnswer;
    const message = `the spending policy holds this payment for an operator's approval (${held.rule ?? "no rule named"}, until ${held.expires_at ?? "?"}): nothing was paid; once approved, repeat with the same idempotency key`;
    throw new PolicyHeld(message, {
      code: "held",
      status: answer.status,
      body: { ...held, code: "held", message, idempotency_key: idempotencyKey },
      idempotencyKey,
    });
  }
  return { ...(answer.body as Omit<X402Authorization, "idempotency_key">), idempotency_key: idempotencyKey };
}

/**
 * `fetch`, answering a 402 once: the quote is authorized through the gateway and the request is
 * repeated with PAYMENT-SIGNATURE. The request body must be re-sendable (a string or bytes). A
 * paid request answered with a redirect returns that answer (its PAYMENT-RESPONSE, its Location),
 * unfollowed, so the payment goes to no other URL. A
 * payment the spending policy holds throws PolicyHeld before anything is presented: nothing was
 * paid, and the same call with its `idempotencyKey` pays once an operator has approved it. A paid
 * request with no answer, or answered 502, 503 or 504, or 402 with a PAYMENT-RESPONSE saying its
 * settlement failed for a reason that does not say nothing moved (refusedBeforeSettling), throws
 * PaymentOutcomeUnknown: the same call with its `idempotencyKey` presents the same payment, never a
 * second one. A paid request answered 402 for the payment's own checks (or without a settlement)
 * throws PaymentRefused.
 */
export async function fetchWithPayment(
  deps: X402Deps,
  url: string | URL,
  init: RequestInit = {},
  options: FetchWithPaymentOptions = {},
): Promise<Response> {
  const first = await deps.fetch(url, init);
  if (first.status !== 402) return first;
  const quote = await readQuote(first);
  const authorization = await authorizeX402(
    deps,
    quote,
    options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey },
  );
  const idempotencyKey = authorization.idempotency_key;
  options.onPresenting?.(idempotencyKey);
  // Paid where it was quoted: the URL that answered the 402 after any redirect (a fetch that does
  // not say, `url` itself); asked again, the first URL would answer its redirect, not the resource.
  const quotedBy = first.url === "" ? url : first.url;
  const headers = new Headers(init.headers);
  headers.set(PAYMENT_SIGNATURE_HEADER, authorization.payment_signature);
  const present = async (): Promise<Response> => {
    try {
      // A redirect of the paid request is its answer, not followed: fetch would send the payment on
      // to wherever it points (another origin too) and drop the settlement the redirect names.
      return await deps.fetch(quotedBy, { ...init, headers, redirect: "manual" });
    } catch (cause) {
      throw new PaymentOutcomeUnknown(
        "the paid request got no answer; the payment may have settled: repeat with the same idempotency key",
        { code: "payment_outcome_unknown", cause, idempotencyKey },
      );
    }
  };
  // `settlement_pending` means "present the same payment again", never "pay again" (docs/x402.md):
  // the resource answers it as paid once its one settlement is mined.
  const deadline = Date.now() + (options.pendingWaitMs ?? 30_000);
  let paid = await present();
  let settlement = paymentSettlement(paid);
  while (paid.status === 402 && settlement?.errorReason === SETTLEMENT_PENDING && Date.now() < deadline) {
    await paid.body?.cancel();
    await new Promise((resolve) => setTimeout(resolve, PENDING_RETRY_MS));
    paid = await present();
    settlement = paymentSettlement(paid);
  }
  if (LOST_ANSWER_STATUSES.has(paid.status)) {
    // An intermediary's answer (a proxy or load balancer in front of the resource), not the
    // resource's: the payment was presented and may have settled behind it.
    const body = await paid.text().catch(() => "");
    throw new PaymentOutcomeUnknown(
      `the paid request was answered ${paid.status} by the way to the resource; the payment may have settled: repeat with the same idempotency key, which presents the same payment (never pay again)`,
      {
        code: "payment_outcome_unknown",
        status: paid.status,
        body: { answer: body.slice(0, 2_000) },
        idempotencyKey,
      },
    );
  }
  if (paid.status !== 402) {
    PAID_ANSWERS.set(paid, idempotencyKey);
    return paid;
  }
  const again = (await paid.json().catch(() => undefined)) as { error?: unknown } | undefined;
  const transaction = settlement?.transaction;
  if (settlement?.errorReason === SETTLEMENT_PENDING) {
    throw new PaymentOutcomeUnknown(
      `the payment's settlement ${transaction ?? ""} is still pending: repeat with the same idempotency key, which presents the same payment (never pay again)`,
      { code: SETTLEMENT_PENDING, status: 402, body: { settlement }, idempotencyKey },
    );
  }
  if (settlement !== undefined && !refusedBeforeSettling(settlement)) {
    // The resource tried to settle the payment and says it failed, for a reason that does not say
    // nothing moved (its way to its facilitator lost the answer, the facilitator asked for the same
    // payment again, a transaction failed that another relayer's may have beaten): the payment may
    // have settled, and the seller holds it. Presented again, it is answered by what it came to.
    const reason = typeof settlement.errorReason === "string" ? settlement.errorReason : "no reason given";
    // The seller's own words, when they add to the reason (ours says whether another relayer's
    // transaction paid the payee).
    const said =
      typeof settlement.errorMessage === "string" && settlement.errorMessage !== reason
        ? `: ${settlement.errorMessage.slice(0, 300)}`
        : "";
    throw new PaymentOutcomeUnknown(
      `the resource answered 402 saying its settlement of the payment failed (${reason.slice(0, 200)}${transaction ? `, transaction ${transaction}` : ""}${said}); the payment may have settled: repeat with the same idempotency key, which presents the same payment (never pay again)`,
      { code: "payment_outcome_unknown", status: 402, body: { settlement, quote: again }, idempotencyKey },
    );
  }
  // Paid and refused: say why, with the settlement the resource names (another presentation of
  // this authorization settled it already when it names a transaction and says the nonce is used).
  const alreadySettled =
    settlement?.errorReason === NONCE_ALREADY_USED && typeof transaction === "string" && transaction !== "";
  throw new PaymentRefused(
    alreadySettled
      ? `this payment was already presented; it settled in ${transaction}`
      : `the resource refused the payment${typeof again?.error === "string" ? `: ${again.error}` : ""}`,
    {
      code: alreadySettled ? "payment_already_settled" : "payment_not_accepted",
      status: 402,
      body: { settlement, quote: again, idempotency_key: idempotencyKey },
    },
  );
}

/**
 * The answers fetchWithPayment presented a payment for, with the key the payment is stored under: a
 * Response carries neither, and paidAnswerText needs both once the answer's body is lost.
 */
const PAID_ANSWERS = new WeakMap<object, string>();

/**
 * The body of an answer fetchWithPayment returned, as text. Its headers came before its body, so
 * when the body is cut off a paid answer still says what was paid: PaymentOutcomeUnknown
 * (`paid_answer_lost`) naming the settlement's transaction, with the key that presents the same
 * payment again, never a second one. An answer nothing was paid for is ServiceUnavailable
 * (`resource_answer_lost`): nothing was paid, the same call may run again.
 */
export async function paidAnswerText(response: Response): Promise<string> {
  try {
    return await response.text();
  } catch (cause) {
    const where = isTimeout(cause)
      ? `the resource's answer (${response.status}) did not come whole in time (${cause.message})`
      : `the resource's answer (${response.status}) was cut off after its headers${inParentheses(networkErrorCode(cause))}`;
    const idempotencyKey = PAID_ANSWERS.get(response);
    if (idempotencyKey === undefined) {
      throw new ServiceUnavailable(`${where}: nothing was paid; the same call may run again`, {
        code: "resource_answer_lost",
        status: response.status,
        cause,
      });
    }
    const settlement = paymentSettlement(response);
    const transaction = settlement?.success === true ? settlement.transaction : undefined;
    if (typeof transaction !== "string" || transaction === "") {
      throw new PaymentOutcomeUnknown(
        `${where}, and they name no settlement; the payment may have settled: repeat with the same idempotency key, which presents the same payment (never pay again)`,
        { code: "payment_outcome_unknown", status: response.status, cause, idempotencyKey },
      );
    }
    // What the payment bought is lost, not the payment: a second one would pay again for it.
    throw new PaymentOutcomeUnknown(
      `the payment settled in transaction ${transaction} on ${settlement?.network ?? "?"}, but ${where}: repeat with the same idempotency key, which presents the same payment, never a second one; a resource that answers a payment by its id (as the demo does) answers it again, one that does not answers that ${transaction} settled it, the receipt to show its seller`,
      {
        code: "paid_answer_lost",
        status: response.status,
        body: { settlement, transaction },
        cause,
        idempotencyKey,
      },
    );
  }
}

/**
 * A paid request answered 502, 503 or 504: a gateway's word that the resource's own answer did not
 * come back, so whether the payment settled is unknown.
 */
const LOST_ANSWER_STATUSES = new Set([502, 503, 504]);
/** x402's reason for a settlement broadcast without a receipt yet: present the same payment again. */
const SETTLEMENT_PENDING = "settlement_pending";
/** @x402/evm's reason for an authorization whose nonce another presentation used. */
const NONCE_ALREADY_USED = "invalid_exact_evm_nonce_already_used";

/**
 * A failed settlement whose reason says this presentation moved nothing: the payment's own checks
 * refused it (x402's `invalid_*` and `unsupported_*` reasons, no transaction named; a failed
 * transaction may have lost to another relayer's, which paid the seller), the nonce already used
 * (answered as such), the id bound to another request, or a broadcast the chain never mined.
 * Any other reason (the seller's facilitator unreachable or its answer lost, `service_unavailable`,
 * `chain_unavailable`, `unexpected_settle_error`, …) leaves the outcome unknown.
 */
function refusedBeforeSettling(settlement: PaymentSettlement): boolean {
  const reason = settlement.errorReason;
  if (typeof reason !== "string") return false;
  if (reason === NONCE_ALREADY_USED || FINAL_SETTLE_REASONS.has(reason)) return true;
  const named = typeof settlement.transaction === "string" && settlement.transaction !== "";
  return /^(invalid|unsupported)_/.test(reason) && !named && !reason.endsWith("_transaction_failed");
}

/** Reasons of a settlement that ended without moving money, nor ever will by that presentation. */
const FINAL_SETTLE_REASONS = new Set(["broadcast_refused", "payment_identifier_conflict"]);

/**
 * The quote of a 402: its body, or the PAYMENT-REQUIRED header, which carries the same JSON in
 * Base64. A 402 whose whole answer holds neither is the resource's own answer, and it answers every
 * request so: PaymentRefused (`quote_unreadable`), nothing paid, never an outage to retry. One whose
 * body was cut off on the way may hold a quote the next time: ServiceUnavailable.
 */
async function readQuote(response: Response): Promise<PaymentRequired> {
  let text: string | undefined;
  let lost: unknown;
  try {
    text = await response.text();
  } catch (cause) {
    lost = cause;
  }
  const body = text === undefined ? undefined : parseJson(text);
  const quote = isQuote(body) ? body : decodeHeaderJson(response.headers.get(PAYMENT_REQUIRED_HEADER));
  if (!isQuote(quote) && lost !== undefined) {
    throw new ServiceUnavailable(
      `the resource's 402 was cut off after its headers${inParentheses(networkErrorCode(lost))}: nothing was paid; the same call may run again`,
      { code: "resource_answer_lost", status: 402, cause: lost },
    );
  }
  if (!isQuote(quote)) {
    throw new PaymentRefused(
      "the resource answered 402 without a quote that can be read (neither its body nor its PAYMENT-REQUIRED header holds one with accepts): nothing was paid; asked again, it answers the same",
      { code: "quote_unreadable", status: 402 },
    );
  }
  return quote;
}

/** A quote as far as the client reads it: what it accepts, as objects (the gateway checks the rest). */
function isQuote(value: unknown): value is PaymentRequired {
  const accepts = (value as { accepts?: unknown } | null | undefined)?.accepts;
  return (
    Array.isArray(accepts) &&
    accepts.length > 0 &&
    accepts.every((entry) => typeof entry === "object" && entry !== null && !Array.isArray(entry))
  );
}

/** The resource's PAYMENT-RESPONSE (docs/x402.md): the settlement, decoded. */
export type PaymentSettlement = {
  success: boolean;
  transaction: string;
  network: string;
  payer?: string;
  errorReason?: string;
  [field: string]: unknown;
};

/** The settlement a paid answer names in PAYMENT-RESPONSE, or undefined when it names none. */
export function paymentSettlement(response: Response): PaymentSettlement | undefined {
  const settlement = decodeHeaderJson(response.headers.get(PAYMENT_RESPONSE_HEADER));
  return typeof settlement === "object" && settlement !== null
    ? (settlement as PaymentSettlement)
    : undefined;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function decodeHeaderJson(value: string | null): unknown {
  if (!value) return undefined;
  try {
    const bytes = Uint8Array.from(atob(value), (char) => char.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
}
