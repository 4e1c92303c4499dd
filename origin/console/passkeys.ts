import type { RegistrationResponseJSON } from "@simplewebauthn/server";
import type { Context, Handler } from "hono";
import {
  approvalOptionsRequestSchema,
  approvalRequestSchema,
  type PasskeyView,
  passkeyRegistrationOptionsRequestSchema,
  passkeyRegistrationRequestSchema,
  passkeyRevokeRequestSchema,
} from "../../shared/passkey-schemas.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import { parseJsonBody } from "../http/json-body.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { type ApprovalRelay, createApprovalRelay, type RelayError } from "../passkeys/approval.ts";
import { passkeyFingerprint } from "../passkeys/credential-key.ts";
import { normaliseOperatorName } from "../passkeys/operator-name.ts";
import { createPasskeyRegistration, type RegistrationRefusal } from "../passkeys/registration.ts";
import { type RevokePasskeyError, revokePasskey } from "../passkeys/revoke.ts";
import { listPasskeys, type PendingPasskey } from "../passkeys/store.ts";
import { createCapabilityMinter } from "../signer/capability-minter.ts";

/** Registration and assertion responses carry a few hundred bytes of keys and JSON. */
const MAX_BODY = 16_384;

/**
 * The console's passkey routes (docs/operations.md#passkeys): the list, under the read token; the
 * registration ceremony and the approval relay, under the change credentials like every console
 * change. The relay needs the enclave and the origin's admin key; without them it answers
 * feature_disabled.
 */
export function passkeyConsoleHandlers(deps: Infrastructure): {
  list: Handler<AppEnv>;
  registrationOptions: Handler<AppEnv>;
  register: Handler<AppEnv>;
  approvalOptions: Handler<AppEnv>;
  approve: Handler<AppEnv>;
  revoke: Handler<AppEnv>;
} {
  const db = deps.database.db;
  const registration = createPasskeyRegistration(db, deps.config.console);
  const { endpoint, adminAuthorityKeyFile } = deps.config.signer;
  const authorize =
    endpoint && adminAuthorityKeyFile
      ? createCapabilityMinter({
          authority: { keyPath: adminAuthorityKeyFile },
          envId: deps.config.envId,
          client: deps.signer,
        })
      : null;
  const relay: ApprovalRelay | null = authorize
    ? createApprovalRelay({
        db,
        signer: deps.signer,
        authorize,
        rpId: deps.config.console.rpId,
        now: () => new Date(),
      })
    : null;
  const relayOrOff = (): ApprovalRelay => {
    if (!relay)
      throw new AppError("feature_disabled", "approvals need the enclave and the admin authority key");
    return relay;
  };
  return {
    async list(c) {
      const passkeys = await listPasskeys(db);
      return c.json({ passkeys: passkeys.map(passkeyView) });
    },
    async registrationOptions(c) {
      const body = await parseJsonBody(c, passkeyRegistrationOptionsRequestSchema);
      return c.json({ options: await registration.options(registeringOperator(c, body.operator)) });
    },
    async register(c) {
      const body = await parseJsonBody(c, passkeyRegistrationRequestSchema, MAX_BODY);
      const registered = await registration.verify(
        registeringOperator(c, body.operator),
        body.response as unknown as RegistrationResponseJSON,
      );
      if (!registered.ok) throw registrationRefused(registered.error);
      const passkey = registered.value;
      c.set("logFields", { outcome: "passkey_registered", key_id: passkey.keyId });
      return c.json(passkeyView(passkey), 201);
    },
    async approvalOptions(c) {
      const body = await parseJsonBody(c, approvalOptionsRequestSchema);
      const prepared = await relayOrOff().options(body.target, body.key_id);
      if (!prepared.ok) throw relayError(prepared.error);
      return c.json(prepared.value);
    },
    async approve(c) {
      const body = await parseJsonBody(c, approvalRequestSchema, MAX_BODY);
      const relayed = await relayOrOff().relay({
        target: body.target,
        keyId: body.key_id,
        counter: body.counter,
        expiresAt: body.expires_at,
        approvalExpiresAt: body.approval_expires_at,
        response: body.response,
      });
      if (!relayed.ok) throw relayError(relayed.error);
      c.set("logFields", { outcome: "passkey_approved", key_id: body.key_id, change: body.target.change });
      return c.json(relayed.value);
    },
    async revoke(c) {
      const body = await parseJsonBody(c, passkeyRevokeRequestSchema);
      const operator = c.get("operator");
      const revoked = await revokePasskey(
        { db, enclave: authorize ? { signer: deps.signer, authorize } : null },
        {
          keyId: c.req.param("key_id") ?? "",
          revocation: {
            reason: body.reason,
            source: "console",
            by: operator ? { name: operator.name, keyId: operator.keyId } : null,
          },
        },
      );
      if (!revoked.ok) throw revokeRefused(revoked.error);
      c.set("logFields", { outcome: "passkey_revoked", key_id: revoked.value.keyId });
      return c.json(passkeyView(revoked.value));
    },
  };
}

function revokeRefused(error: RevokePasskeyError): AppError {
  switch (error.code) {
    case "not_found":
      return new AppError("not_found", error.message);
    case "enclave_needed":
      return new AppError("feature_disabled", error.message);
    case "signer": {
      const { failure } = error;
      if (failure.class === "retryable")
        return new AppError(
          "agent_signer_unavailable",
          "the enclave did not answer; the revoke is safe to run again",
        );
      return new AppError(
        "validation_failed",
        `the enclave refused the revoke: ${failure.code} (${failure.reason})`,
        {
          fields: { detail: failure.detail ?? failure.code },
        },
      );
    }
  }
}

/**
 * The name a passkey is registered under (docs/operations.md#passkeys), normalised: with a session,
 * the signed-in operator's own, since the audit will name it for every approval the passkey makes
 * (kept as it was first spelled, so a name registered before names were normalised stays one
 * operator); under the shared tokens (automation, the first operator's bootstrap), the name the
 * body gives.
 */
function registeringOperator(c: Context<AppEnv>, given: string): string {
  const named = normaliseOperatorName(given);
  const signedIn = c.get("operator");
  if (!signedIn) return named;
  if (signedIn.name.trim().normalize("NFC") !== named)
    throw new AppError(
      "validation_failed",
      `signed in as ${signedIn.name}: a session registers passkeys under its own operator's name only, not ${named}`,
    );
  return signedIn.name;
}

function registrationRefused(refusal: RegistrationRefusal): AppError {
  switch (refusal.code) {
    case "does_not_verify":
      return new AppError("validation_failed", `registration refused: ${refusal.message}`);
    case "already_registered": {
      const { kept } = refusal;
      return new AppError(
        "idempotency_conflict",
        `registration refused: this credential or its key is registered already, as ${kept.keyId} for ${kept.operator} (${kept.enrolledAt === null ? "pending" : "enrolled"}); nothing was changed`,
      );
    }
  }
}

/** A registered passkey as the console shows it: public parts, the fingerprint the enrolling holder compares. */
function passkeyView(passkey: PendingPasskey): PasskeyView {
  return {
    key_id: passkey.keyId,
    operator: passkey.operator,
    credential_id: passkey.credentialId,
    public_key: passkey.publicKey,
    rp_id: passkey.rpId,
    origin: passkey.origin,
    fingerprint: passkeyFingerprint(passkey.publicKey),
    enrolled: passkey.enrolledAt !== null,
    revoked_at: passkey.revokedAt?.toISOString() ?? null,
    revoked_reason: passkey.revokedReason,
  };
}

function relayError(error: RelayError): AppError {
  switch (error.code) {
    case "not_found":
    case "not_enrolled":
      return new AppError("not_found", error.message);
    case "not_held":
      return new AppError("idempotency_conflict", error.message);
    // Answered as the enclave's own refusal of it would be, by the same name.
    case "revoked":
      return new AppError("policy_loosening_requires_operator", error.message, {
        fields: { detail: "passkey_revoked" },
      });
    case "malformed":
      return new AppError("validation_failed", error.message);
    case "signer": {
      const { failure } = error;
      if (failure.code === "capability_rejected" && failure.detail) {
        return new AppError(
          "policy_loosening_requires_operator",
          `the enclave refused the approval: ${failure.detail}`,
          { fields: { detail: failure.detail } },
        );
      }
      if (failure.class === "retryable")
        return new AppError("agent_signer_unavailable", "the enclave did not answer");
      return new AppError("validation_failed", `the enclave refused the change: ${failure.code}`, {
        fields: { detail: failure.detail ?? failure.code },
      });
    }
  }
}
