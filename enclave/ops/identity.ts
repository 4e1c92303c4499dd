/** public_identity and prove_identity (no capability): the proof of possession of a wallet's key. */
import type { KeyNamespace } from "../../shared/enclave-ops.ts";
import { fromHex } from "../../shared/hex.ts";
import { buildIdentityProofPreimage, identityProofDigest } from "../../shared/identity-proof.ts";
import { signDigest } from "../../shared/secp256k1.ts";
import { KEY_NOT_USABLE, succeed } from "../outcome.ts";
import { type OpHandler, publicInfo } from "./handler.ts";

export const publicIdentity: OpHandler<"public_identity"> = (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (!key) return KEY_NOT_USABLE;
  return succeed({
    ...publicInfo(key),
    // Every key set is written under a KEY_NAMESPACES name (generate, treasury, restore).
    namespace: key.namespace as KeyNamespace,
    batch_id: key.batchId,
    env_id: ctx.config.env_id,
    chain_id: ctx.config.chain_id,
  });
};

/**
 * Signs the preimage, built here from the sealed chain id and env id; the caller only
 * chooses the key and the nonce. The preimage cannot be a transaction or another message, so any
 * namespace may prove possession (the restore drill proves a restored key this way).
 */
export const proveIdentity: OpHandler<"prove_identity"> = (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (!key) return KEY_NOT_USABLE;
  const preimage = buildIdentityProofPreimage({
    chainId: ctx.config.chain_id,
    envId: ctx.config.env_id,
    keyRef: key.keyRef,
    publicKey: key.publicKey,
    address: key.address,
    verifierNonce: fromHex(params.verifier_nonce),
  });
  const { signature } = signDigest(identityProofDigest(preimage), key.privateKey);
  return succeed({ ...publicInfo(key), signature, env_id: ctx.config.env_id, chain_id: ctx.config.chain_id });
};
