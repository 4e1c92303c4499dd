/**
 * A signer call that failed before the enclave answered (no socket, a timeout, a dropped
 * connection: the client's retryable class) is no refusal by the enclave. The operator tools end
 * it as an error, not as refused (docs/operations.md#exit-codes-of-the-operator-tools).
 */
import type { SignerFailure } from "../../origin/signer/types.ts";

export function enclaveUnreachable(failure: SignerFailure): boolean {
  return failure.class === "retryable";
}

/**
 * What an operator reads of a failed signer call: the op, the failure's code and the enclave's (or
 * the socket's) words, which say what to fix where the code alone does not (which key, which file).
 */
export function signerFailureText(op: string, failure: SignerFailure): string {
  return `${op}: ${failure.code}: ${failure.reason}`;
}
