/**
 * The payer's signature of an x402 authorization, as sign_settlement checks it before the settler
 * pays gas for it: a 65-byte r ‖ s ‖ v with v 27 or 28 (or its parity, 0 or 1, as some
 * wallets write it; the verifier accepts both and the calldata carries 27 or 28) and a low S (EIP-2), which
 * recovers, over the EIP-712 TransferWithAuthorization digest on the sealed chain, to `from`.
 * Anything else is a named refusal, never an exception.
 */
import type { TransferWithAuthorizationMessage } from "../shared/eip712.ts";
import { transferWithAuthorizationDigest } from "../shared/eip712.ts";
import type { EnclaveFailure } from "../shared/enclave-protocol.ts";
import { fromHex, type Hex } from "../shared/hex.ts";
import { addressOfPublicKey, hasLowS, recoverPublicKey } from "../shared/secp256k1.ts";

const refused = (code: "malformed" | "cap_exceeded", reason: string): EnclaveFailure => ({
  code,
  reason,
  detail: "settlement_signature",
});

/** Null when `signature` is `message.from`'s signature of `message` on `chainId`, else the refusal. */
export function checkAuthorizationSignature(
  message: TransferWithAuthorizationMessage,
  signature: Hex,
  chainId: number,
): EnclaveFailure | null {
  const bytes = fromHex(signature);
  if (bytes.length !== 65) return refused("malformed", "authorization signature is not 65 bytes");
  const v = bytes[64];
  if (v !== 27 && v !== 28 && v !== 0 && v !== 1) {
    return refused("malformed", "authorization signature v is not 27 or 28 (or 0 or 1)");
  }
  if (!hasLowS(bytes)) return refused("malformed", "authorization signature has a high S (EIP-2)");
  const digest = fromHex(transferWithAuthorizationDigest(message, chainId));
  const publicKey = recoverPublicKey(digest, signature);
  if (!publicKey) return refused("cap_exceeded", "authorization signature does not recover");
  if (addressOfPublicKey(publicKey).toLowerCase() !== message.from.toLowerCase()) {
    return refused("cap_exceeded", "authorization is not signed by from");
  }
  return null;
}
