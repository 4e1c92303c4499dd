/** Parsing of AGENT_SIGNER_SVC_HSM_ENDPOINT, a `unix://` path (docs/configuration.md#variables). */
import { resolve } from "node:path";

/** Thrown at boot for an endpoint that is not `unix://PATH`. */
export class SignerEndpointError extends Error {
  override readonly name = "SignerEndpointError";
}

/**
 * `unix:///abs/path` → `/abs/path`; `unix://rel/path` resolves against the working directory, so
 * the local stack can say `unix://.data/enclave.sock`.
 */
export function socketPathOfEndpoint(endpoint: string): string {
  const prefix = "unix://";
  if (!endpoint.startsWith(prefix) || endpoint.length === prefix.length) {
    throw new SignerEndpointError(
      "AGENT_SIGNER_SVC_HSM_ENDPOINT must look like unix:///path/to/enclave.sock",
    );
  }
  const path = decodeURIComponent(endpoint.slice(prefix.length));
  return path.startsWith("/") ? path : resolve(path);
}
