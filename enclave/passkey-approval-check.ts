/**
 * Verifying a passkey's approval (docs/enclave.md#passkeys) inside the enclave: a WebAuthn
 * assertion by an enrolled passkey, whose challenge is the hash of exactly what the change does
 * (shared/passkey-approval.ts, `shown` rebuilt here from the enclave's own state and the op's
 * params). Checked in the order a relying party checks an assertion, each failure
 * `capability_rejected` with its own detail; the counter and expiry come after the signature, so
 * only the passkey's holder learns them. Pure: the caller seals the counter and signCount with the
 * op's effect (acceptOperatorCounter), with no await between.
 */
import { createHash, verify } from "node:crypto";
import type { WirePasskeyApproval } from "../shared/enclave-ops.ts";
import type { EnclaveFailure, OperatorRefusalDetail } from "../shared/enclave-protocol.ts";
import { fromHex } from "../shared/hex.ts";
import { MAX_OPERATOR_APPROVAL_SECONDS } from "../shared/operator-approval.ts";
import { type PasskeyShown, passkeyChallenge, toBase64Url } from "../shared/passkey-approval.ts";
import type { EnclaveState } from "./enclave-state.ts";
import { p256PublicKey } from "./p256.ts";
import type { SealedConfig } from "./sealed-config.ts";

/** An accepted passkey approval: the counter to seal, and the authenticator's signCount. */
export type AcceptedPasskey = { keyId: string; counter: number; signCount: number };

/** The order n of the P-256 group; a signature's S above n/2 is refused (its low-S twin is n − S). */
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const FLAG_USER_PRESENT = 0x01;
const FLAG_USER_VERIFIED = 0x04;

const rejected = (reason: string, detail: OperatorRefusalDetail): { ok: false; error: EnclaveFailure } => ({
  ok: false,
  error: { code: "capability_rejected", reason, detail },
});

export function checkPasskeyApproval(
  config: SealedConfig,
  state: EnclaveState,
  input: { shown: PasskeyShown; approval: WirePasskeyApproval; nowMs: number },
): { ok: true; value: AcceptedPasskey } | { ok: false; error: EnclaveFailure } {
  const { approval } = input;
  const passkey = state.operatorPasskeys.get(approval.key_id);
  if (!passkey) {
    // Named apart from an unknown id, so the console can say the device was revoked.
    if (state.revokedPasskeys.has(approval.key_id))
      return rejected("this passkey was revoked: it approves nothing", "passkey_revoked");
    return rejected("no passkey is enrolled under this key id", "passkey_unknown");
  }
  const authData = fromHex(approval.webauthn.authenticator_data);
  const clientDataBytes = fromHex(approval.webauthn.client_data_json);
  const clientData = parseClientData(clientDataBytes);
  if (clientData?.type !== "webauthn.get") {
    return rejected("clientDataJSON is not that of an assertion (webauthn.get)", "passkey_client_data");
  }
  const challenge = passkeyChallenge({
    envId: config.env_id,
    chainId: config.chain_id,
    instanceId: config.instance_id,
    keyId: approval.key_id,
    counter: approval.counter,
    expiresAt: approval.expires_at,
    shown: input.shown,
  });
  if (clientData.challenge !== toBase64Url(challenge)) {
    return rejected("the assertion's challenge is not this change's", "passkey_challenge");
  }
  if (clientData.origin !== passkey.origin) {
    return rejected("the assertion was made on another origin", "passkey_origin");
  }
  // The console refuses to be framed; an assertion made inside a frame was made on a page the
  // operator did not open, where what they were shown is the framing page's to choose.
  if (clientData.crossOrigin === true) {
    return rejected("the assertion was made inside a frame of another origin", "passkey_origin");
  }
  const rpIdHash = createHash("sha256").update(passkey.rpId).digest();
  if (!rpIdHash.equals(authData.subarray(0, 32))) {
    return rejected("the assertion was made for another relying party", "passkey_rp");
  }
  const flags = authData[32]!;
  if ((flags & FLAG_USER_PRESENT) === 0 || (flags & FLAG_USER_VERIFIED) === 0) {
    return rejected("the authenticator did not verify the user", "passkey_user_verification");
  }
  const signature = fromHex(approval.webauthn.signature);
  const s = derSignatureS(signature);
  if (s !== null && s > P256_N / 2n) {
    return rejected("the signature is not in its low-S form", "passkey_signature_high_s");
  }
  const key = p256PublicKey(passkey.publicKey);
  const signed = Buffer.concat([authData, createHash("sha256").update(clientDataBytes).digest()]);
  if (s === null || !key || !verifyDer(key, signed, signature)) {
    return rejected("the passkey's signature is not valid", "passkey_signature");
  }
  if (approval.counter <= passkey.lastCounter) {
    return rejected("operator approval counter already used", "operator_replay");
  }
  const nowSeconds = Math.floor(input.nowMs / 1000);
  if (approval.expires_at < nowSeconds || approval.expires_at > nowSeconds + MAX_OPERATOR_APPROVAL_SECONDS) {
    return rejected("operator approval expired or too far ahead", "operator_expired");
  }
  // signCount 0 on both sides: an authenticator that does not count (most synced passkeys).
  // Otherwise it must grow, or two authenticators hold this credential (a clone).
  const signCount = new DataView(authData.buffer, authData.byteOffset + 33, 4).getUint32(0);
  if ((signCount !== 0 || passkey.signCount !== 0) && signCount <= passkey.signCount) {
    return rejected("the authenticator's signature count did not grow", "passkey_sign_count");
  }
  return { ok: true, value: { keyId: approval.key_id, counter: approval.counter, signCount } };
}

function parseClientData(
  bytes: Uint8Array,
): { type?: unknown; challenge?: unknown; origin?: unknown; crossOrigin?: unknown } | null {
  try {
    const parsed: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    return typeof parsed === "object" && parsed !== null ? parsed : null;
  } catch {
    return null;
  }
}

function verifyDer(key: NonNullable<ReturnType<typeof p256PublicKey>>, data: Buffer, signature: Uint8Array) {
  try {
    return verify("sha256", data, { key, dsaEncoding: "der" }, signature);
  } catch {
    return false;
  }
}

/**
 * S of a DER ECDSA signature (SEQUENCE { INTEGER r, INTEGER s }, short lengths as P-256's are),
 * or null when it is not one.
 */
export function derSignatureS(der: Uint8Array): bigint | null {
  if (der.length < 8 || der[0] !== 0x30 || der[1] !== der.length - 2) return null;
  const rLength = der[3]!;
  if (der[2] !== 0x02 || rLength === 0 || 4 + rLength + 2 > der.length) return null;
  const at = 4 + rLength;
  const sLength = der[at + 1]!;
  if (der[at] !== 0x02 || sLength === 0 || at + 2 + sLength !== der.length) return null;
  let s = 0n;
  for (const byte of der.subarray(at + 2)) s = (s << 8n) | BigInt(byte);
  return s;
}
