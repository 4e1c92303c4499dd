/**
 * configure_treasury and configure_policy (policy tier: an authority whose key never
 * sits on the origin host, docs/enclave.md): sealed policy the signers re-check.
 */
import { generateKeyMaterial } from "../keystore.ts";
import { KEY_NOT_USABLE, refuse, succeed } from "../outcome.ts";
import { policyFromWire, policyToWire } from "../policy.ts";
import type { OpHandler } from "./handler.ts";

/**
 * Sets the faucet key, a fresh budget (spent restarts at zero) and the payout terms sign_faucet
 * enforces. Without faucet_key_ref the configured faucet key is kept, or a new one is generated in
 * the `faucet` namespace. The recipients' payout records are kept: a new budget does not reopen a
 * cooldown, nor does a new key (whose nonces are its own, so no payout of it is one signed again).
 */
export const configureTreasury: OpHandler<"configure_treasury"> = async (ctx, params) => {
  let keyRef = params.faucet_key_ref ?? ctx.state.state.treasury?.faucetKeyRef ?? null;
  if (keyRef === null) {
    const [entry] = await ctx.keystore.add({
      namespace: "faucet",
      batchId: `treasury-${ctx.now().getTime()}`,
      keys: generateKeyMaterial(1),
    });
    keyRef = entry!.keyRef;
  }
  const key = ctx.keystore.get(keyRef);
  if (key?.namespace !== "faucet") return KEY_NOT_USABLE;
  const budgetUnits = BigInt(params.budget_units);
  const faucetKeyRef = keyRef;
  const terms = {
    payoutUnits: BigInt(params.payout_units),
    cooldownMs: params.cooldown_ms,
    dailyLimitUnits: BigInt(params.daily_limit_units),
  };
  await ctx.state.commit((state) => {
    if (state.treasury && state.treasury.faucetKeyRef !== faucetKeyRef) {
      // A recipient's last payout was signed at a nonce of the key before: the same nonce of this
      // key is a payment of its own, which sign_faucet must not take for that one asked again.
      for (const [recipient, { nonce: _, ...paid }] of state.faucetPayouts) {
        state.faucetPayouts.set(recipient, paid);
      }
    }
    state.treasury = { faucetKeyRef, budgetUnits, spentUnits: 0n, terms };
  });
  ctx.logger.info(
    {
      faucet_address: key.address,
      budget_units: params.budget_units,
      payout_units: params.payout_units,
      cooldown_ms: params.cooldown_ms,
      daily_limit_units: params.daily_limit_units,
    },
    "treasury configured",
  );
  return succeed({
    faucet_key_ref: faucetKeyRef,
    faucet_address: key.address,
    budget_units: params.budget_units,
    payout_units: params.payout_units,
    cooldown_ms: params.cooldown_ms,
    daily_limit_units: params.daily_limit_units,
  });
};

/** Replaces the signing policy (docs/enclave.md, "The enclave's signing policy"). */
export const configurePolicy: OpHandler<"configure_policy"> = async (ctx, params) => {
  if ((params.x402_amount_units === null) !== (params.x402_pay_to === null)) {
    return refuse("malformed", "x402 amount and payTo are set together");
  }
  const policy = policyFromWire(params);
  let version = 0;
  await ctx.state.commit((state) => {
    state.policy = policy;
    state.policyVersion += 1;
    version = state.policyVersion;
  });
  ctx.logger.info({ policy_version: version, operator_pool: policy.operatorPool }, "policy configured");
  return succeed(policyToWire(policy));
};

/**
 * Makes the x402 settler key once, in the `settler` namespace, the way
 * configure_treasury makes the faucet key; a repeat returns the same key. With settler_key_ref the
 * settler is pointed at that key of the `settler` namespace instead, as configure_treasury takes a
 * faucet key: after a recovery, the restored settler key signs again, with its address and its gas
 * float. The key can only sign sign_settlement, so it pays gas for settlements and moves nothing else.
 */
export const configureSettler: OpHandler<"configure_settler"> = async (ctx, params) => {
  let keyRef = params.settler_key_ref ?? ctx.state.state.settlerKeyRef;
  if (keyRef === null) {
    const [entry] = await ctx.keystore.add({
      namespace: "settler",
      batchId: `settler-${ctx.now().getTime()}`,
      keys: generateKeyMaterial(1),
    });
    keyRef = entry!.keyRef;
  }
  const key = ctx.keystore.get(keyRef);
  if (key?.namespace !== "settler") return KEY_NOT_USABLE;
  if (ctx.state.state.settlerKeyRef !== key.keyRef) {
    const chosen = key.keyRef;
    await ctx.state.commit((state) => {
      state.settlerKeyRef = chosen;
    });
  }
  ctx.logger.info({ settler_address: key.address }, "settler configured");
  return succeed({ settler_key_ref: key.keyRef, settler_address: key.address });
};
