/**
 * Every reason the x402 surfaces give, in one file (wire strings live in one constants file that
 * tests import, so a test and the code cannot drift apart). Where the official `@x402/*` packages
 * name a reason, that name is used (`@x402/evm` exact scheme's `Err*` constants; `@x402/core`'s
 * `settlement_pending`); otherwise the x402 v2 specification's standard codes (§9); otherwise our
 * own, in the packages' pattern.
 */
export const X402_REASONS = {
  // x402 v2 spec §9 (a payment without resource.url or accepted:
  // docs/x402.md#the-demo-and-the-facilitator).
  invalidPayload: "invalid_payload",
  invalidX402Version: "invalid_x402_version",
  invalidPaymentRequirements: "invalid_payment_requirements",
  unexpectedVerifyError: "unexpected_verify_error",
  unexpectedSettleError: "unexpected_settle_error",
  // Ours: the header is not Base64, or its Base64 is not a JSON object.
  invalidPayloadBase64: "invalid_payload_base64",
  invalidPayloadJson: "invalid_payload_json",
  // @x402/evm (exact scheme, EIP-3009).
  unsupportedPayloadType: "unsupported_payload_type",
  scheme: "invalid_exact_evm_scheme",
  networkMismatch: "invalid_exact_evm_network_mismatch",
  recipientMismatch: "invalid_exact_evm_recipient_mismatch",
  valueMismatch: "invalid_exact_evm_payload_authorization_value_mismatch",
  validBefore: "invalid_exact_evm_payload_authorization_valid_before",
  validAfter: "invalid_exact_evm_payload_authorization_valid_after",
  signature: "invalid_exact_evm_signature",
  signatureUnparsable: "invalid_exact_evm_failed_to_parse_signature",
  nonceUsed: "invalid_exact_evm_nonce_already_used",
  insufficientBalance: "invalid_exact_evm_insufficient_balance",
  transactionFailed: "invalid_exact_evm_transaction_failed",
  // Ours, in @x402/evm's pattern: defects its exact scheme does not check.
  assetMismatch: "invalid_exact_evm_asset_mismatch",
  validityTooLong: "invalid_exact_evm_payload_authorization_validity_too_long",
  signatureHighS: "invalid_exact_evm_signature_high_s",
  payerNotAllowed: "invalid_exact_evm_payer_not_allowed",
  // Ours, in @x402/evm's pattern: the payer, or the client's address, has had as many settlements
  // revert in the window as it may (payee/revert-guard.ts); refused for a while (HTTP 429, Retry-After).
  tooManyReverts: "invalid_exact_evm_too_many_reverts",
  // Ours: a window of the client's (its address's refused requests, its payer's payments, its
  // address's payments) is full (payee/client-limit.ts; HTTP 429, Retry-After).
  rateLimited: "rate_limited",
  // @x402/core: a broadcast settlement without a receipt yet: retry the same payment
  // (docs/x402.md#after-settlement_pending-retry-the-same-payment).
  settlementPending: "settlement_pending",
  // Ours, as money's actions word it: the settlement was never mined (another transaction took the
  // settler's nonce), nothing moved; the authorization was not used.
  broadcastRefused: "broadcast_refused",
  // Ours, as the gateway's error table names it: the chain did not answer, so nothing was checked
  // against it or signed; the same payment may be presented again (HTTP 503).
  chainUnavailable: "chain_unavailable",
  // Ours, as the gateway's error table names it: the database did not answer, so the payment was
  // not judged; the same payment may be presented again, and settles once (HTTP 503, Retry-After).
  serviceUnavailable: "service_unavailable",
  // Ours: a payment's `payment-identifier` id breaks the extension's rules (16 to 128 letters, digits,
  // `-`, `_`), or the id is already bound to another request of its payer (HTTP 409)
  // (docs/x402.md#payment-identifiers).
  invalidPaymentIdentifier: "invalid_payment_identifier",
  paymentIdentifierConflict: "payment_identifier_conflict",
} as const;

export type X402Reason = (typeof X402_REASONS)[keyof typeof X402_REASONS];
