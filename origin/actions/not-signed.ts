/**
 * What the money kind (execute.ts) tells the agent when an operation is not signed: which signer
 * failures are a decision about the request and which are the service's state, and what a retry
 * with the same key does.
 */
import type { FeeQuote } from "../chain/fees.ts";
import { CLIENT_FAILURE } from "../signer/failure-class.ts";
import type { SignerFailure } from "../signer/types.ts";
import { ABANDON_REQUESTED_AFTER_MS } from "./abandon.ts";
import type { Held, MoneyOperation, Refusal } from "./operation.ts";

/**
 * What every refusal that leaves the action `requested` tells the agent: what a retry does, and
 * for how long it can (the tracker abandons a `requested` action after that long untouched).
 */
const RETRY_WITH_SAME_KEY = `nothing was signed: retry with the same idempotency_key, which runs the request again (within ${
  ABANDON_REQUESTED_AFTER_MS / 60_000
} minutes of this answer; after that it is abandoned and needs a new key)`;

/** The chain did not answer a read the request needs: not now (503), the same key runs it again. */
export const CHAIN_DOWN: Refusal = {
  code: "chain_unavailable",
  message: `the chain is unreachable; ${RETRY_WITH_SAME_KEY}`,
};

/**
 * Which signer failures are a decision about this request, and which are the service's state.
 * Only the enclave's refusals under its sealed policy (class `terminal_agent`: `cap_exceeded`, a
 * limit or budget; `key_purpose_mismatch`, the key's binding; origin/signer/failure-class.ts) can
 * be final, and of those only what the operation's own mapping (`signerRefusal`) names a decision
 * about the request: the action ends `failed`, so a repeat of the key answers the same refusal.
 * Every other failure (the enclave unreachable, timed out, not configured, its sealed storage
 * failing, a capability it rejected, another protocol version, the node configured unlike the
 * sealed policy) says nothing about the request: nothing was signed, the action stays `requested`,
 * and a retry with the same key runs it again once the cause is gone.
 */
export function refusesThisRequest(operation: MoneyOperation, failure: SignerFailure): Refusal | Held | null {
  return failure.class === "terminal_agent" ? operation.signerRefusal(failure) : null;
}

/**
 * The 503 of a signer failure that is the service's state, not a decision about the request. A
 * timed-out request may still have been signed inside the enclave and counted against its sealed
 * daily limit (the count is durable before a signature leaves), though nothing of it was stored or
 * sent: the message says so, for an agent near its limit.
 */
export function signerUnavailable(failure: SignerFailure): Refusal {
  if (failure.code === CLIENT_FAILURE.timeout) {
    return {
      code: "agent_signer_unavailable",
      message: `the signer did not answer in time (${failure.code}): nothing was stored or sent, though a signature it made meanwhile may still count against the wallet's sealed daily limit; ${RETRY_WITH_SAME_KEY}`,
    };
  }
  const what =
    failure.class === "retryable"
      ? "the signer is unreachable"
      : `the signer cannot sign now${failure.detail ? ` (its sealed policy: ${failure.detail})` : ""}`;
  return { code: "agent_signer_unavailable", message: `${what} (${failure.code}); ${RETRY_WITH_SAME_KEY}` };
}

/** What the agent is told when the chain's answers stop the batch for now. */
export function chainRefusal(quote: FeeQuote): Refusal {
  return !quote.ok && quote.error.code === "above_fee_ceiling"
    ? { code: "service_unavailable", message: `${quote.error.detail}; ${RETRY_WITH_SAME_KEY}` }
    : CHAIN_DOWN;
}
