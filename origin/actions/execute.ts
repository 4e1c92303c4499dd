/**
 * Executes a `requested` faucet payout or transfer (SPEC "States and transitions / Agent action"):
 * the checks that need locks, the enclave's signature, the signed bytes stored, then the
 * broadcast. Three short steps, each safe to crash in:
 *   1. (the caller) the action is committed as `requested` before anything is signed;
 *   2. one transaction holds the action and the sender's nonce row: checks, nonce, signature, the
 *      transaction stored, action `signed`. The nonce row lock serialises everything one sender
 *      does, so checks that count the sender's past (limits, balance) see every earlier signing;
 *   3. the stored bytes are broadcast under the transaction's row lock (chain/outgoing.ts).
 * A crash in 2 leaves the action `requested` with nothing signed that escaped (a retry or the
 * tracker runs it again); a crash after 2 leaves it `signed`, and the tracker sends the same
 * bytes. Nothing is ever signed twice for one stored transaction.
 */
import { CHAIN_ID, WEI_PER_UNIT } from "../../shared/constants.ts";
import { costUnits } from "../../shared/fees.ts";
import type { Hex } from "../../shared/hex.ts";
import type { FeeOracle, Fees } from "../chain/fees.ts";
import { NATIVE_TRANSFER_GAS } from "../chain/fees.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import {
  type BroadcastLease,
  type BroadcastOutcome,
  broadcastLeased,
  readBalance,
  readSenderView,
  recordSigned,
  type SenderView,
  type TxPurpose,
} from "../chain/outgoing.ts";
import type { Db } from "../db/client.ts";
import type { Clock } from "../deps.ts";
import type { ErrorCode } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type {
  SignerFailure,
  SignerResult,
  SignTransactionParams,
  SignTransactionResult,
} from "../signer/types.ts";
import { lockRequestedWithNonce, markFailed, noteRetryable } from "./repository.ts";

/** A refusal the agent is told about, in the gateway's error envelope. */
export type Refusal = {
  code: ErrorCode;
  message: string;
  fields?: Record<string, string | number>;
  headers?: Record<string, string>;
};

export type ExecutorDeps = {
  db: Db;
  rpc: JsonRpcUpstream;
  fees: FeeOracle;
  clock: Clock;
  logger: Logger;
  /** Called once a transaction is in flight, so the tracker looks for its receipt soon. */
  onInFlight?: () => void;
  /** How long a broadcast lease lasts (chain/outgoing.ts broadcastLeaseMs). */
  leaseMs: number;
  /** Fault injection for crash tests only (scripts/test/money-crash-origin.ts); never set otherwise. */
  faults?: ExecutorFaults;
};

export type ExecutorFaults = {
  /** After the signed transaction is committed, before it is broadcast. */
  afterSigned?: () => void;
  /** After the chain accepted the broadcast, before anything waits for the receipt. */
  afterBroadcast?: () => void;
};

/** What the checks under the locks see. */
export type CheckContext = {
  /** The sender's mined nonce and balance, read before the locks (chain/outgoing.ts). */
  sender: SenderView;
  fees: Fees;
  /** Value plus the maximum fee of this transaction, in wei and in units (rounded up). */
  costWei: bigint;
  costUnits: bigint;
  /** The recipient's balance, in wei, when the operation asked for it. */
  recipientBalanceWei: bigint | undefined;
  now: Date;
};

export type MoneyOperation = {
  actionId: string;
  agentId: string;
  purpose: Extract<TxPurpose, "faucet" | "transfer">;
  /** The address that signs and pays, and its key in the enclave. */
  sender: { address: string; keyRef: string };
  to: string;
  valueUnits: bigint;
  /** Read the recipient's balance for the checks (the faucet's funding gate needs it). */
  readRecipientBalance?: boolean;
  /**
   * The checks that need the locks, with what they read in one statement (after the locks, so it
   * sees every earlier signing of this sender); null lets the operation go on.
   */
  check: (tx: Db, context: CheckContext) => Promise<Refusal | null>;
  sign: (params: SignTransactionParams) => Promise<SignerResult<SignTransactionResult>>;
  /** Turns a signer refusal (not a transport failure) into what the agent is told. */
  signerRefusal: (failure: SignerFailure) => Refusal;
};

export type ExecuteOutcome =
  /** Signed and stored; `broadcast` says how the chain took it. */
  | { kind: "signed"; lease: BroadcastLease; broadcast: BroadcastOutcome | undefined }
  /** Refused; the action is now `failed` with the refusal's code. */
  | { kind: "refused"; refusal: Refusal }
  /** Could not be done now (signer or chain unreachable); the action stays `requested`. */
  | { kind: "unavailable"; refusal: Refusal }
  /** Another request or the tracker is executing this action right now. */
  | { kind: "busy" };

class SignerUnavailable extends Error {}

/** Runs steps 2 and 3 for one requested action. */
export async function executeMoneyOperation(
  deps: ExecutorDeps,
  operation: MoneyOperation,
): Promise<ExecuteOutcome> {
  // Read before the transaction, so no database lock is held across these calls (see
  // readSenderView for why a stale view can only err towards refusing).
  const quote = await deps.fees.quote(NATIVE_TRANSFER_GAS);
  if (!quote.ok) {
    return unavailable(
      deps,
      operation,
      quote.reason === "chain_unavailable"
        ? chainDown()
        : {
            code: "service_unavailable",
            message: `${quote.detail}; try again later`,
          },
    );
  }
  const sender = await readSenderView(deps.rpc, operation.sender.address);
  if (!sender) return unavailable(deps, operation, chainDown());
  const recipientBalanceWei = operation.readRecipientBalance
    ? await readBalance(deps.rpc, operation.to)
    : undefined;
  if (operation.readRecipientBalance && recipientBalanceWei === undefined)
    return unavailable(deps, operation, chainDown());
  const fees = quote.fees;
  const cost = costUnits({
    valueUnits: operation.valueUnits,
    gasLimit: fees.gasLimit,
    maxFeePerGas: fees.maxFeePerGas,
  });
  const costWei = operation.valueUnits * WEI_PER_UNIT + fees.gasLimit * fees.maxFeePerGas;

  let outcome: ExecuteOutcome;
  try {
    outcome = await deps.db.transaction(async (tx): Promise<ExecuteOutcome> => {
      const locked = await lockRequestedWithNonce(tx, operation.actionId, {
        address: operation.sender.address,
        minedNonce: sender.minedNonce,
      });
      if (!locked) return { kind: "busy" };
      const nonce = locked.nextNonce;
      const context: CheckContext = {
        sender,
        fees,
        costWei,
        costUnits: cost,
        recipientBalanceWei,
        now: deps.clock.now(),
      };
      const refusal = await operation.check(tx, context);
      if (refusal) {
        await markFailed(tx, operation.actionId, refusal.code, refusal.message);
        return { kind: "refused", refusal };
      }
      const result = await operation.sign({
        keyRef: operation.sender.keyRef,
        chainId: CHAIN_ID,
        to: operation.to as Hex,
        valueUnits: operation.valueUnits,
        nonce,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        gasLimit: fees.gasLimit,
      });
      if (!result.ok) {
        // Nothing signed, or nothing that left the enclave for good: undo the nonce and keep the
        // action requested, so the retry the agent is told is safe can run it.
        if (result.error.class === "retryable") throw new SignerUnavailable(result.error.reason);
        const signerRefused = operation.signerRefusal(result.error);
        await markFailed(tx, operation.actionId, signerRefused.code, signerRefused.message);
        deps.logger.warn(
          { action_id: operation.actionId, code: result.error.code, class: result.error.class },
          "enclave refused to sign",
        );
        return { kind: "refused", refusal: signerRefused };
      }
      const lease = await recordSigned(
        tx,
        {
          purpose: operation.purpose,
          sender: operation.sender.address,
          nonce,
          txHash: result.value.txHash,
          rawTx: result.value.rawTransaction,
          maxCostWei: costWei,
        },
        { leaseMs: deps.leaseMs, actionId: operation.actionId, costUnits: cost },
      );
      return { kind: "signed", lease, broadcast: undefined };
    });
  } catch (error) {
    if (!(error instanceof SignerUnavailable)) throw error;
    return unavailable(deps, operation, {
      code: "agent_signer_unavailable",
      message: "the signer is unreachable; nothing was signed and a retry is safe",
    });
  }
  if (outcome.kind !== "signed") return outcome;
  deps.faults?.afterSigned?.();
  const broadcast = await broadcastLeased(deps.db, deps.rpc, outcome.lease);
  if (broadcast?.kind === "accepted") deps.faults?.afterBroadcast?.();
  if (broadcast?.kind !== "refused") deps.onInFlight?.();
  if (broadcast?.kind === "refused") {
    deps.logger.warn(
      { action_id: operation.actionId, reason: broadcast.reason },
      "chain refused a signed transaction",
    );
  }
  return { ...outcome, broadcast };
}

async function unavailable(
  deps: ExecutorDeps,
  operation: MoneyOperation,
  refusal: Refusal,
): Promise<ExecuteOutcome> {
  await noteRetryable(deps.db, operation.actionId, refusal.code, refusal.message);
  return { kind: "unavailable", refusal };
}

function chainDown(): Refusal {
  return {
    code: "upstream_unavailable",
    message: "the chain is unreachable; nothing was signed and a retry is safe",
  };
}
