/**
 * sign_x402_authorization: the enclave builds the EIP-712 TransferWithAuthorization digest itself
 * (docs/x402.md) and signs only the configured amount and payTo, from the key the caller
 * names as `from` (key binding), within the maximum validity and outside the sealed margin, and
 * within the key's sealed count of authorizations for the UTC day. The count is on disk before the
 * signature leaves, as the transfer spend is (sign-transaction.ts): a crash can only over-count.
 * The precompile's (from, nonce) rule prevents double settlement.
 */
import type { Address } from "viem";
import { transferWithAuthorizationDigest } from "../../shared/eip712.ts";
import type { Hex } from "../../shared/hex.ts";
import { fromHex } from "../../shared/hex.ts";
import { err } from "../../shared/result.ts";
import { signDigest } from "../../shared/secp256k1.ts";
import { KEY_NOT_USABLE, succeed } from "../outcome.ts";
import { checkKeyBinding, checkX402, utcDay } from "../policy-checks.ts";
import type { OpHandler } from "./handler.ts";

export const signX402Authorization: OpHandler<"sign_x402_authorization"> = async (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (key?.namespace !== "agent-transfer") return KEY_NOT_USABLE;
  const binding = checkKeyBinding(key.address, params.from);
  if (binding) return err(binding);
  const valueUnits = BigInt(params.value_units);
  const validAfter = BigInt(params.valid_after);
  const validBefore = BigInt(params.valid_before);
  const now = ctx.now();
  const today = utcDay(now);
  const { x402Daily } = ctx.state.state;
  const signedToday = x402Daily.day === today ? (x402Daily.signed.get(key.keyRef) ?? 0) : 0;
  const refusal = checkX402(ctx.state.state.policy, {
    from: key.address,
    to: params.to,
    valueUnits,
    validAfter,
    validBefore,
    nowSeconds: BigInt(Math.floor(now.getTime() / 1000)),
    signedToday,
  });
  if (refusal) return err(refusal);
  // No await between the check above and this count: concurrent requests see each other.
  await ctx.state.commit((next) => {
    if (next.x402Daily.day !== today) next.x402Daily = { day: today, signed: new Map() };
    next.x402Daily.signed.set(key.keyRef, signedToday + 1);
  });
  const digest = transferWithAuthorizationDigest(
    {
      from: key.address,
      to: params.to as Address,
      value: valueUnits,
      validAfter,
      validBefore,
      nonce: params.nonce as Hex,
    },
    ctx.config.chain_id,
  );
  const { signature } = signDigest(fromHex(digest), key.privateKey);
  return succeed({
    signature,
    authorization: {
      from: key.address,
      to: params.to,
      value: params.value_units,
      valid_after: params.valid_after,
      valid_before: params.valid_before,
      nonce: params.nonce,
    },
  });
};
