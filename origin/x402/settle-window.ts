/**
 * The one rule both sides of x402 apply to an authorization's end (docs/x402.md#what-a-settlement-must-pass):
 * the chain takes it only in a block before `validBefore`, and that block's time runs up to
 * `marginSeconds` past our clock. The facilitator refuses to settle one that ends sooner; the payer
 * side counts it as spent, so asking again for the same quote signs a new one instead of answering
 * one no facilitator will take.
 *
 * One with exactly the margin left by our read has it only in that second, and the enclave, which
 * signs by the same margin on its own clock, reads that clock after us, maybe in the next second,
 * where it refuses it (a settlement: unexpected_settle_error; an authorization:
 * x402_validity_too_long): so it is over here too, for what it is.
 */
export function endsTooSoonToSettle(validBefore: bigint, nowSeconds: bigint, marginSeconds: bigint): boolean {
  return validBefore <= nowSeconds + marginSeconds;
}
