/**
 * One logical x402 payment of an agent's, one key (docs/x402.md#payment-identifiers): the
 * idempotency key of its authorization gives the authorization's nonce and the payment id its
 * envelope carries, so a retry under the same key presents the same authorization and the same id,
 * never a second payment. Web Crypto only: the client, the CLI and the origin share it.
 */

const NONCE_LABEL = "agent-wallet-client/x402-nonce/v1\u0000";
const PAYMENT_ID_LABEL = "agent-wallet/x402-payment-id/v1\u0000";

/** 16 to 128 letters, digits, `-` and `_`: what the x402 `payment-identifier` extension accepts. */
export const X402_PAYMENT_ID_PATTERN = /^[A-Za-z0-9_-]{16,128}$/;

/** SHA-256 of a label and the key: the same key always gives the same nonce. */
export async function nonceForKey(idempotencyKey: string): Promise<`0x${string}`> {
  return `0x${await sha256Hex(NONCE_LABEL + idempotencyKey)}`;
}

/**
 * The payment id of the key: the key itself when it is a valid id (a key the gateway derived, or
 * one the agent chose in that form), otherwise a hash of it.
 */
export async function paymentIdForKey(idempotencyKey: string): Promise<string> {
  return X402_PAYMENT_ID_PATTERN.test(idempotencyKey)
    ? idempotencyKey
    : `x402-${await sha256Hex(PAYMENT_ID_LABEL + idempotencyKey)}`;
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}
