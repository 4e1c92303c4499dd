/**
 * Verification of an x402 payment against this service's one requirement (issue 13 item 3): the
 * envelope's version and accepted requirement, the authorization's recipient, value and validity
 * window, the payer's signature (recovering `from`, low-S only), the operator pool barred as payer,
 * and then the facts: (from, nonce) unused on chain and unclaimed here, the balance sufficient.
 * Every failure is a reason (reasons.ts), checked in that order, cheapest first.
 */
import { secp256k1 } from "@noble/curves/secp256k1";
import { sql } from "drizzle-orm";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import { transferWithAuthorizationDigest } from "../../shared/eip712.ts";
import { fromHex, type Hex } from "../../shared/hex.ts";
import { addressOfPublicKey, recoverPublicKey } from "../../shared/secp256k1.ts";
import { type Db, queryRows } from "../db/client.ts";
import type { PayerFacts, PayerFactsReader } from "./payer-facts.ts";
import type { Authorization, PaymentEnvelope } from "./payment.ts";
import { X402_REASONS, type X402Reason } from "./reasons.ts";
import { type PaymentRequirements, X402_VERSION } from "./requirements.ts";

export type VerifyResult =
  | { ok: true; payer: string; authorization: Authorization }
  | { ok: false; reason: X402Reason; payer?: string };

export type VerifyDeps = {
  db: Db;
  /** The payment's facts on chain (payer-facts.ts). */
  payerFacts: PayerFactsReader;
  now: () => Date;
  operatorPool: string;
};

const HALF_ORDER = secp256k1.CURVE.n / 2n;

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

/** What the pure checks need to know: the time, and the operator pool barred as payer. */
export function checkContext(deps: Pick<VerifyDeps, "now" | "operatorPool">): {
  nowSeconds: bigint;
  operatorPool: string;
} {
  return { nowSeconds: BigInt(Math.floor(deps.now().getTime() / 1000)), operatorPool: deps.operatorPool };
}

/** The checks that need neither the database nor the chain. */
export function checkPayment(
  envelope: PaymentEnvelope,
  ours: PaymentRequirements,
  context: { nowSeconds: bigint; operatorPool: string },
): VerifyResult {
  const { authorization } = envelope;
  const payer = authorization.from;
  const fail = (reason: X402Reason): VerifyResult => ({ ok: false, reason, payer });
  if (envelope.x402Version !== X402_VERSION) return fail(X402_REASONS.invalidX402Version);
  const requirement = compareRequirements(envelope.accepted, ours);
  if (requirement) return fail(requirement);
  if (authorization.to !== ours.payTo.toLowerCase()) return fail(X402_REASONS.recipientMismatch);
  if (authorization.value !== BigInt(ours.amount)) return fail(X402_REASONS.valueMismatch);
  if (authorization.validBefore <= context.nowSeconds) return fail(X402_REASONS.validBefore);
  if (authorization.validAfter > context.nowSeconds) return fail(X402_REASONS.validAfter);
  // SPEC "x402 objects": validBefore no later than maxTimeoutSeconds after now.
  if (authorization.validBefore > context.nowSeconds + BigInt(ours.maxTimeoutSeconds)) {
    return fail(X402_REASONS.validityTooLong);
  }
  const signature = fromHex(envelope.signature);
  const s = BigInt(`0x${Buffer.from(signature.subarray(32, 64)).toString("hex")}`);
  // EIP-2: a high-S twin of a valid signature is refused, so one authorization has one encoding.
  if (s > HALF_ORDER) return fail(X402_REASONS.signatureHighS);
  const digest = transferWithAuthorizationDigest(authorization);
  const publicKey = recoverPublicKey(fromHex(digest), envelope.signature);
  if (!publicKey || addressOfPublicKey(publicKey).toLowerCase() !== payer)
    return fail(X402_REASONS.signature);
  if (payer === context.operatorPool) return fail(X402_REASONS.payerNotAllowed);
  return { ok: true, payer, authorization };
}

/**
 * All checks, for the facilitator's /verify: the pure ones, then (from, nonce) unclaimed in our
 * database, then one JSON-RPC batch for the authorization's state on chain and the payer's
 * balance. Settling does the pure checks and leaves the rest to the settle batch (settle.ts),
 * which claims the payment and reads the same facts at once.
 */
export async function verifyPayment(
  deps: VerifyDeps,
  envelope: PaymentEnvelope,
  ours: PaymentRequirements,
): Promise<VerifyResult> {
  const checked = checkPayment(envelope, ours, checkContext(deps));
  if (!checked.ok) return checked;
  const { payer, authorization } = checked;
  const fail = (reason: X402Reason): VerifyResult => ({ ok: false, reason, payer });
  const [claimed] = await queryRows<{ id: string }>(
    deps.db,
    sql`select id from x402_settlements where payer = ${payer} and nonce = ${authorization.nonce}`,
  );
  if (claimed) return fail(X402_REASONS.nonceUsed);
  const refusal = factsRefusal(await deps.payerFacts(payer as Hex, authorization.nonce), authorization);
  return refusal ? fail(refusal) : checked;
}

/** What the chain's facts of a payment refuse it for: null when they allow it. */
export function factsRefusal(facts: PayerFacts | undefined, authorization: Authorization): X402Reason | null {
  if (!facts) return X402_REASONS.unexpectedVerifyError;
  if (facts.nonceUsed) return X402_REASONS.nonceUsed;
  if (facts.balanceWei < authorization.value * WEI_PER_UNIT) return X402_REASONS.insufficientBalance;
  return null;
}
