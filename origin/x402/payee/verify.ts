/**
 * Verification of an x402 payment against this service's one requirement: the
 * envelope's version and accepted requirement, the authorization's recipient, value and validity
 * window (with AGENT_X402_VALIDITY_MARGIN_SECONDS at both ends), the payer's signature
 * (recovering `from`, low-S only), the operator pool barred as payer, and then the facts: (from,
 * nonce) unused on chain and unclaimed here, the balance enough for this payment and every other
 * one of the payer's that is claimed or signed but not yet mined (reservations.ts). Every failure
 * is a reason (x402/reasons.ts), checked in that order, cheapest first.
 */
import { secp256k1 } from "@noble/curves/secp256k1";
import { WEI_PER_UNIT } from "../../../shared/constants.ts";
import { fromHex, type Hex } from "../../../shared/hex.ts";
import { err, ok, type Result } from "../../../shared/result.ts";
import type { Db } from "../../db/client.ts";
import { X402_REASONS, type X402Reason } from "../reasons.ts";
import { endsTooSoonToSettle } from "../settle-window.ts";
import { createSignerMemo, REMEMBERED_SIGNERS } from "./authorization-signer.ts";
import type { PayerFacts, PayerFactsReader } from "./payer-facts.ts";
import type { Authorization, PaymentEnvelope, PaymentRefusal } from "./payment.ts";
import { type PaymentRequirements, X402_VERSION } from "./requirements.ts";
import { verifyReservation } from "./reservations.ts";

export type VerifyResult = Result<{ payer: string; authorization: Authorization }, PaymentRefusal>;

export type VerifyDeps = {
  db: Db;
  /** The payment's facts on chain (payer-facts.ts). */
  payerFacts: PayerFactsReader;
  now: () => Date;
  operatorPool: string;
  /** AGENT_X402_VALIDITY_MARGIN_SECONDS: the window must hold this long on both sides of now. */
  validityMarginSeconds: number;
  /**
   * AGENT_X402_MAX_TIMEOUT_SECONDS, the enclave's sealed bound (x402/setup.ts checks they are
   * equal): it signs no settlement whose validBefore is further from its now than this.
   */
  maxValiditySeconds: number;
};

/**
 * What the pure checks need to know: the time, the margin, the longest validity the enclave
 * settles, and the operator pool barred as payer.
 */
export type CheckContext = {
  nowSeconds: bigint;
  marginSeconds: bigint;
  maxValiditySeconds: bigint;
  operatorPool: string;
};

const HALF_ORDER = secp256k1.CURVE.n / 2n;

const signers = createSignerMemo(REMEMBERED_SIGNERS);

/**
 * Checks a requirement (the envelope's `accepted`, or a facilitator request's
 * paymentRequirements) against ours, field by field, so each difference has its own reason.
 */
export function compareRequirements(
  given: Record<string, unknown>,
  ours: PaymentRequirements,
): X402Reason | null {
  if (given.scheme !== ours.scheme) return X402_REASONS.scheme;
  if (given.network !== ours.network) return X402_REASONS.networkMismatch;
  if (typeof given.asset !== "string" || given.asset.toLowerCase() !== ours.asset)
    return X402_REASONS.assetMismatch;
  if (typeof given.payTo !== "string" || given.payTo.toLowerCase() !== ours.payTo.toLowerCase()) {
    return X402_REASONS.recipientMismatch;
  }
  if (given.amount !== ours.amount) return X402_REASONS.valueMismatch;
  if (given.maxTimeoutSeconds !== ours.maxTimeoutSeconds) return X402_REASONS.invalidPaymentRequirements;
  return null;
}

export function checkContext(
  deps: Pick<VerifyDeps, "now" | "operatorPool" | "validityMarginSeconds" | "maxValiditySeconds">,
): CheckContext {
  return {
    nowSeconds: unixSeconds(deps.now()),
    marginSeconds: BigInt(deps.validityMarginSeconds),
    maxValiditySeconds: BigInt(deps.maxValiditySeconds),
    operatorPool: deps.operatorPool,
  };
}

export function unixSeconds(at: Date): bigint {
  return BigInt(Math.floor(at.getTime() / 1000));
}

/**
 * Whether the chain will still take the authorization when the settlement is mined. The
 * precompile takes it in a block whose time t has validAfter < t < validBefore (EIP-3009;
 * devnet/chain/precompile/native-transfer-auth.ts), and that time is the block's, not our clock's, a
 * moment after we sign: so the window must hold `marginSeconds` before and after our now. An
 * authorization valid from this very second (validAfter = now) reverts in a block of this second.
 */
export function windowRefusal(
  authorization: Pick<Authorization, "validAfter" | "validBefore">,
  nowSeconds: bigint,
  marginSeconds: bigint,
): X402Reason | null {
  if (endsTooSoonToSettle(authorization.validBefore, nowSeconds, marginSeconds))
    return X402_REASONS.validBefore;
  if (authorization.validAfter > nowSeconds - marginSeconds) return X402_REASONS.validAfter;
  return null;
}

/**
 * How far ahead of ours a payer's clock may be: the official client sets validBefore to its own
 * now plus maxTimeoutSeconds, so a host a few seconds fast would otherwise be refused every payment.
 */
export const PAYER_CLOCK_AHEAD_SECONDS = 30n;

/** The checks that need neither the database nor the chain. */
export function checkPayment(
  envelope: PaymentEnvelope,
  ours: PaymentRequirements,
  context: CheckContext,
): VerifyResult {
  const { authorization } = envelope;
  const payer = authorization.from;
  const fail = (reason: X402Reason): VerifyResult => err({ code: reason, payer });
  if (envelope.x402Version !== X402_VERSION) return fail(X402_REASONS.invalidX402Version);
  const requirement = compareRequirements(envelope.accepted, ours);
  if (requirement) return fail(requirement);
  if (authorization.to !== ours.payTo.toLowerCase()) return fail(X402_REASONS.recipientMismatch);
  if (authorization.value !== BigInt(ours.amount)) return fail(X402_REASONS.valueMismatch);
  const window = windowRefusal(authorization, context.nowSeconds, context.marginSeconds);
  if (window) return fail(window);
  // validBefore no later than maxTimeoutSeconds after now, by a payer's clock up to
  // PAYER_CLOCK_AHEAD_SECONDS ahead of ours, and never later than the enclave's sealed bound after
  // now: it would refuse to sign the settlement, after verify had called the payment valid
  // (docs/x402.md#what-a-settlement-must-pass).
  const allowed = BigInt(ours.maxTimeoutSeconds) + PAYER_CLOCK_AHEAD_SECONDS;
  const longest = allowed < context.maxValiditySeconds ? allowed : context.maxValiditySeconds;
  if (authorization.validBefore > context.nowSeconds + longest) {
    return fail(X402_REASONS.validityTooLong);
  }
  const signature = fromHex(envelope.signature);
  const s = BigInt(`0x${Buffer.from(signature.subarray(32, 64)).toString("hex")}`);
  // EIP-2: a high-S twin of a valid signature is refused, so one authorization has one encoding.
  if (s > HALF_ORDER) return fail(X402_REASONS.signatureHighS);
  if (signers.signerOf(authorization, envelope.signature) !== payer) return fail(X402_REASONS.signature);
  if (payer === context.operatorPool) return fail(X402_REASONS.payerNotAllowed);
  return ok({ payer, authorization });
}

/**
 * For a payment checkPayment refused as past its window (validBefore): the same checks as of the
 * last second it was in that window. Passed, it is a payment its `from` signed for our terms,
 * which a settlement of ours may have settled: a presentation of it is then answered from that
 * settlement, never told that it expired (docs/x402.md#after-settlement_pending-retry-the-same-payment).
 */
export function checkClosedPayment(
  envelope: PaymentEnvelope,
  ours: PaymentRequirements,
  context: CheckContext,
): VerifyResult {
  const lastSecond = envelope.authorization.validBefore - context.marginSeconds - 1n;
  return checkPayment(envelope, ours, { ...context, nowSeconds: lastSecond });
}

/**
 * All checks, for the facilitator's /verify: the pure ones, then (from, nonce) unclaimed in our
 * database and what the payer's other settlements hold in reserve, then one JSON-RPC batch for the
 * authorization's state on chain and the payer's balance. Settling does the pure checks and leaves
 * the rest to the settle batch (settle.ts), which claims the payment and reads the same facts at
 * once. Verify holds no lock: its answer says what a settle now would find, not what it will.
 */
export async function verifyPayment(
  deps: VerifyDeps,
  envelope: PaymentEnvelope,
  ours: PaymentRequirements,
): Promise<VerifyResult> {
  const checked = checkPayment(envelope, ours, checkContext(deps));
  return checked.ok ? verifyFacts(deps, checked.value) : checked;
}

/**
 * The checks of /verify that read the database and the chain, for a payment the pure checks
 * passed (checkPayment): the route counts it against its payer's window in between.
 */
export async function verifyFacts(
  deps: VerifyDeps,
  checked: { payer: string; authorization: Authorization },
): Promise<VerifyResult> {
  const { payer, authorization } = checked;
  const fail = (reason: X402Reason): VerifyResult => err({ code: reason, payer });
  const [reservation, facts] = await Promise.all([
    verifyReservation(deps.db, {
      payer,
      nonce: authorization.nonce,
      openAfterSeconds: checkContext(deps).nowSeconds - BigInt(deps.validityMarginSeconds),
    }),
    deps.payerFacts(payer as Hex, authorization.nonce),
  ]);
  if (reservation.claimed) return fail(X402_REASONS.nonceUsed);
  const refusal = factsRefusal(facts, authorization, reservation.reservedUnits * WEI_PER_UNIT);
  return refusal ? fail(refusal) : ok(checked);
}

/**
 * What the chain's facts of a payment refuse it for: null when they allow it. `reservedWei` is
 * what the payer's other settlements not yet in that balance will take first (reservations.ts).
 */
export function factsRefusal(
  facts: PayerFacts | undefined,
  authorization: Authorization,
  reservedWei = 0n,
): X402Reason | null {
  // The chain did not answer (or answered no quantity): a fact of the service, not of the payment.
  if (!facts) return X402_REASONS.chainUnavailable;
  if (facts.nonceUsed) return X402_REASONS.nonceUsed;
  if (facts.balanceWei < authorization.value * WEI_PER_UNIT + reservedWei)
    return X402_REASONS.insufficientBalance;
  return null;
}
