/**
 * What a node's answer to eth_sendRawTransaction proves (docs/architecture.md#what-a-broadcast-answer-proves).
 *
 * Some endpoints answer with an error after they have taken the transaction: geth's own "request
 * timed out" while its pool still adds it, or a load balancer that retried the call on a node that
 * had already mined it ("nonce too low"). So an answer is one of three:
 *   - accepted: a transaction hash;
 *   - refused: a validation error about the transaction itself, which proves the node that answered
 *     did not take these bytes (and says nothing of another node behind the same address);
 *   - unknown: anything else (a timeout, a gateway error, a batch item missing, "nonce too low",
 *     "already known", a full or underpriced pool, words we do not know).
 * Neither refused nor unknown ends a transaction: only the chain does, once the sender's mined
 * nonce has passed it (outbox/decide.ts). What the class changes is how soon the tracker replaces a
 * stuck transaction with a filler: a refused one at once, an unknown one after a wait.
 *
 * The refusals are listed by node, in each node's own words (matched case-insensitively inside the
 * message, since nodes add their figures and prefixes): geth (core/txpool/errors.go, core/error.go),
 * Nethermind (TxPoolErrorMessages, and the older `AcceptTxResult` names), Erigon (txpoolcfg's
 * discard reasons, behind its import-result prefix), reth (its RPC transaction errors) and our
 * devnet (devnet/rpc/errors.ts, in geth's words). broadcast-answers.test.ts holds one real message of
 * each per node.
 */
import { err } from "../../shared/result.ts";
import { text } from "../chain/eth-calls.ts";
import { type RpcCallResult, readRpcAnswer } from "../chain/json-rpc-call.ts";
import type { BroadcastOutcome } from "./intent.ts";

type Wording = { node: "geth" | "nethermind" | "erigon" | "reth" | "devnet"; words: readonly string[] };

/**
 * Validation errors about the transaction itself: its balance, gas, fees, signature, chain, type or
 * size. Each proves the answering node did not take the bytes.
 */
export const REFUSAL_WORDINGS: readonly Wording[] = [
  {
    node: "geth",
    words: [
      "insufficient funds for gas * price + value",
      "intrinsic gas too low",
      "max fee per gas less than block base fee",
      "max priority fee per gas higher than max fee per gas",
      "invalid sender",
      "invalid chain id",
      "transaction type not supported",
      "exceeds block gas limit",
      "oversized data",
      "negative value",
      "gas uint64 overflow",
      "only replay-protected (eip-155) transactions allowed over rpc",
      "sender not an eoa",
      "exceeds the configured cap",
      "max initcode size exceeded",
    ],
  },
  {
    node: "nethermind",
    words: [
      "insufficient funds for gas * price + value",
      "insufficientfunds",
      "gas limit reached",
      "gaslimitexceeded",
      "failed to recover sender",
      "failedtoresolvesender",
      "transaction cost overflow",
      "int256overflow",
      "transaction invalid",
      "invalid,",
      "sender not an eoa",
      "senderiscontract",
      "unsupported transaction type",
      "transaction too large",
    ],
  },
  {
    node: "erigon",
    words: [
      "insufficient funds",
      "intrinsic gas too low",
      "invalid sender",
      "oversized data",
      "rlp too long",
      "gasuintoverflow",
      "exceeds block gas limit",
      "initcode too large",
      "fork supporting this transaction type is not activated yet",
    ],
  },
  {
    node: "reth",
    words: [
      "insufficient funds for gas * price + value",
      "insufficient funds for transfer",
      "intrinsic gas too low",
      "intrinsic gas too high",
      "max fee per gas less than block base fee",
      "max priority fee per gas higher than max fee per gas",
      "invalid chain id",
      "transaction type not supported",
      "exceeds block gas limit",
      "oversized data",
      "exceeds the configured cap",
      "sender not an eoa",
    ],
  },
  {
    node: "devnet",
    words: [
      "invalid transaction:",
      "transaction type not supported",
      "only replay-protected (eip-155) transactions allowed over rpc",
      "invalid sender",
      "intrinsic gas too low",
      "exceeds block gas limit",
      "max fee per gas less than block base fee",
      "insufficient funds for gas * price + value",
    ],
  },
];

const REFUSALS: readonly string[] = [...new Set(REFUSAL_WORDINGS.flatMap((wording) => wording.words))];

/** The outcome of one eth_sendRawTransaction call, as json-rpc-call.ts read the node's answer. */
export function classifyBroadcast(answer: RpcCallResult<string>): BroadcastOutcome {
  if (answer.ok) return { kind: "accepted" };
  const failure = answer.error;
  switch (failure.code) {
    case "upstream":
      return { kind: "unknown", reason: `chain ${failure.failure}` };
    case "missing":
      return { kind: "unknown", reason: "no answer for this transaction" };
    case "unparseable":
      return { kind: "unknown", reason: "no result" };
    case "rpc_error": {
      const message = failure.error.message;
      return isRefusal(message) ? { kind: "refused", reason: message } : { kind: "unknown", reason: message };
    }
  }
}

/**
 * The outcome of one raw JSON-RPC answer object to eth_sendRawTransaction (an item of a batch, or
 * the whole answer), read as a call's answer is; undefined when the node left the item out of its
 * batch answer. The answers in the nodes' own words are tested through it.
 */
export function classifyBroadcastAnswer(answer: unknown): BroadcastOutcome {
  if (answer === undefined) return classifyBroadcast(err({ code: "missing" }));
  return classifyBroadcast(readRpcAnswer(text, answer));
}

/** Whether a node's error message is a validation error about the transaction itself. */
export function isRefusal(message: string): boolean {
  const lower = message.toLowerCase();
  return REFUSALS.some((words) => lower.includes(words));
}
