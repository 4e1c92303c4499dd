import { describe, expect, it } from "vitest";
import { classifyBroadcastAnswer, isRefusal } from "./broadcast-answers.ts";

// One real answer per node and case, in the node's own words (figures as the nodes print them).
// A refusal is a validation error about the transaction itself; everything else, including the
// answers of a node that may have taken the bytes, is unknown (docs/architecture.md).
const refusals: Array<[node: string, message: string]> = [
  ["geth", "insufficient funds for gas * price + value: address 0x71C7 have 0 want 2100000000000000"],
  ["geth", "intrinsic gas too low: gas 20000, minimum needed 21000"],
  ["geth", "max fee per gas less than block base fee: address 0x71C7, maxFeePerGas: 1 baseFee: 7"],
  [
    "geth",
    "max priority fee per gas higher than max fee per gas: address 0x71C7, maxPriorityFeePerGas: 2, maxFeePerGas: 1",
  ],
  ["geth", "invalid sender"],
  ["geth", "invalid chain id for signer: have 1 want 77"],
  ["geth", "transaction type not supported"],
  ["geth", "exceeds block gas limit"],
  ["geth", "oversized data: transaction size 131073, limit 131072"],
  ["geth", "only replay-protected (EIP-155) transactions allowed over RPC"],
  ["geth", "tx fee (1.20 ether) exceeds the configured cap (1.00 ether)"],
  ["nethermind", "insufficient funds for gas * price + value"],
  ["nethermind", "InsufficientFunds, Account balance: 0, cumulative cost: 21000000000000"],
  ["nethermind", "gas limit reached"],
  ["nethermind", "GasLimitExceeded, Gas limit: 30000000, gas limit of rejected tx: 40000000"],
  ["nethermind", "failed to recover sender"],
  ["nethermind", "transaction invalid: IntrinsicGasTooLow"],
  ["nethermind", "Invalid, IntrinsicGasTooLow"],
  ["nethermind", "Int256Overflow"],
  ["nethermind", "unsupported transaction type"],
  ["erigon", "INVALID: insufficient funds"],
  ["erigon", "intrinsic gas too low"],
  ["erigon", "RLP too long"],
  ["erigon", "fork supporting this transaction type is not activated yet"],
  ["reth", "insufficient funds for gas * price + value: have 0 want 21000000000000"],
  ["reth", "intrinsic gas too low"],
  ["reth", "max fee per gas less than block base fee"],
  ["reth", "invalid chain id"],
  ["reth", "tx fee (2 ether) exceeds the configured cap (1 ether)"],
  ["devnet", "invalid transaction: invalid RLP"],
  ["devnet", "insufficient funds for gas * price + value: balance 0, tx cost 1, overshot 1"],
  ["devnet", "max fee per gas less than block base fee: address 0xabc, maxFeePerGas: 1, baseFee: 7"],
  ["devnet", "intrinsic gas too low: gas 20000, minimum needed 21000"],
];

const unknowns: Array<[node: string, message: string]> = [
  ["geth", "request timed out"],
  ["geth", "nonce too low: address 0x71C7, tx: 3 state: 4"],
  ["geth", "already known"],
  ["geth", "transaction underpriced: tip needed 1, tip permitted 0"],
  ["geth", "replacement transaction underpriced"],
  ["geth", "txpool is full"],
  ["geth", "nonce too high"],
  ["nethermind", "OldNonce, Current nonce: 4, nonce of rejected tx: 3"],
  ["nethermind", "AlreadyKnown"],
  ["nethermind", "FeeTooLow, MaxFeePerGas too low"],
  ["nethermind", "NonceGap, Future nonce. Expected nonce: 4"],
  ["nethermind", "node is syncing"],
  ["erigon", "ALREADY_EXISTS: already known"],
  ["erigon", "nonce too low"],
  ["erigon", "FEE_TOO_LOW: fee too low"],
  ["reth", "nonce too low: next nonce 4, tx nonce 3"],
  ["reth", "replacement transaction underpriced"],
  ["reth", "txpool is full"],
  ["devnet", "already known"],
  ["devnet", "nonce too low: next nonce 1, tx nonce 0"],
  ["devnet", "replacement transaction underpriced"],
  ["a load balancer", "upstream connect error or disconnect/reset before headers"],
  ["a load balancer", "502 Bad Gateway"],
];

describe("what a node's answer to a broadcast proves", () => {
  it.each(refusals)("%s: %s is a refusal", (_node, message) => {
    expect(isRefusal(message)).toBe(true);
    expect(classifyBroadcastAnswer({ jsonrpc: "2.0", id: 1, error: { code: -32000, message } })).toEqual({
      kind: "refused",
      reason: message,
    });
  });

  // Mutation: reading "nonce too low" or "request timed out" as a refusal (the code before this
  // table did for every message it did not know) fails these.
  it.each(unknowns)("%s: %s is unknown", (_node, message) => {
    expect(isRefusal(message)).toBe(false);
    expect(classifyBroadcastAnswer({ jsonrpc: "2.0", id: 1, error: { code: -32000, message } })).toEqual({
      kind: "unknown",
      reason: message,
    });
  });

  it("reads a hash as accepted, and a batch item left out, or an answer with neither, as unknown", () => {
    expect(classifyBroadcastAnswer({ jsonrpc: "2.0", id: 1, result: `0x${"ab".repeat(32)}` })).toEqual({
      kind: "accepted",
    });
    expect(classifyBroadcastAnswer(undefined)).toEqual({
      kind: "unknown",
      reason: "no answer for this transaction",
    });
    expect(classifyBroadcastAnswer({ jsonrpc: "2.0", id: 1 })).toEqual({
      kind: "unknown",
      reason: "no result",
    });
    expect(
      classifyBroadcastAnswer({
        jsonrpc: "2.0",
        id: 1,
        error: { code: -32002, message: "request timed out" },
      }),
    ).toEqual({ kind: "unknown", reason: "request timed out" });
  });
});
