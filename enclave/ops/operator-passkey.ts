/**
 * enroll_operator_passkey (policy tier, docs/enclave.md#passkeys): seals a named operator's
 * WebAuthn passkey (credential id, P-256 public key, rpId, origin) beside the operator keys. The
 * policy authority's capability binds every one of those fields, so the origin, which relays the
 * registration ceremony, cannot enroll a passkey of its own. An id names one key or passkey for
 * good, and a credential is enrolled under one id, so its counters have one record.
 *
 * revoke_operator_passkey (admin tier): a lost or stolen passkey approves nothing from then on. Its
 * record moves to the revoked ones, so its id and credential are never enrolled again: a revoke
 * cannot be undone by enrolling the same device anew.
 */

import type { OperatorPasskeyRecord, RevokedPasskeyRecord } from "../enclave-state.ts";
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
  if (operatorKeys.has(params.key_id) || ctx.state.state.revokedOperatorKeys.has(params.key_id))
    return refuse("malformed", "this key id is enrolled as an operator key");
  const { revokedPasskeys } = ctx.state.state;
  if (revokedPasskeys.has(params.key_id))
    return refuse("malformed", "this key id names a revoked passkey: it is never enrolled again");
  for (const revoked of revokedPasskeys.values()) {
    if (revoked.credentialId === params.credential_id)
      return refuse("malformed", "this credential was revoked: it is never enrolled again");
  }
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
  if (revokedPasskeys.size >= MAX_REVOKED_PASSKEYS) {
    return refuse("cap_exceeded", "too many revoked passkeys");
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

/**
 * Revoked passkeys one enclave remembers; past it, enrolling stops (cap_exceeded), revoking never
 * does. Each was enrolled with the policy key first, so only that key's holder can bring it near.
 */
export const MAX_REVOKED_PASSKEYS = 256;

export const revokeOperatorPasskey: OpHandler<"revoke_operator_passkey"> = async (ctx, params) => {
  const { operatorPasskeys, revokedPasskeys } = ctx.state.state;
  const revoked = revokedPasskeys.get(params.key_id);
  if (revoked) {
    if (revoked.credentialId !== params.credential_id)
      return refuse("malformed", "this key id names another passkey");
    return succeed(revokedResult(params.key_id, revoked));
  }
  const passkey = operatorPasskeys.get(params.key_id);
  if (!passkey) return refuse("malformed", "no passkey is enrolled under this key id");
  if (passkey.credentialId !== params.credential_id)
    return refuse("malformed", "this key id names another passkey");
  const record: RevokedPasskeyRecord = {
    operator: passkey.operator,
    credentialId: passkey.credentialId,
    revokedAtMs: ctx.now().getTime(),
  };
  // One step: the passkey is gone from the enrolled ones as it joins the revoked ones, so no
  // approval checked after this line finds it.
  await ctx.state.commit((state) => {
    state.operatorPasskeys.delete(params.key_id);
    state.revokedPasskeys.set(params.key_id, record);
  });
  ctx.logger.info({ key_id: params.key_id, operator: passkey.operator }, "operator passkey revoked");
  return succeed(revokedResult(params.key_id, record));
};

function revokedResult(
  keyId: string,
  revoked: RevokedPasskeyRecord,
): { key_id: string; credential_id: string; operator: string; revoked_at_ms: number } {
  return {
    key_id: keyId,
    credential_id: revoked.credentialId,
    operator: revoked.operator,
    revoked_at_ms: revoked.revokedAtMs,
  };
}
