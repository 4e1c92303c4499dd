/**
 * The local stack's operator key (docs/operations.md#agent-spending-policies-npm-run-policy): one
 * P-256 key at `.data/operator.key`, made on the first start and enrolled in the enclave with the
 * local policy key through the operator tool's own code path (ops/lib/policy-operator.ts), so a
 * held action can be approved locally with `npm run policy -- approve`. Enrolling the same key
 * again answers as the first time, so every restart runs it. The key file is never printed.
 */
import { enrollOperator } from "../ops/lib/policy-operator.ts";
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import { createSocketSignerClient } from "../origin/signer/socket-client.ts";

export type LocalOperatorKey = { keyFile: string; keyId: string; created: boolean };

export async function ensureLocalOperatorKey(params: {
  socketPath: string;
  policyKeyFile: string;
  keyFile: string;
}): Promise<LocalOperatorKey> {
  const client = createSocketSignerClient({ socketPath: params.socketPath });
  try {
    const identity = await client.getSealedIdentity();
    if (!identity.ok) throw new Error(`local get_sealed_identity failed (${identity.error.code})`);
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
    return { keyFile: params.keyFile, keyId: enrolled.value.keyId, created: enrolled.value.created };
  } finally {
    await client.close();
  }
}
