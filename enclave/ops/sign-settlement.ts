/**
 * sign_settlement: the settler key signs only a call of the NativeTransferAuth
 * precompile's transferWithAuthorization with value 0, whose calldata the enclave encodes itself
 * from the authorization fields and the payer's signature. The payer's signature is what moves the
 * money; the settler key pays gas, within the sealed fee ceiling, and can do nothing else. The
 * authorization must be one the sealed x402 terms allow (amount, payTo, never from the operator
 * pool), valid at the enclave's own clock with the sealed margin and no longer than the sealed
 * maximum, and signed by its `from`: the settler never spends gas on a payment the service does
 * not accept, or one the precompile would refuse. Its maximum fee counts against the settler's
 * sealed fee budget of the UTC day, and its nonce is recorded (so a filler can later take that
 * nonce, once), both on disk before the signature leaves, as sign_transfer's spend is.
 */
import type { Address } from "viem";
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import { costUnits, maxFeeWei } from "../../shared/fees.ts";
import type { Hex } from "../../shared/hex.ts";
import { settlementCalldata } from "../../shared/native-transfer-auth.ts";
import { err } from "../../shared/result.ts";
import { checkAuthorizationSignature } from "../authorization-signature.ts";
import { countSpend, spentToday } from "../daily-spend.ts";
import { recordSignedNonce } from "../nonce-record.ts";
import { KEY_NOT_USABLE, refuse, succeed } from "../outcome.ts";
import { checkSettlement, checkSettlerFeeBudget, MAX_GAS_LIMIT, utcDay } from "../policy-checks.ts";
import { prepareTransfer, signPrepared } from "../transaction.ts";
import type { OpHandler } from "./handler.ts";

/** Intrinsic gas plus calldata: below it no node would accept the call. */
const MIN_GAS_LIMIT = 21_000n;

export const signSettlement: OpHandler<"sign_settlement"> = async (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (key?.namespace !== "settler" || key.keyRef !== ctx.state.state.settlerKeyRef) return KEY_NOT_USABLE;
  const { policy } = ctx.state.state;
  const now = ctx.now();
  if (params.chain_id !== ctx.config.chain_id) return refuse("cap_exceeded", "chain id not allowed", "chain");
  const wire = params.authorization;
  const authorization = {
    from: wire.from as Address,
    to: wire.to as Address,
    value: BigInt(wire.value),
    validAfter: BigInt(wire.valid_after),
    validBefore: BigInt(wire.valid_before),
    nonce: wire.nonce as Hex,
  };
  // Whole seconds of the enclave's clock, as the precompile compares block timestamps.
  const refusal = checkSettlement(policy, {
    from: authorization.from,
    to: authorization.to,
    valueUnits: authorization.value,
    validAfter: authorization.validAfter,
    validBefore: authorization.validBefore,
    nowSeconds: BigInt(Math.floor(now.getTime() / 1000)),
  });
  if (refusal) return err(refusal);
  // After the window: both times are then below 2^256, as the digest's words must be.
  const signatureRefusal = checkAuthorizationSignature(
    authorization,
    params.signature as Hex,
    ctx.config.chain_id,
  );
  if (signatureRefusal) return err(signatureRefusal);
  const gasLimit = BigInt(params.gas_limit);
  if (gasLimit < MIN_GAS_LIMIT) return refuse("malformed", "gas limit below 21000");
  if (gasLimit > MAX_GAS_LIMIT)
    return refuse("cap_exceeded", "gas limit above the enclave bound", "gas_limit");
  // checkSettlement returned null, so a policy is sealed.
  const sealed = policy!;
  const fee = { gasLimit, maxFeePerGas: BigInt(params.max_fee_per_gas) };
  if (maxFeeWei(fee) > sealed.feeCeilingWei) {
    return refuse("cap_exceeded", "fee above the policy ceiling", "fee_ceiling");
  }
  if (BigInt(params.nonce) > BigInt(Number.MAX_SAFE_INTEGER))
    return refuse("malformed", "nonce out of range");
  const feeUnits = costUnits({ ...fee, valueUnits: 0n });
  const today = utcDay(now);
  const budget = checkSettlerFeeBudget(sealed, {
    spentTodayUnits: spentToday(ctx.state.state, key.keyRef, today),
    feeUnits,
  });
  if (budget) return err(budget);
  const prepared = prepareTransfer({
    chainId: ctx.config.chain_id,
    nonce: Number(params.nonce),
    to: NATIVE_TRANSFER_AUTH_ADDRESS,
    valueWei: 0n,
    maxFeePerGas: BigInt(params.max_fee_per_gas),
    maxPriorityFeePerGas: BigInt(params.max_priority_fee_per_gas),
    gasLimit,
    data: settlementCalldata(authorization, params.signature as Hex),
  });
  if (!prepared) return refuse("malformed", "transaction fields out of range");
  // No await between the budget check above and this reservation: concurrent requests see each other.
  await ctx.state.commit((next) => {
    countSpend(next, key.keyRef, today, feeUnits);
    recordSignedNonce(next.nonces, key.keyRef, Number(params.nonce), now.getTime());
  });
  const tx = signPrepared(key.privateKey, prepared);
  // What a receipt of the payee key may name (ops/sign-offer-receipt.ts).
  ctx.settlements.record(
    tx.txHash,
    {
      payer: authorization.from.toLowerCase(),
      payee: authorization.to.toLowerCase(),
      valueUnits: authorization.value,
      validBefore: authorization.validBefore,
    },
    BigInt(Math.floor(now.getTime() / 1000)),
  );
  return succeed({ raw_transaction: tx.rawTransaction, tx_hash: tx.txHash });
};
