/**
 * get_policy (no capability: the sealed policy is no secret): the
 * origin reads what it may not write, logs it at start and shows it on /healthz, and its money
 * routes compare their configuration with it. Limits, addresses, the faucet budget and payout
 * terms, and what the treasury and the settler have spent of their budgets are not secret; no key
 * material is returned.
 */
import { spentToday } from "../daily-spend.ts";
import { succeed } from "../outcome.ts";
import { payeeKey } from "../payee-key.ts";
import { policyToWire } from "../policy.ts";
import { utcDay } from "../policy-checks.ts";
import type { OpHandler } from "./handler.ts";

export const getPolicy: OpHandler<"get_policy"> = (ctx) => {
  const {
    policy,
    policyVersion,
    treasury,
    settlerKeyRef,
    nodeFrozen,
    nodeFreezeEpoch,
    operatorKeys,
    operatorPasskeys,
    revokedOperatorKeys,
  } = ctx.state.state;
  const faucetKey = treasury ? ctx.keystore.get(treasury.faucetKeyRef) : undefined;
  const settlerKey = settlerKeyRef ? ctx.keystore.get(settlerKeyRef) : undefined;
  const payee = payeeKey(ctx.keystore, ctx.state);
  return succeed({
    env_id: ctx.config.env_id,
    chain_id: ctx.config.chain_id,
    policy_version: policyVersion,
    policy: policy ? policyToWire(policy) : null,
    treasury:
      treasury && faucetKey
        ? {
            faucet_key_ref: treasury.faucetKeyRef,
            faucet_address: faucetKey.address,
            budget_units: treasury.budgetUnits.toString(),
            spent_units: treasury.spentUnits.toString(),
            payout_units: treasury.terms?.payoutUnits.toString() ?? null,
            cooldown_ms: treasury.terms?.cooldownMs ?? null,
            daily_limit_units: treasury.terms?.dailyLimitUnits.toString() ?? null,
          }
        : null,
    settler: settlerKey
      ? {
          settler_key_ref: settlerKey.keyRef,
          settler_address: settlerKey.address,
          fee_spent_today_units: spentToday(ctx.state.state, settlerKey.keyRef, utcDay(ctx.now())).toString(),
        }
      : null,
    payee: payee ? { payee_key_ref: payee.keyRef, payee_address: payee.address } : null,
    node_frozen: nodeFrozen,
    node_freeze_epoch: nodeFreezeEpoch,
    operator_keys: [...operatorKeys].map(([keyId, key]) => ({
      key_id: keyId,
      public_key: key.publicKey,
      label: key.label,
    })),
    operator_passkeys: [...operatorPasskeys].map(([keyId, passkey]) => ({
      key_id: keyId,
      operator: passkey.operator,
      credential_id: passkey.credentialId,
      public_key: passkey.publicKey,
      rp_id: passkey.rpId,
      origin: passkey.origin,
      label: passkey.label,
    })),
    revoked_operator_keys: [...revokedOperatorKeys].map(([keyId, revoked]) => ({
      key_id: keyId,
      public_key: revoked.publicKey,
      revoked_at_ms: revoked.revokedAtMs,
    })),
  });
};
