/**
 * A signer call that failed before the enclave answered (no socket, a timeout, a dropped
 * connection: the client's retryable class) is no refusal by the enclave. The operator tools end
 * it as an error, not as refused (docs/operations.md#exit-codes-of-the-operator-tools).
 */
import type { SignerFailure } from "../../origin/signer/types.ts";

export function enclaveUnreachable(failure: SignerFailure): boolean {
  return failure.class === "retryable";
}
