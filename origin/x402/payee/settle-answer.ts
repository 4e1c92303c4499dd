/** What a settle answers: x402's own shape, and what this presentation came to. */
import { CAIP2_NETWORK } from "../../../shared/constants.ts";
import type { X402Reason } from "../reasons.ts";

/** x402's settle answer (`@x402/core` SettleResponse), as PAYMENT-RESPONSE and /settle carry it. */
export type SettleResponse = {
  success: boolean;
  errorReason?: X402Reason;
  payer: string;
  transaction: string;
  network: string;
};

export type SettleOutcome =
  /**
   * The payment is settled (receipt status 0x1): by this presentation, or by an earlier one of the
   * same payload while the authorization is still valid (a client retrying after
   * `settlement_pending`, docs/x402.md#after-settlement_pending-retry-the-same-payment).
   */
  | { kind: "settled"; response: SettleResponse }
  /** An earlier presentation holds the payment; `response` names its transaction. */
  | { kind: "duplicate"; response: SettleResponse }
  /** The chain's facts or the validity window refuse the payment: nothing was signed. */
  | { kind: "invalid"; response: SettleResponse }
  /** Not settled (yet): pending, reverted, refused or not attempted. */
  | { kind: "failed"; response: SettleResponse };

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
