/**
 * Capability providers: the origin's key-pool worker holds the admin authority key
 * (a file path in config) and mints a capability per privileged request, asking the enclave for
 * the next contiguous counter first. The key is read from disk when first needed, never logged.
 * Every capability names the instance id of the enclave it is for (shared/capability.ts): the
 * minter asks the enclave it talks to (get_sealed_identity) once, before its first capability,
 * and keeps it, so a minter made for one enclave never mints for a replacement.
 */

import { authorityPublicKey, type Capability, mintCapability } from "../../shared/capability.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import { PRIVILEGED_OP_SCOPE } from "../../shared/enclave-protocol.ts";
import { errorMessage } from "../../shared/error-message.ts";
import { fromHex } from "../../shared/hex.ts";
import { err, ok } from "../../shared/result.ts";
import { CLIENT_FAILURE, signerFailure } from "./failure-class.ts";
import { readPrivateKeyFile } from "./private-key-file.ts";
import type { CapabilityProvider, SignerClient, SignerResult } from "./types.ts";

/** Reads an authority key file written by ops/enclave-authority.ts (32-byte hex seed). */
export async function readAuthoritySecret(path: string): Promise<Uint8Array> {
  const text = (await readPrivateKeyFile(path)).trim();
  const secret = fromHex(text);
  if (secret.length !== 32) throw new Error("authority key file must hold a 32-byte hex seed");
  return secret;
}

export type CapabilityMinterOptions = {
  /** The authority seed, or a path to its key file. */
  authority: Uint8Array | { keyPath: string };
  envId: string;
  chainId?: number;
  /** Used only for `capability_counter` and `get_sealed_identity`, unprivileged ops. */
  client: Pick<SignerClient, "capabilityCounter" | "getSealedIdentity">;
  requestId?: () => string;
};

/** A provider that mints with the next counter the enclave expects for (authority, op). */
export function createCapabilityMinter(options: CapabilityMinterOptions): CapabilityProvider {
  let secret: Promise<Uint8Array> | null = null;
  const loadSecret = (): Promise<Uint8Array> => {
    const { authority } = options;
    secret ??=
      authority instanceof Uint8Array ? Promise.resolve(authority) : readAuthoritySecret(authority.keyPath);
    return secret;
  };
  let instanceId: string | null = null;
  const loadInstanceId = async (): Promise<SignerResult<string>> => {
    if (instanceId !== null) return ok(instanceId);
    const identity = await options.client.getSealedIdentity();
    if (!identity.ok) return identity;
    instanceId = identity.value.instanceId;
    return ok(instanceId);
  };
  return async ({ op, params }): Promise<SignerResult<Capability>> => {
    let authoritySecret: Uint8Array;
    try {
      authoritySecret = await loadSecret();
    } catch (error) {
      secret = null;
      const reason = `authority key unavailable: ${errorMessage(error)}`;
      return err(signerFailure(CLIENT_FAILURE.capabilityUnavailable, reason));
    }
    const instance = await loadInstanceId();
    if (!instance.ok) return instance;
    const next = await options.client.capabilityCounter({
      authority: authorityPublicKey(authoritySecret),
      scope: PRIVILEGED_OP_SCOPE[op],
      op,
    });
    if (!next.ok) return next;
    const capability = mintCapability({
      authoritySecret,
      op,
      params,
      requestId: options.requestId?.() ?? `${op}-${crypto.randomUUID()}`,
      chainId: options.chainId ?? CHAIN_ID,
      envId: options.envId,
      instanceId: instance.value,
      counter: next.value.nextCounter,
    });
    return ok(capability);
  };
}

/** A provider returning a capability minted elsewhere (an operator's offline recovery key). */
export function fixedCapability(capability: Capability): CapabilityProvider {
  return async () => ok(capability);
}
