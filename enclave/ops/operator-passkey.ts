/**
 * enroll_operator_passkey (policy tier, docs/enclave.md#passkeys): seals a named operator's
 * WebAuthn passkey (credential id, P-256 public key, rpId, origin) beside the operator keys. The
 * policy authority's capability binds every one of those fields, so the origin, which relays the
 * registration ceremony, cannot enroll a passkey of its own. An id names one key or passkey for
 * good, and a credential is enrolled under one id, so its counters have one record.
 */

import type { OperatorPasskeyRecord } from "../enclave-state.ts";
import { refuse, succeed } from "../outcome.ts";
import { p256PublicKey } from "../p256.ts";
import type { OpHandler } from "./handler.ts";
import { MAX_OPERATOR_KEYS } from "./operator.ts";

export const enrollOperatorPasskey: OpHandler<"enroll_operator_passkey"> = async (ctx, params) => {
  if (!p256PublicKey(params.public_key)) return refuse("malformed", "not a P-256 public key");
  const { operatorKeys, operatorPasskeys } = ctx.state.state;
  const result = {
    key_id: params.key_id,
    credential_id: params.credential_id,
    public_key: params.public_key,
  };
  if (operatorKeys.has(params.key_id))
    return refuse("malformed", "this key id is enrolled as an operator key");
  const existing = operatorPasskeys.get(params.key_id);
  if (existing) {
    const same =
      existing.credentialId === params.credential_id &&
      existing.publicKey === params.public_key &&
      existing.rpId === params.rp_id &&
      existing.origin === params.origin &&
      existing.operator === params.operator;
    return same ? succeed(result) : refuse("malformed", "this key id is enrolled with another passkey");
  }
  for (const passkey of operatorPasskeys.values()) {
    if (passkey.credentialId === params.credential_id) {
      return refuse("malformed", "this credential is enrolled under another key id");
    }
  }
  if (operatorKeys.size + operatorPasskeys.size >= MAX_OPERATOR_KEYS) {
    return refuse("cap_exceeded", "too many operator keys");
  }
  const record: OperatorPasskeyRecord = {
    operator: params.operator,
    credentialId: params.credential_id,
    publicKey: params.public_key,
    rpId: params.rp_id,
    origin: params.origin,
    label: params.label ?? null,
    lastCounter: 0,
    signCount: 0,
  };
  await ctx.state.commit((state) => {
    state.operatorPasskeys.set(params.key_id, record);
  });
  ctx.logger.info({ key_id: params.key_id, operator: params.operator }, "operator passkey enrolled");
  return succeed(result);
};
