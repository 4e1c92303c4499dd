/**
 * Revoking an operator's passkey (docs/operations.md#revoking-a-passkey), for the console's route
 * and `npm run enclave-policy -- revoke-passkey`: the enclave revokes it first (admin tier: revoking
 * only tightens), and only then is the row marked, so a revoke that failed on the way leaves the row
 * as it was and is simply run again (the enclave answers a repeat as its first revoke). Once marked,
 * the passkey signs no one in and every session it signed in ends at its next request
 * (sessions.ts); the enclave refuses its approvals by name (`passkey_revoked`).
 */
import { err, ok, type Result } from "../../shared/result.ts";
import type { Db } from "../db/client.ts";
import type { CapabilityProvider, SignerClient, SignerFailure } from "../signer/types.ts";
import { findPasskey, markRevoked, type PendingPasskey, type Revocation } from "./store.ts";

export type RevokePasskeyDeps = {
  db: Db;
  /** Null on a node without the enclave or the admin key: only a pending passkey is revoked then. */
  enclave: {
    signer: Pick<SignerClient, "revokeOperatorPasskey" | "getPolicy">;
    authorize: CapabilityProvider;
  } | null;
};

export type RevokePasskeyError =
  | { code: "not_found"; message: string }
  | { code: "enclave_needed"; message: string }
  | { code: "signer"; failure: SignerFailure };

/** Revokes the passkey `keyId`; one revoked already is answered as it is, with nothing changed. */
export async function revokePasskey(
  deps: RevokePasskeyDeps,
  params: { keyId: string; revocation: Revocation },
): Promise<Result<PendingPasskey, RevokePasskeyError>> {
  const passkey = await findPasskey(deps.db, params.keyId);
  if (passkey?.keyId !== params.keyId)
    return err({ code: "not_found", message: `no registered passkey ${params.keyId}` });
  if (passkey.revokedAt !== null) {
    // Revoked while pending, it may have been enrolled since, by an enroll that read the row just
    // before: a repeat then revokes it in the enclave too, and keeps the first revocation's record.
    if (!deps.enclave) return ok(passkey);
    const listed = await enclaveLists(deps.enclave.signer, passkey.keyId);
    if (!listed.ok) return listed;
    if (!listed.value) return ok(passkey);
    const revoked = await deps.enclave.signer.revokeOperatorPasskey(
      { keyId: passkey.keyId, credentialId: passkey.credentialId },
      deps.enclave.authorize,
    );
    return revoked.ok ? ok(passkey) : err({ code: "signer", failure: revoked.error });
  }
  const sealed = await sealedInEnclave(deps, passkey);
  if (!sealed.ok) return sealed;
  if (sealed.value) {
    // Checked above: sealedInEnclave answers true only with the enclave at hand.
    const { signer, authorize } = deps.enclave!;
    const revoked = await signer.revokeOperatorPasskey(
      { keyId: passkey.keyId, credentialId: passkey.credentialId },
      authorize,
    );
    if (!revoked.ok) {
      if (revoked.error.class === "retryable") return err({ code: "signer", failure: revoked.error });
      // Refused: the enclave holds no such passkey, neither enrolled nor revoked (restored from a
      // backup older than its enrollment). It approves nothing there, and the row must still stop
      // its sign-ins; a passkey the enclave does list stays unrevoked, and the refusal is answered.
      const listed = await enclaveLists(signer, passkey.keyId);
      if (!listed.ok) return listed;
      if (listed.value) return err({ code: "signer", failure: revoked.error });
    }
  }
  return ok(await markRevoked(deps.db, passkey.keyId, params.revocation));
}

/**
 * Whether the enclave may hold the passkey: an enrolled one, certainly (or revoked there by an
 * earlier run that failed before marking the row); a pending one too, if the enclave lists it (its
 * enrollment sealed, the row not marked since).
 */
async function sealedInEnclave(
  deps: RevokePasskeyDeps,
  passkey: PendingPasskey,
): Promise<Result<boolean, RevokePasskeyError>> {
  if (!deps.enclave) {
    if (passkey.enrolledAt === null) return ok(false);
    return err({
      code: "enclave_needed",
      message: "an enrolled passkey is revoked in the enclave: this node has no enclave or admin key",
    });
  }
  if (passkey.enrolledAt !== null) return ok(true);
  return enclaveLists(deps.enclave.signer, passkey.keyId);
}

/** Whether the enclave lists the passkey among its enrolled ones (get_policy). */
async function enclaveLists(
  signer: Pick<SignerClient, "getPolicy">,
  keyId: string,
): Promise<Result<boolean, RevokePasskeyError>> {
  const policy = await signer.getPolicy();
  if (!policy.ok) return err({ code: "signer", failure: policy.error });
  return ok(policy.value.operatorPasskeys.some((each) => each.keyId === keyId));
}
