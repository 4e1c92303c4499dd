/**
 * sign_settlement (DESIGN §5): the settler key signs only a call of the NativeTransferAuth
 * precompile's transferWithAuthorization with value 0, whose calldata the enclave encodes itself
 * from the authorization fields and the payer's signature. The payer's signature is what moves the
 * money; the settler key pays gas, within the sealed fee ceiling, and can do nothing else. The
 * authorization must be one the sealed x402 terms allow (amount, payTo, never from the operator
 * pool), so the settler never spends gas on a payment the service does not accept.
 */
import type { Address } from "viem";
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import { maxFeeWei } from "../../shared/fees.ts";
import type { Hex } from "../../shared/hex.ts";
import { settlementCalldata } from "../../shared/native-transfer-auth.ts";
import { KEY_NOT_USABLE, refuse, succeed } from "../outcome.ts";
import { MAX_GAS_LIMIT } from "../policy-checks.ts";
import { prepareTransfer, signPrepared } from "../transaction.ts";
import type { OpHandler } from "./handler.ts";

/** Intrinsic gas plus calldata: below it no node would accept the call. */
const MIN_GAS_LIMIT = 21_000n;

export const signSettlement: OpHandler<"sign_settlement"> = (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (key?.namespace !== "settler" || key.keyRef !== ctx.state.state.settlerKeyRef) return KEY_NOT_USABLE;
  const { policy } = ctx.state.state;
  if (!policy || policy.x402AmountUnits === null || policy.x402PayTo === null) {
    return refuse("not_configured", "x402 policy is not configured");
  }
  const { authorization } = params;
  if (params.chain_id !== ctx.config.chain_id) return refuse("cap_exceeded", "chain id not allowed");
  if (authorization.from.toLowerCase() === policy.operatorPool)
    return refuse("cap_exceeded", "payer not allowed");
  if (authorization.to.toLowerCase() !== policy.x402PayTo)
    return refuse("cap_exceeded", "payTo differs from policy");
  if (BigInt(authorization.value) !== policy.x402AmountUnits) {
    return refuse("cap_exceeded", "amount differs from policy");
  }
  const gasLimit = BigInt(params.gas_limit);
  if (gasLimit < MIN_GAS_LIMIT) return refuse("malformed", "gas limit below 21000");
  if (gasLimit > MAX_GAS_LIMIT) return refuse("cap_exceeded", "gas limit above the enclave bound");
  if (maxFeeWei({ gasLimit, maxFeePerGas: BigInt(params.max_fee_per_gas) }) > policy.feeCeilingWei) {
    return refuse("cap_exceeded", "fee above the policy ceiling");
  }
  if (BigInt(params.nonce) > BigInt(Number.MAX_SAFE_INTEGER))
    return refuse("malformed", "nonce out of range");
  const prepared = prepareTransfer({
    chainId: ctx.config.chain_id,
    nonce: Number(params.nonce),
    to: NATIVE_TRANSFER_AUTH_ADDRESS,
    valueWei: 0n,
    maxFeePerGas: BigInt(params.max_fee_per_gas),
    maxPriorityFeePerGas: BigInt(params.max_priority_fee_per_gas),
    gasLimit,
    data: settlementCalldata(
      {
        from: authorization.from as Address,
        to: authorization.to as Address,
        value: BigInt(authorization.value),
        validAfter: BigInt(authorization.valid_after),
        validBefore: BigInt(authorization.valid_before),
        nonce: authorization.nonce as Hex,
      },
      params.signature as Hex,
    ),
  });
  if (!prepared) return refuse("malformed", "transaction fields out of range");
  const tx = signPrepared(key.privateKey, prepared);
  return succeed({ raw_transaction: tx.rawTransaction, tx_hash: tx.txHash });
};
