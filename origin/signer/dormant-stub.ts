/**
 * The dormant signer (docs/operations.md#switching-a-node-to-live-signing): with
 * AGENT_SIGNER_LIVE_IDENTITY_ENABLED unset, identity proofs answer
 * `agent_signer_protocol_unavailable`, which the sweep classes terminal_unknown and which leaves
 * every wallet intact.
 */
import { err } from "../../shared/result.ts";
import { CLIENT_FAILURE, signerFailure } from "./failure-class.ts";
import type { SignerClient, SignerResult } from "./types.ts";

const unavailable = async (): Promise<SignerResult<never>> =>
  err(signerFailure(CLIENT_FAILURE.protocolUnavailable, "the live enclave signer is not enabled"));

/** The identity ops of the dormant stub. */
export function createDormantIdentityStub(): Pick<SignerClient, "publicIdentity" | "proveIdentity"> {
  return { publicIdentity: unavailable, proveIdentity: unavailable };
}

/** A signer with no enclave at all (no endpoint configured): every op is unavailable. */
export function createDormantSignerClient(): SignerClient {
  return {
    generateKeys: unavailable,
    exportBackup: unavailable,
    verifyBackup: unavailable,
    restoreBackup: unavailable,
    loadRecoveryKey: unavailable,
    newTransportKey: unavailable,
    getSealedIdentity: unavailable,
    configureTreasury: unavailable,
    configurePolicy: unavailable,
    configureSettler: unavailable,
    configurePayee: unavailable,
    publicIdentity: unavailable,
    proveIdentity: unavailable,
    signTransfer: unavailable,
    signFaucet: unavailable,
    signX402Authorization: unavailable,
    signSettlement: unavailable,
    signFiller: unavailable,
    signX402Offer: unavailable,
    signX402Receipt: unavailable,
    capabilityCounter: unavailable,
    getPolicy: unavailable,
    setAgentPolicy: unavailable,
    setNodeFrozen: unavailable,
    enrollOperatorKey: unavailable,
    enrollOperatorPasskey: unavailable,
    revokeOperatorKey: unavailable,
    revokeOperatorPasskey: unavailable,
    approveHeld: unavailable,
    getAgentPolicy: unavailable,
    close: async () => undefined,
  };
}
