/**
 * The factory the composition root (open-infrastructure.ts) calls: the live socket client, with identity proofs from the dormant stub
 * unless AGENT_SIGNER_LIVE_IDENTITY_ENABLED is set (docs/configuration.md#variables); with no
 * endpoint at all, a fully dormant signer.
 */
import type { Logger } from "pino";
import { createDormantIdentityStub, createDormantSignerClient } from "./dormant-stub.ts";
import { socketPathOfEndpoint } from "./endpoint.ts";
import type { KeyLookup } from "./key-holding.ts";
import { createSocketSignerClient } from "./socket-client.ts";
import type { SignerClient } from "./types.ts";

export type CreateSignerClientOptions = {
  /** AGENT_SIGNER_SVC_HSM_ENDPOINT, `unix:///path`; undefined → dormant signer. */
  endpoint: string | undefined;
  /** AGENT_SIGNER_LIVE_IDENTITY_ENABLED. */
  liveIdentityEnabled: boolean;
  requestTimeoutMs?: number;
  slowRequestTimeoutMs?: number;
  connectTimeoutMs?: number;
  backoff?: { initialMs: number; maxMs: number };
  logger?: Logger;
};

/** Builds the signer client; throws SignerEndpointError for a malformed endpoint (fail at boot). */
export function createSignerClient(options: CreateSignerClientOptions): SignerClient {
  return createSignerClients(options).signer;
}

/**
 * The signer client, and the enclave's own `public_identity` beside it: asking whether the enclave
 * holds a key is read-only, so it stays live while identity proofs are dormant (key-holding.ts).
 */
export function createSignerClients(options: CreateSignerClientOptions): {
  signer: SignerClient;
  keyLookup: KeyLookup | undefined;
} {
  if (!options.endpoint) return { signer: createDormantSignerClient(), keyLookup: undefined };
  const live = createSocketSignerClient({
    socketPath: socketPathOfEndpoint(options.endpoint),
    requestTimeoutMs: options.requestTimeoutMs,
    slowRequestTimeoutMs: options.slowRequestTimeoutMs,
    connectTimeoutMs: options.connectTimeoutMs,
    backoff: options.backoff,
    logger: options.logger,
  });
  const keyLookup = live.publicIdentity;
  if (options.liveIdentityEnabled) return { signer: live, keyLookup };
  return { signer: { ...live, ...createDormantIdentityStub() }, keyLookup };
}
