/**
 * A signer call that failed before the enclave answered (no socket, a timeout, a dropped
 * connection: the client's retryable class) is no refusal by the enclave. The operator tools end
 * it as an error, not as refused (docs/operations.md#exit-codes-of-the-operator-tools).
 */
import { CLIENT_FAILURE } from "../../origin/signer/failure-class.ts";
import { createSocketSignerClient } from "../../origin/signer/socket-client.ts";
import type { SignerClient, SignerFailure, SignerResult } from "../../origin/signer/types.ts";
import { err } from "../../shared/result.ts";

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

/**
 * `client` whose failures to reach the enclave at all (no socket, nobody listening) also say where
 * the tool looked and what to check. The transport's own words stay as they are for the gateway,
 * whose answers reach agents; an operator tool runs on the node, where the path is the operator's.
 */
export function withSocketHint(client: SignerClient, socketPath: string): SignerClient {
  const hint = `at ${socketPath}: is the stack started (npm start)? Another socket is --socket PATH or AGENT_SIGNER_SVC_HSM_ENDPOINT`;
  return new Proxy(client, {
    get(target, name, receiver) {
      const member: unknown = Reflect.get(target, name, receiver);
      if (typeof member !== "function" || name === "close") return member;
      return async (...args: unknown[]) => {
        const result = await (member as (...args: unknown[]) => Promise<SignerResult<unknown>>).apply(
          target,
          args,
        );
        if (result.ok || result.error.code !== CLIENT_FAILURE.unreachable) return result;
        return err({ ...result.error, reason: `${result.error.reason} ${hint}` });
      };
    },
  });
}

/** The operator tools' client of the enclave at `socketPath` (withSocketHint). */
export function operatorSignerClient(socketPath: string): SignerClient {
  return withSocketHint(createSocketSignerClient({ socketPath }), socketPath);
}
