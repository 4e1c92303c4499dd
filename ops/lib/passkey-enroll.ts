/**
 * `npm run enclave-policy -- enroll-passkey CREDENTIAL_ID` (docs/operations.md#passkeys): the
 * policy authority's holder enrolls a passkey an operator registered in the console. The tool reads
 * the pending credential from the database, says what it will enroll (operator, rpId, origin, key
 * fingerprint) and signs a policy-tier capability over exactly those fields: the enclave then
 * seals it. The console registered it; only this signature gives it any power.
 */
import { parseArgs } from "node:util";
import type { Db } from "../../origin/db/client.ts";
import { passkeyFingerprint } from "../../origin/passkeys/credential-key.ts";
import { findPasskey, markEnrolled, type PendingPasskey } from "../../origin/passkeys/store.ts";
import type { SignerClient, SignerFailure } from "../../origin/signer/types.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { UsageError } from "./cli-shell.ts";
import { minterFor } from "./policy-operator.ts";

export type EnrollPasskeyCommand = {
  id: string;
  policyKeyFile: string;
  socket: string | undefined;
  json: boolean;
};

export function parseEnrollPasskeyArgs(argv: string[]): EnrollPasskeyCommand {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      "policy-key": { type: "string" },
      socket: { type: "string" },
      json: { type: "boolean" },
    },
  });
  if (positionals.length !== 2 || positionals[0] !== "enroll-passkey") {
    throw new UsageError("expected: enroll-passkey CREDENTIAL_ID --policy-key FILE");
  }
  if (!values["policy-key"]) throw new UsageError("enroll-passkey needs --policy-key FILE");
  return {
    id: positionals[1]!,
    policyKeyFile: values["policy-key"],
    socket: values.socket,
    json: values.json ?? false,
  };
}

/** What the holder is shown before the capability is signed. */
export function describePasskey(passkey: PendingPasskey): string {
  return (
    `enrolling passkey ${passkey.keyId} of operator ${passkey.operator}\n` +
    `  credential ${passkey.credentialId}\n` +
    `  rpId ${passkey.rpId}, origin ${passkey.origin}\n` +
    `  key fingerprint ${passkeyFingerprint(passkey.publicKey)}\n`
  );
}

export type EnrollPasskeyError =
  | { code: "not_found" | "revoked"; message: string }
  | { code: "signer"; failure: SignerFailure };

/** Enrolls the registered credential `id` (its credential id or key id) with the policy key. */
export async function enrollPendingPasskey(params: {
  db: Db;
  client: SignerClient;
  policySecret: Uint8Array;
  id: string;
  /** Called with the passkey before anything is signed. */
  announce: (passkey: PendingPasskey) => void;
}): Promise<Result<PendingPasskey, EnrollPasskeyError>> {
  const passkey = await findPasskey(params.db, params.id);
  if (!passkey) return err({ code: "not_found", message: `no registered passkey ${params.id}` });
  // The enclave refuses a passkey it revoked; one revoked while pending it never knew.
  if (passkey.revokedAt !== null)
    return err({
      code: "revoked",
      message: `passkey ${passkey.keyId} was revoked (${passkey.revokedReason}): it is never enrolled; register a new one`,
    });
  params.announce(passkey);
  const identity = await params.client.getSealedIdentity();
  if (!identity.ok) return err({ code: "signer", failure: identity.error });
  const enrolled = await params.client.enrollOperatorPasskey(
    {
      keyId: passkey.keyId,
      operator: passkey.operator,
      credentialId: passkey.credentialId,
      publicKey: passkey.publicKey as `0x${string}`,
      rpId: passkey.rpId,
      origin: passkey.origin,
    },
    minterFor(params.client, identity.value, params.policySecret, "enroll-passkey"),
  );
  if (!enrolled.ok) return err({ code: "signer", failure: enrolled.error });
  await markEnrolled(params.db, passkey.credentialId);
  return ok({ ...passkey, enrolledAt: passkey.enrolledAt ?? new Date() });
}
