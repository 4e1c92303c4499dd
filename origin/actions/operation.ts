/**
 * What the money domain hands its outbox kind (execute.ts): one operation (a faucet payout or a
 * transfer) with its pure checks and its signer op, and what the executor answers. Types only, so
 * the kind, its statements (batch-store.ts) and the handlers share them without importing one
 * another.
 */
import type { AgentPolicy, PolicyUsage } from "../../shared/agent-policy.ts";
import type { Refusal } from "../agent-actions/refusal.ts";
import type { ActionRow } from "../agent-actions/repository.ts";
import type { Fees } from "../chain/fees.ts";
import type { WalletGateRow } from "../funding/gate.ts";
import type { SenderView, TxPurpose } from "../outbox/index.ts";
import type { SignerFailure } from "../signer/types.ts";

/** What an operation's checks see, read under the locks, counting earlier operations of its batch. */
export type CheckFacts = {
  /** The sender's mined nonce and balance, read while the batch took its locks (outbox/intent.ts). */
  sender: SenderView;
  fees: Fees;
  /** Value plus the maximum fee of this transaction, in wei and in units (rounded up). */
  costWei: bigint;
  costUnits: bigint;
  /**
   * What the sender's transactions above the view's mined nonce can still take from it: those the
   * view's balance does not count yet, whatever their row says now (one mined since the view was
   * read may already be recorded `confirmed`). A refused one (`failed`) takes nothing.
   */
  inFlightWei: bigint;
  /** Units the agent's transfers signed today count against its daily limit. */
  transferSpentUnits: bigint;
  /**
   * The agent's faucet payouts: units signed today, and how long ago the latest was signed, in ms,
   * by the database's clock, which stamps it (null: never).
   */
  faucet: { totalTodayUnits: bigint; sinceLastMs: number | null };
  /** The funding gate's facts of the sender's wallet (null: not one of the service's agent wallets). */
  senderGate: WalletGateRow | null;
  /**
   * The funding gate's facts of the recipient (null: not one of the service's agent wallets, such
   * as an outside address).
   */
  recipientGate: WalletGateRow | null;
  /**
   * What the recipient will hold before this operation adds to it, in wei: its balance on chain,
   * read behind the locks, plus what the service's transactions still in flight and the batch's
   * operations admitted before this one bring it. Known only when a pre-restore ceiling applies to
   * the recipient (funding/gate.ts ceilingApplies), the only case in which the gate reads it, and
   * the chain answered; undefined otherwise.
   */
  recipientBalanceWei: bigint | undefined;
  /**
   * The agent's spending policy and what its transfers used of its windows (UTC day and month),
   * counting earlier operations of the batch; null for an agent without one.
   */
  policy: { policy: AgentPolicy; usage: PolicyUsage["transfers"] } | null;
  /** An operator froze every agent of the node. */
  nodeFrozen: boolean;
  now: Date;
};

/**
 * What a check answers when the agent's policy asks an operator's approval first: the action is
 * stored `held` with the rule, nothing signed, and ends `expired` `holdSeconds` after it is stored
 * unless approved. The end is stamped by the database, whose clock the sweep that ends it reads
 * (agent-actions/holds.ts), never by the origin's.
 */
export type Held = { held: { rule: string; holdSeconds: number } };

/**
 * What a check answers when a fact it needs could not be read (the chain did not give the balance
 * of a recipient under a ceiling): not a decision about the request. Nothing is signed, the action
 * stays `requested` with the refusal noted, and the agent is answered as when the chain is down for
 * the whole batch: a retry with the same key runs it again. Also an approved transfer whose agent
 * was disabled meanwhile: it stays `approved`, and waits for the agent (transfers.ts).
 */
export type NotNow = { notNow: Refusal };

/** A refusal, a hold, or not now: the three ways a check stops an operation. */
export type Stop = Refusal | Held | NotNow;

export function isHeld(stop: Stop): stop is Held {
  return "held" in stop;
}

export function isNotNow(stop: Stop): stop is NotNow {
  return "notNow" in stop;
}

export type MoneyOperation = {
  actionId: string;
  agentId: string;
  purpose: Extract<TxPurpose, "faucet" | "transfer">;
  /** The address that signs and pays, and its key in the enclave. */
  sender: { address: string; keyRef: string };
  to: string;
  valueUnits: bigint;
  /**
   * An operator approved this held action (its approval sealed in the enclave): the policy's
   * approval rule no longer holds it; every other rule still applies.
   */
  approved: boolean;
  /** Null lets the operation go on. */
  check: (facts: CheckFacts) => Stop | null;
  /** The enclave op that signs it: the sender's key, under that op's sealed budget. */
  signerOp: "signTransfer" | "signFaucet";
  /**
   * Turns the enclave's refusal under its sealed policy into what the agent is told, when it is a
   * decision about this request (a limit, a budget, a cooldown, the key's binding): final for the
   * key. Null when it is the service's state (the node configured unlike the sealed policy, a fee
   * spike over the sealed ceiling): the action then stays `requested` (refusesThisRequest). A hold:
   * an approved transfer whose approval the enclave no longer holds is stored `held` again.
   */
  signerRefusal: (failure: SignerFailure) => Refusal | Held | null;
};

export type ExecuteOutcome =
  /**
   * Signed and stored, the action as the statement that stored it returned it; the broadcast lane
   * sends it (and the tracker, should that fail).
   */
  | { kind: "signed"; action: ActionRow }
  /** Refused, a decision about this request; the action is now `failed` with the refusal's code. */
  | { kind: "refused"; refusal: Refusal }
  /** The agent's policy holds it for an operator's approval: stored `held`, nothing signed. */
  | { kind: "held" }
  /**
   * Could not be done now for the service's own reasons (the signer or the chain, see
   * refusesThisRequest); nothing was signed and the action stays `requested` for a retry.
   */
  | { kind: "unavailable"; refusal: Refusal }
  /** Another request or the tracker is executing this action right now. */
  | { kind: "busy" };

export type MoneyExecutor = { execute(operation: MoneyOperation): Promise<ExecuteOutcome> };

export type { Refusal };
