/**
 * The local stack's operator key (docs/operations.md#agent-spending-policies-npm-run-policy): one
 * P-256 key at `.data/operator.key`, made on the first start and enrolled in the enclave with the
 * local policy key through the operator tool's own code path (ops/lib/policy-operator.ts), so a
 * held action can be approved locally with `npm run policy -- approve`. Enrolling the same key
 * again answers as the first time, so every restart runs it. A key the operator revoked
 * (`npm run enclave-policy -- revoke-operator-key`) is never enrolled again: its file is moved
 * aside and a new key made, where the start failed. The key file is never printed.
 */
import { existsSync } from "node:fs";
import { rename } from "node:fs/promises";
import { readOperatorKey } from "../ops/lib/operator-key.ts";
import { enrollOperator } from "../ops/lib/policy-operator.ts";
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import { createSocketSignerClient } from "../origin/signer/socket-client.ts";

export type LocalOperatorKey = {
  keyFile: string;
  keyId: string;
  created: boolean;
  /** Where a revoked key's file was moved, when one was replaced at this start. */
  revokedMovedTo?: string;
};

export async function ensureLocalOperatorKey(params: {
  socketPath: string;
  policyKeyFile: string;
  keyFile: string;
}): Promise<LocalOperatorKey> {
  const client = createSocketSignerClient({ socketPath: params.socketPath });
  try {
    const identity = await client.getSealedIdentity();
    if (!identity.ok) throw new Error(`local get_sealed_identity failed (${identity.error.code})`);
    const revokedMovedTo = await moveAsideIfRevoked(client, params.keyFile);
    const enrolled = await enrollOperator({
      client,
      identity: identity.value,
      policySecret: await readAuthoritySecret(params.policyKeyFile),
      keyFile: params.keyFile,
      label: "local stack",
    });
    if (!enrolled.ok) {
      const { code, reason } = enrolled.error.failure;
      throw new Error(`local enroll_operator_key failed (${code}: ${reason})`);
    }
    return {
      keyFile: params.keyFile,
      keyId: enrolled.value.keyId,
      created: enrolled.value.created,
      ...(revokedMovedTo === undefined ? {} : { revokedMovedTo }),
    };
  } finally {
    await client.close();
  }
}

/** Moves the key file aside when the enclave lists its key as revoked; where to, or undefined. */
async function moveAsideIfRevoked(
  client: ReturnType<typeof createSocketSignerClient>,
  keyFile: string,
): Promise<string | undefined> {
  if (!existsSync(keyFile)) return undefined;
  const { publicKey } = await readOperatorKey(keyFile);
  const sealed = await client.getPolicy();
  if (!sealed.ok) throw new Error(`local get_policy failed (${sealed.error.code})`);
  const revoked = sealed.value.revokedOperatorKeys.some(
    (key) => key.publicKey.toLowerCase() === publicKey.toLowerCase(),
  );
  if (!revoked) return undefined;
  const movedTo = `${keyFile}.revoked-${Date.now()}`;
  await rename(keyFile, movedTo);
  return movedTo;
}
