/**
 * The operator key's part of `npm run policy` (docs/operations.md#agent-spending-policies-npm-run-policy)
 * and of the local stack: its id, its enrollment with the policy authority key, and approvals
 * signed for the one enclave instance the tool talks to. The key file's contents never leave this
 * process: only the public half, the key id and signatures do.
 */
import { existsSync } from "node:fs";
import { sha256 } from "@noble/hashes/sha2";
import { createCapabilityMinter } from "../../origin/signer/capability-minter.ts";
import type {
  CapabilityProvider,
  SealedIdentity,
  SignerClient,
  SignerFailure,
} from "../../origin/signer/types.ts";
import { fromHex, type Hex, toHex } from "../../shared/hex.ts";
import {
  type KeyApproval,
  MAX_OPERATOR_APPROVAL_SECONDS,
  type OperatorApprovedOp,
} from "../../shared/operator-approval.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import {
  generateOperatorKey,
  type OperatorKey,
  operatorCounterNow,
  readOperatorKey,
  signOperatorApproval,
} from "./operator-key.ts";

/** How long an approval the tool signs stays usable: it is signed to be used at once. */
export const APPROVAL_LIFETIME_SECONDS = 300;

/**
 * The default id of an operator key: `op-` and the first 16 hex digits of SHA-256 of its public
 * point (0x04 ‖ X ‖ Y). Enrolling and signing derive it alike, so the key file alone names the key.
 */
export function operatorKeyId(publicKey: Hex): string {
  return `op-${toHex(sha256(fromHex(publicKey))).slice(2, 18)}`;
}

/** A capability provider for one enclave, its env and chain read from the enclave itself. */
export function minterFor(
  client: SignerClient,
  identity: SealedIdentity,
  authority: Uint8Array,
  tool: string,
): CapabilityProvider {
  return createCapabilityMinter({
    authority,
    envId: identity.envId,
    chainId: identity.chainId,
    client,
    requestId: () => `${tool}-${crypto.randomUUID()}`,
  });
}

export type EnrollOperatorResult = Result<
  { keyId: string; publicKey: Hex; created: boolean },
  { code: "signer"; failure: SignerFailure }
>;

/**
 * Makes the key file if there is none (P-256, mode 0600), then enrolls its public half with a
 * policy-tier capability. The enclave answers a repeat of the same id and key as the first time.
 * A key file that exists but cannot be read as a P-256 key throws (the caller's usage error).
 */
export async function enrollOperator(params: {
  client: SignerClient;
  identity: SealedIdentity;
  policySecret: Uint8Array;
  keyFile: string;
  keyId?: string;
  label?: string;
}): Promise<EnrollOperatorResult> {
  const created = !existsSync(params.keyFile);
  const publicKey = created
    ? (await generateOperatorKey(params.keyFile)).publicKey
    : (await readOperatorKey(params.keyFile)).publicKey;
  const keyId = params.keyId ?? operatorKeyId(publicKey);
  const enrolled = await params.client.enrollOperatorKey(
    { keyId, publicKey, ...(params.label === undefined ? {} : { label: params.label }) },
    minterFor(params.client, params.identity, params.policySecret, "policy-enroll"),
  );
  if (!enrolled.ok) return err({ code: "signer", failure: enrolled.error });
  return ok({ keyId: enrolled.value.keyId, publicKey: enrolled.value.publicKey, created });
}

/** An operator key ready to sign for one enclave instance, under the id the enclave enrolled it. */
export type OperatorSigner = {
  keyId: string;
  /** `policyBefore`: a set_agent_policy's, agentPolicySubject of the policy the enclave holds now. */
  approve(op: OperatorApprovedOp, subject: Hex, policyBefore?: Hex): KeyApproval;
};

export type OperatorSignerFailure =
  | { code: "not_enrolled"; publicKey: Hex }
  /** Revoked (revoke_operator_key): it approves nothing, and is never enrolled again. */
  | { code: "revoked"; publicKey: Hex; keyId: string; revokedAt: Date }
  | { code: "signer"; failure: SignerFailure };

/**
 * The key's enrolled id, found by its public half among the enclave's operator keys (the derived
 * id first, so a key enrolled with `--key-id` signs as well), and a signer of approvals for this
 * enclave's instance with the counter at now in milliseconds and an expiry a few minutes ahead.
 */
export async function operatorSigner(
  client: SignerClient,
  identity: SealedIdentity,
  key: OperatorKey,
): Promise<Result<OperatorSigner, OperatorSignerFailure>> {
  const sealed = await client.getPolicy();
  if (!sealed.ok) return err({ code: "signer", failure: sealed.error });
  const mine = sealed.value.operatorKeys.filter(
    (enrolled) => enrolled.publicKey.toLowerCase() === key.publicKey.toLowerCase(),
  );
  const derived = operatorKeyId(key.publicKey);
  const keyId = (mine.find((enrolled) => enrolled.keyId === derived) ?? mine[0])?.keyId;
  if (keyId === undefined) {
    const revoked = sealed.value.revokedOperatorKeys.find(
      (gone) => gone.publicKey.toLowerCase() === key.publicKey.toLowerCase(),
    );
    if (revoked)
      return err({
        code: "revoked",
        publicKey: key.publicKey,
        keyId: revoked.keyId,
        revokedAt: revoked.revokedAt,
      });
    return err({ code: "not_enrolled", publicKey: key.publicKey });
  }
  return ok({
    keyId,
    approve(op, subject, policyBefore) {
      const lifetime = Math.min(APPROVAL_LIFETIME_SECONDS, MAX_OPERATOR_APPROVAL_SECONDS);
      return signOperatorApproval(key, {
        envId: identity.envId,
        chainId: identity.chainId,
        instanceId: identity.instanceId,
        op,
        subject,
        ...(policyBefore === undefined ? {} : { policyBefore }),
        keyId,
        counter: operatorCounterNow(),
        expiresAt: Math.floor(Date.now() / 1000) + lifetime,
      });
    },
  });
}
