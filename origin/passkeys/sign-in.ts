/**
 * The console's sign-in ceremony (docs/operations.md#signing-in-with-a-passkey), with
 * @simplewebauthn/server: authentication options for the browser, then the assertion verified
 * against an enrolled passkey (challenge, origin, rpId, user verification, signature, and a counter
 * that must move forward). The origin vouches for the result: unlike an approval, no enclave checks it.
 */
import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  type PublicKeyCredentialRequestOptionsJSON,
  verifyAuthenticationResponse,
} from "@simplewebauthn/server";
import { decodeClientDataJSON } from "@simplewebauthn/server/helpers";
import { sql } from "drizzle-orm";
import { CREDENTIAL_ID_PATTERN } from "../../shared/enclave-ops.ts";
import type { Operator } from "../../shared/operator.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { type Db, queryRows } from "../db/client.ts";
import { OpenCeremonies } from "./ceremonies.ts";
import { uncompressedP256ToCose } from "./credential-key.ts";
import type { RelyingParty } from "./registration.ts";
import { findPasskey } from "./store.ts";

/** How long a sign-in's challenge waits for the authenticator's answer. */
const CEREMONY_MS = 5 * 60_000;
/** Sign-ins one origin keeps open at once (older ones are dropped first). */
const MAX_OPEN = 256;
/**
 * Ours: sign-ins one client (IPv4 address or IPv6 /64) keeps open at once, its oldest dropped past
 * it. An operator opens one per sign-in; a few clients opening all they may then take a few dozen
 * of MAX_OPEN, and when all are taken the busiest client's oldest goes, not another client's.
 */
export const OPEN_PER_CLIENT = 8;

/**
 * Why a sign-in was refused, for the log; the wire says only admin_auth_failed, except to the
 * holder of a pending passkey (its assertion verified), who is told it awaits enrollment.
 */
export type SignInRefusal =
  | { code: "unknown_passkey" }
  | { code: "does_not_verify"; message: string }
  | { code: "not_enrolled"; operator: string; keyId: string }
  | { code: "revoked"; operator: string; keyId: string }
  | { code: "stale_counter" };

export type PasskeySignIn = {
  /** `client`: who asks (its address group), whose share of the open challenges this one takes. */
  options(client: string): Promise<PublicKeyCredentialRequestOptionsJSON>;
  verify(response: AuthenticationResponseJSON): Promise<Result<Operator, SignInRefusal>>;
};

/**
 * Challenges are kept in this process's memory, single use, for five minutes, at most MAX_OPEN at
 * once and OPEN_PER_CLIENT of one client: the options and the answer go to the same origin
 * process, as registration's do.
 */
export function createPasskeySignIn(db: Db, rp: RelyingParty, now = () => Date.now()): PasskeySignIn {
  const ceremonies = new OpenCeremonies<true>(CEREMONY_MS, MAX_OPEN, OPEN_PER_CLIENT, now);
  return {
    async options(client) {
      const enrolled = await queryRows<{ credential_id: string }>(
        db,
        sql`select credential_id from operator_passkeys
            where enrolled_at is not null and revoked_at is null and rp_id = ${rp.rpId}
            order by created_at desc limit 64`,
      );
      const options = await generateAuthenticationOptions({
        rpID: rp.rpId,
        // Empty when none is enrolled: the browser then offers whatever discoverable passkey it has.
        allowCredentials: enrolled.map((row) => ({ id: row.credential_id })),
        userVerification: "required",
        timeout: CEREMONY_MS,
      });
      ceremonies.open(options.challenge, true, client);
      return options;
    },
    async verify(response) {
      // An id of another shape names no passkey (the enclave enrolls none): refused before a lookup.
      const id = response?.id;
      const passkey =
        typeof id === "string" && CREDENTIAL_ID_PATTERN.test(id) ? await findPasskey(db, id) : null;
      if (passkey === null || passkey.credentialId !== response.id) return err({ code: "unknown_passkey" });
      let verified: Awaited<ReturnType<typeof verifyAuthenticationResponse>>;
      try {
        verified = await verifyAuthenticationResponse({
          response,
          // Single use, whatever the outcome, and spent the moment it is checked: the signature is
          // verified asynchronously, so a challenge spent only afterwards let the same assertion,
          // sent again meanwhile, pass here too (a second session when the counter does not move).
          expectedChallenge: (challenge) => {
            if (ceremonies.get(challenge) === undefined) return false;
            ceremonies.spend(challenge);
            return true;
          },
          expectedOrigin: rp.origin,
          expectedRPID: rp.rpId,
          expectedType: "webauthn.get",
          credential: {
            id: passkey.credentialId,
            publicKey: uncompressedP256ToCose(passkey.publicKey),
            // The counter rule is applied below, by the statement that stores the new counter, so
            // that it holds against two sign-ins at once too; here the verifier checks the rest.
            counter: 0,
          },
          requireUserVerification: true,
        });
      } catch (cause) {
        return err({
          code: "does_not_verify",
          message: cause instanceof Error ? cause.message : "the assertion does not verify",
        });
      }
      if (!verified.verified)
        return err({ code: "does_not_verify", message: "the assertion does not verify" });
      // Made inside another origin's frame (the verifier checks such an assertion only when the
      // browser names the top origin, which Safari does not): the framing page chose what the
      // operator saw. The console refuses to be framed, and the enclave refuses such an approval
      // (docs/enclave.md#passkeys); a sign-in, which only the origin checks, is refused the same.
      if (decodeClientDataJSON(response.response.clientDataJSON).crossOrigin === true)
        return err({
          code: "does_not_verify",
          message: "the assertion was made inside another origin's frame",
        });
      // Only the holder of the passkey gets this far: telling them it is pending leaks nothing.
      if (passkey.enrolledAt === null)
        return err({ code: "not_enrolled", operator: passkey.operator, keyId: passkey.keyId });
      // docs/operations.md#revoking-a-passkey: a lost or stolen device signs no one in.
      if (passkey.revokedAt !== null)
        return err({ code: "revoked", operator: passkey.operator, keyId: passkey.keyId });
      // The counter moves forward in the same statement that checks it, so two sign-ins with one
      // counter (a clone, or the same assertion raced) cannot both pass.
      const next = verified.authenticationInfo.newCounter;
      const [moved] = await queryRows<{ key_id: string }>(
        db,
        sql`update operator_passkeys set sign_count = ${next}
            where credential_id = ${passkey.credentialId} and enrolled_at is not null and revoked_at is null
              and (sign_count < ${next} or (${next}::bigint = 0 and sign_count = 0))
            returning key_id`,
      );
      if (!moved) return err({ code: "stale_counter" });
      return ok({ name: passkey.operator, keyId: passkey.keyId });
    },
  };
}
