/** What a settle answers: x402's own shape, and what this presentation came to. */
import { CAIP2_NETWORK } from "../../../shared/constants.ts";
import { X402_REASONS, type X402Reason } from "../reasons.ts";

/** x402's settle answer (`@x402/core` SettleResponse), as PAYMENT-RESPONSE and /settle carry it. */
export type SettleResponse = {
  success: boolean;
  errorReason?: X402Reason;
  payer: string;
  transaction: string;
  network: string;
  /** A sentence for people; on `settlement_pending`, where its status is told. */
  errorMessage?: string;
  /** On `settlement_pending`: `statusUrl`, the settlement's status route. */
  extra?: { statusUrl: string };
};

export type SettleOutcome =
  /**
   * The payment is settled (receipt status 0x1): by this presentation, or by an earlier one of the
   * same payload that answered `settlement_pending`, whose one retry this is
   * (docs/x402.md#after-settlement_pending-retry-the-same-payment), or the same request by its
   * payment id.
   */
  | { kind: "settled"; response: SettleResponse }
  /** An earlier presentation holds the payment; `response` names its transaction. */
  | { kind: "duplicate"; response: SettleResponse }
  /** The chain's facts or the validity window refuse the payment: nothing was signed. */
  | { kind: "invalid"; response: SettleResponse }
  /**
   * Not settled (yet): pending, reverted, refused or not attempted. `stillInFlight`, on this
   * presentation's own settlement broadcast and not mined yet (`settlement_pending`): whether it
   * reverted, once the chain has decided (revert-guard.ts keeps its slot until then).
   */
  | { kind: "failed"; response: SettleResponse; stillInFlight?: Promise<SettlementEnd> };

/** What a settlement in flight came to, as far as the revert guard counts it. */
export type SettlementEnd = "reverted" | "not_reverted";

/** The settle answer of `payer`'s payment: settled in `transaction`, or not, for `reason`. */
export function respond(payer: string, transaction: string, reason?: X402Reason): SettleResponse {
  return {
    success: reason === undefined,
    ...(reason ? { errorReason: reason } : {}),
    payer,
    transaction,
    network: CAIP2_NETWORK,
  };
}

/**
 * The HTTP status of `/settle`'s answer (docs/x402.md#the-demo-and-the-facilitator): 200 only when it
 * paid, so no client reads a failure as a settlement; a payment that cannot or did not settle 400;
 * the chain or the signer out of reach 503 (nothing was signed); broadcast with no receipt yet 504.
 * Windows and size limits answer their own 429 and 413 before this.
 */
export function settleStatus(response: SettleResponse): 200 | 400 | 503 | 504 {
  if (response.success) return 200;
  switch (response.errorReason) {
    case X402_REASONS.settlementPending:
      return 504;
    case X402_REASONS.chainUnavailable:
    case X402_REASONS.serviceUnavailable:
    case X402_REASONS.unexpectedSettleError:
      return 503;
    default:
      return 400;
  }
}

/** The path below {base} of a payment's settlement status (settlement-status.ts). */
export function settlementStatusPath(payer: string, nonce: string): string {
  return `/x402/facilitator/settlements/${payer.toLowerCase()}/${nonce.toLowerCase()}`;
}

/**
 * A `settlement_pending` answer with the way to its outcome: the status route of the payment
 * (settlement-status.ts), in `extra.statusUrl` and in `errorMessage` (which the official resource
 * server passes on when the settle answer is not 200); any other answer as it is.
 */
export function withStatusPointer(response: SettleResponse, statusUrl: string): SettleResponse {
  if (response.errorReason !== X402_REASONS.settlementPending) return response;
  const named = response.transaction ? `transaction ${response.transaction} is` : "the settlement is";
  return {
    ...response,
    errorMessage: `${named} not mined yet: present the same payment again, or read ${statusUrl}`,
    extra: { statusUrl },
  };
}
