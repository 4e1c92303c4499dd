/**
 * sign_x402_authorization: the enclave builds the EIP-712 TransferWithAuthorization digest itself
 * (SPEC "x402 objects") and signs only the configured amount and payTo within the maximum validity.
 * Nothing is persisted: the precompile's (from, nonce) rule prevents double settlement.
 */
import type { Address } from "viem";
import { transferWithAuthorizationDigest } from "../../shared/eip712.ts";
import type { Hex } from "../../shared/hex.ts";
import { fromHex } from "../../shared/hex.ts";
import { signDigest } from "../../shared/secp256k1.ts";
import { KEY_NOT_USABLE, succeed } from "../outcome.ts";
import { checkX402 } from "../policy-checks.ts";
import type { OpHandler } from "./handler.ts";

export const signX402Authorization: OpHandler<"sign_x402_authorization"> = (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (key?.namespace !== "agent-transfer") return KEY_NOT_USABLE;
  const valueUnits = BigInt(params.value_units);
  const validAfter = BigInt(params.valid_after);
  const validBefore = BigInt(params.valid_before);
  const refusal = checkX402(ctx.state.state.policy, {
    from: key.address,
    to: params.to,
    valueUnits,
    validAfter,
    validBefore,
    nowSeconds: BigInt(Math.floor(ctx.now().getTime() / 1000)),
  });
  if (refusal) return { ok: false, error: refusal };
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
