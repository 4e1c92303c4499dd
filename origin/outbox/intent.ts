/**
 * What the outbox speaks of: the purposes and states of the service's own transactions, what the
 * chain says of a sender, the right to broadcast a stored transaction, and how the chain answered a
 * broadcast or mined it. Types only, so every part of the outbox and the domains that hand it
 * intents share them without importing one another.
 */

export type TxPurpose = "faucet" | "transfer" | "settlement" | "filler";
export type TxStatus = "signed" | "submitted" | "confirmed" | "reverted" | "failed";

/**
 * What the chain says of a sender right now: its mined nonce and its balance, both at `latest`,
 * read in one JSON-RPC batch, nonce first (nodes, geth and the devnet, run a batch's calls in the
 * order listed). In that order a transaction mined between the two reads is both in the balance
 * and above the nonce, so it is counted twice as in flight (a refusal too many), never missed
 * (an overdraft).
 */
export type SenderView = { minedNonce: bigint; balanceWei: bigint };

/** The right to broadcast one stored transaction until its lease ends, with what to send. */
export type BroadcastLease = { txId: string; rawTx: string; txHash: string; status: TxStatus };

/**
 * How a node answered one broadcast (broadcast-answers.ts). None of them ends a transaction: the
 * chain does, once the sender's mined nonce has passed it (decide.ts).
 */
export type BroadcastOutcome =
  | { kind: "accepted" }
  /**
   * The node may or may not have taken the bytes (a timeout, a gateway error, no answer for it,
   * "nonce too low", "already known", a full pool): they may still be mined.
   */
  | { kind: "unknown"; reason: string }
  /** A validation error about the transaction: the node that answered did not take these bytes. */
  | { kind: "refused"; reason: string };

/** A receipt, as the tracker records it. */
export type MinedTransaction = {
  txId: string;
  status: "confirmed" | "reverted";
  feeWei: bigint;
  blockNumber: bigint;
};

/** What a receipt says of its transaction (no tx id yet). */
export type ReceiptOutcome = Omit<MinedTransaction, "txId">;
