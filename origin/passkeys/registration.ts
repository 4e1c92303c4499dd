/**
 * The console's passkey registration ceremony (docs/operations.md#passkeys), with
 * @simplewebauthn/server: options for the browser, then the authenticator's response verified
 * (challenge, origin, rpId, user verification) and kept as a pending credential. Registering gives
 * the passkey no power: only the policy authority's signature enrolls it in the enclave.
 */
import {
  generateRegistrationOptions,
  type PublicKeyCredentialCreationOptionsJSON,
  type RegistrationResponseJSON,
  verifyRegistrationResponse,
} from "@simplewebauthn/server";
import { err, type Result } from "../../shared/result.ts";
import type { Db } from "../db/client.ts";
import { OpenCeremonies } from "./ceremonies.ts";
import { coseToUncompressedP256, passkeyKeyId } from "./credential-key.ts";
import { type PendingPasskey, savePendingPasskey } from "./store.ts";

/** How long a registration's challenge waits for the authenticator's answer. */
const CEREMONY_MS = 5 * 60_000;
/** Ceremonies one origin keeps open at once (older ones are dropped first). */
const MAX_OPEN = 256;

export type RelyingParty = { rpId: string; origin: string };

/** Why a registration was refused: its response, or a credential or key registered already. */
export type RegistrationRefusal =
  | { code: "does_not_verify"; message: string }
  | { code: "already_registered"; kept: PendingPasskey };

export type PasskeyRegistration = {
  options(operator: string): Promise<PublicKeyCredentialCreationOptionsJSON>;
  verify(
    operator: string,
    response: RegistrationResponseJSON,
  ): Promise<Result<PendingPasskey, RegistrationRefusal>>;
};

/**
 * The ceremony's challenges are kept in this process's memory for five minutes: the options and
 * the answer go to the same origin process (the console is one origin, on the operator's host).
 */
export function createPasskeyRegistration(
  db: Db,
  rp: RelyingParty,
  now = () => Date.now(),
): PasskeyRegistration {
  const ceremonies = new OpenCeremonies<string>(CEREMONY_MS, MAX_OPEN, MAX_OPEN, now);
  return {
    async options(operator) {
      const options = await generateRegistrationOptions({
        rpName: "agent wallet console",
        rpID: rp.rpId,
        userName: operator,
        attestationType: "none",
        authenticatorSelection: { residentKey: "preferred", userVerification: "required" },
        supportedAlgorithmIDs: [-7],
        timeout: CEREMONY_MS,
      });
      ceremonies.open(options.challenge, operator);
      return options;
    },
    async verify(operator, response) {
      let verified: Awaited<ReturnType<typeof verifyRegistrationResponse>>;
      try {
        verified = await verifyRegistrationResponse({
          response,
          // Spent the moment it matches, whatever follows: a refused answer (another origin, no
          // user verification) throws, and the challenge must not wait for another answer.
          expectedChallenge: (challenge) => {
            if (ceremonies.get(challenge) !== operator) return false;
            ceremonies.spend(challenge);
            return true;
          },
          expectedOrigin: rp.origin,
          expectedRPID: rp.rpId,
          requireUserVerification: true,
          supportedAlgorithmIDs: [-7],
        });
      } catch (cause) {
        return doesNotVerify(
          cause instanceof Error ? cause.message : "the registration response does not verify",
        );
      }
      if (!verified.verified) return doesNotVerify("the registration response does not verify");
      const publicKey = coseToUncompressedP256(verified.registrationInfo.credential.publicKey);
      if (publicKey === null) return doesNotVerify("the passkey's key is not P-256 (ES256)");
      const passkey = {
        credentialId: verified.registrationInfo.credential.id,
        keyId: passkeyKeyId(publicKey),
        operator,
        publicKey,
        rpId: rp.rpId,
        origin: rp.origin,
      };
      return savePendingPasskey(db, passkey);
    },
  };
}

function doesNotVerify(message: string): { ok: false; error: RegistrationRefusal } {
  return err({ code: "does_not_verify", message });
}
