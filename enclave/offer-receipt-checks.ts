/**
 * What the payee key may sign (docs/security.md#offers-and-receipts), as pure checks: an offer
 * only over the node's sealed x402 terms, a receipt only for a settlement the settler key signed
 * in this enclave, paying the payee key, by the payer it names. One detail each, `offer_terms` and
 * `receipt_settlement`, with code cap_exceeded as the other sealed bounds use.
 */
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";
import type { EnclaveFailure } from "../shared/enclave-protocol.ts";
import type { Policy } from "./policy.ts";
import type { RecordedSettlement } from "./recent-settlements.ts";

export type OfferTerms = {
  scheme: string;
  network: string;
  asset: string;
  payTo: string;
  amount: string;
  validForSeconds: number;
};

/** The network string of the sealed chain, as x402 names it. */
export function sealedNetwork(chainId: number): string {
  return `eip155:${chainId}`;
}

/** Null when `terms` are the sealed x402 terms of `policy`, offered by the payee at `payeeAddress`. */
export function checkOfferTerms(
  policy: Policy | null,
  chainId: number,
  payeeAddress: string,
  terms: OfferTerms,
): EnclaveFailure | null {
  if (!policy || policy.x402AmountUnits === null || policy.x402PayTo === null) {
    return { code: "not_configured", reason: "no x402 terms are sealed" };
  }
  const payTo = terms.payTo.toLowerCase();
  const same =
    terms.scheme === "exact" &&
    terms.network === sealedNetwork(chainId) &&
    terms.asset.toLowerCase() === NATIVE_TRANSFER_AUTH_ADDRESS.toLowerCase() &&
    terms.amount === policy.x402AmountUnits.toString() &&
    payTo === policy.x402PayTo &&
    payTo === payeeAddress.toLowerCase() &&
    terms.validForSeconds <= policy.x402MaxTimeoutSeconds;
  return same ? null : refused("offer terms are not the sealed x402 terms", "offer_terms");
}

export type ReceiptClaim = {
  network: string;
  payer: string;
  /** The settlement the settler key signed under the named transaction hash, if it did. */
  settlement: RecordedSettlement | undefined;
};

/** Null when the claim names a settlement signed here, to the payee, by its payer, on the sealed chain. */
export function checkReceiptClaim(
  chainId: number,
  payeeAddress: string,
  claim: ReceiptClaim,
): EnclaveFailure | null {
  const { settlement } = claim;
  const known =
    settlement !== undefined &&
    claim.network === sealedNetwork(chainId) &&
    settlement.payee === payeeAddress.toLowerCase() &&
    settlement.payer === claim.payer.toLowerCase();
  return known
    ? null
    : refused("no settlement of this payer to the payee was signed here", "receipt_settlement");
}

function refused(reason: string, detail: "offer_terms" | "receipt_settlement"): EnclaveFailure {
  return { code: "cap_exceeded", reason, detail };
}
