/**
 * Executes `requested` faucet payouts and transfers (docs/api.md#faucet-and-transfer-actions-states): the checks that need locks, the enclave's signature, the signed bytes stored, then the
 * broadcast. Three steps, each safe to crash in:
 *   1. (the caller) the action is committed as `requested` before anything is signed;
 *   2. one transaction holds the actions and their senders' nonce rows: checks, nonces,
 *      signatures, the transactions stored, actions `signed`. The nonce row lock serialises all one
 *      sender does, so the checks that count its past (limits, balance) see every earlier signing;
 *   3. the stored bytes are broadcast under a lease, in signing order (outbox/lane.ts).
 * A crash in 2 leaves actions `requested` with nothing signed that escaped (a retry or the tracker
 * runs them again); a crash after 2 leaves them `signed`, and the tracker sends the same bytes.
 * The request is answered after step 2: `signed` (202), with the transaction's hash. What follows
 * is the chain's pace, not the agent's wait: a node may take seconds to mine, and the answer's
 * promise (stored, sent in order, never signed again) holds from the commit on. GET
 * /actions/{id} follows the action to `confirmed`.
 *
 * Operations that arrive together run as one batch: one lock statement, one read of the facts the
 * checks need, one statement storing what was signed, one commit, one JSON-RPC batch of
 * broadcasts (a node mines them in one block).
 * Round trips between processes are what a transfer costs most here, so a batch pays them once.
 * Each sender's chain view (mined nonce and balance) is read as its operation queues, batched with
 * the others queueing then, so the read overlaps the wait for a batch instead of opening one.
 * Within a batch each sender's operations run in arrival order with running totals, so each sees
 * the ones before it exactly as if they had committed; different senders sign concurrently. Once a
 * batch has committed the next may start, while the broadcast lane sends this one's.
 */
import { CHAIN_ID, WEI_PER_UNIT } from "../../shared/constants.ts";
import { costUnits } from "../../shared/fees.ts";
import type { Hex } from "../../shared/hex.ts";
import { ethGetBalance } from "../chain/eth-calls.ts";
import type { FeeOracle, FeeQuote, Fees } from "../chain/fees.ts";
import { NATIVE_TRANSFER_GAS } from "../chain/fees.ts";
import { sendRpcBatch } from "../chain/json-rpc-call.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { Clock } from "../clock.ts";
import { createBatcher } from "../db/batcher.ts";
import type { Db } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import type { Outbox, OutboxSigningStep, SenderView, StoredIntent } from "../outbox/index.ts";
import { CLIENT_FAILURE } from "../signer/failure-class.ts";
import type { SignerFailure } from "../signer/types.ts";
import { ABANDON_REQUESTED_AFTER_MS } from "./abandon.ts";
import {
  type ChainView,
  type Facts,
  lockBatch,
  type MoneyBatch,
  moneyBatchStatements,
  moneyStoreValues,
  noteRetryable,
  readFacts,
} from "./batch-store.ts";
import type { ExecuteOutcome, MoneyExecutor, MoneyOperation, Refusal } from "./operation.ts";

export type ExecutorDeps = {
  db: Db;
  rpc: JsonRpcUpstream;
  fees: FeeOracle;
  clock: Clock;
  logger: Logger;
  /** The node's outbox: its batches store what was signed and send it, in order, once committed. */
  outbox: Pick<Outbox, "batch" | "room" | "senderView">;
};

/** At most this many operations share a batch. */
const MAX_BATCH = 64;
/**
 * Two batches at a time up to their commits: one can sign while the other waits for Postgres or
 * the chain read. They never interleave one sender's nonces: a batch holds its senders' nonce rows
 * until it commits, so a batch with a sender in common waits for the other's commit (and its
 * broadcasts are queued behind the other's). In bench:money (32 agents) two at once moved about
 * 5 % more transfers per second than one, for more CPU per transfer (smaller batches); more would
 * mostly wait on each other's locks. execute.int.test.ts "runs two batches at once without
 * interleaving a sender's nonces" holds the two to that.
 */
const MAX_IN_FLIGHT = 2;

/** An operation waiting for its batch, its sender's chain view already on its way. */
type Queued = { operation: MoneyOperation; senderView: Promise<SenderView | undefined> };

export function createMoneyExecutor(deps: ExecutorDeps): MoneyExecutor {
  const run = createBatcher<Queued, ExecuteOutcome>(
    async (queued) => {
      // A chain slower than signing holds the next batch here, before anything is signed.
      await deps.outbox.room();
      return signBatch(deps, queued);
    },
    { maxBatch: MAX_BATCH, maxInFlight: MAX_IN_FLIGHT },
  );
  return {
    execute: (operation) => run({ operation, senderView: deps.outbox.senderView(operation.sender.address) }),
  };
}

/**
 * What every refusal that leaves the action `requested` tells the agent: what a retry does, and
 * for how long it can (the tracker abandons a `requested` action after that long untouched).
 */
const RETRY_WITH_SAME_KEY = `nothing was signed: retry with the same idempotency_key, which runs the request again (within ${
  ABANDON_REQUESTED_AFTER_MS / 60_000
} minutes of this answer; after that it is abandoned and needs a new key)`;

const CHAIN_DOWN: Refusal = {
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
function refusesThisRequest(operation: MoneyOperation, failure: SignerFailure): Refusal | null {
  return failure.class === "terminal_agent" ? operation.signerRefusal(failure) : null;
}

/**
 * The 503 of a signer failure that is the service's state, not a decision about the request. A
 * timed-out request may still have been signed inside the enclave and counted against its sealed
 * daily limit (the count is durable before a signature leaves), though nothing of it was stored or
 * sent: the message says so, for an agent near its limit.
 */
function signerUnavailable(failure: SignerFailure): Refusal {
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

/** What signing the locked operations came to, before it is recorded. */
type Signing = {
  outcomes: (ExecuteOutcome | undefined)[];
  refused: { index: number; refusal: Refusal }[];
  /** The signer could not sign these for the service's own reasons: they stay `requested`. */
  unavailable: { index: number; refusal: Refusal }[];
};

/**
 * One outbox batch (outbox/batch.ts), its statements pipelined: `begin` and the lock of the
 * actions with their senders' nonce rows go out at once, with the chain read beside them; the
 * facts follow as soon as the chain has answered; then the signatures; then what was signed and
 * `commit`, in one more round trip. Once committed, the broadcast lane sends what was stored.
 */
async function signBatch(deps: ExecutorDeps, queued: Queued[]): Promise<ExecuteOutcome[]> {
  const now = deps.clock.now();
  const operations = queued.map((item) => item.operation);
  // No database lock waits on the chain beyond these reads (see SenderView for why a view read
  // before the locks, however long before, can only err towards refusing).
  const reads = Promise.all([deps.fees.quote(NATIVE_TRANSFER_GAS), readChain(deps.rpc, queued)]);
  const signing: Signing = { outcomes: new Array(operations.length), refused: [], unavailable: [] };
  type Batched = { down: Refusal } | { stored: StoredIntent<number>[] };
  const batched = await deps.outbox.batch(
    moneyBatchStatements,
    async (batch: MoneyBatch): Promise<Batched> => {
      const locks = lockBatch(batch, operations);
      locks.catch(() => {}); // awaited below, unless the chain ends the batch first
      const [quote, chain] = await reads;
      // Rolled back: nothing was claimed.
      if (!quote.ok || !chain) return { down: chainRefusal(quote) };
      const [locked, facts] = await Promise.all([locks, readFacts(batch, operations, chain, now)]);
      const signedCount = await signLocked(deps, batch, operations, signing, {
        locked,
        facts,
        chain,
        fees: quote.value,
        now,
      });
      return { stored: await batch.store(moneyStoreValues(operations, signedCount, signing.refused, now)) };
    },
  );
  if ("down" in batched) {
    const down = batched.down;
    await noteRetryable(deps.db, operations, down);
    return operations.map(() => ({ kind: "unavailable", refusal: down }));
  }
  const { outcomes, refused, unavailable } = signing;
  for (const { index, refusal } of refused) outcomes[index] = { kind: "refused", refusal };
  const byMessage = new Map<string, { refusal: Refusal; operations: MoneyOperation[] }>();
  for (const { index, refusal } of unavailable) {
    const group = byMessage.get(refusal.message) ?? { refusal, operations: [] };
    group.operations.push(operations[index]!);
    byMessage.set(refusal.message, group);
    outcomes[index] = { kind: "unavailable", refusal };
  }
  for (const group of byMessage.values()) await noteRetryable(deps.db, group.operations, group.refusal);
  for (const { item, lease } of batched.stored) outcomes[item] = { kind: "signed", lease };
  return outcomes as ExecuteOutcome[];
}

/** What the agent is told when the chain's answers stop the batch for now. */
function chainRefusal(quote: FeeQuote): Refusal {
  return !quote.ok && quote.error.reason === "above_fee_ceiling"
    ? { code: "service_unavailable", message: `${quote.error.detail}; ${RETRY_WITH_SAME_KEY}` }
    : CHAIN_DOWN;
}

/**
 * Checks and signs the operations whose actions the batch holds: each sender's in arrival order
 * (its nonces follow one another), different senders at once. An action held by someone else is
 * `busy`; so is a second request for an action of this batch. Resolves with how many were signed.
 */
async function signLocked(
  deps: ExecutorDeps,
  batch: MoneyBatch,
  operations: MoneyOperation[],
  signing: Signing,
  held: { locked: Set<string>; facts: Facts; chain: ChainView; fees: Fees; now: Date },
): Promise<number> {
  const bySender = new Map<string, number[]>();
  operations.forEach((operation, index) => {
    if (!held.locked.has(operation.actionId)) {
      signing.outcomes[index] = { kind: "busy" };
      return;
    }
    held.locked.delete(operation.actionId);
    bySender.set(operation.sender.address, [...(bySender.get(operation.sender.address) ?? []), index]);
  });
  let signedCount = 0;
  await Promise.all(
    [...bySender].map(([address, indexes]) => {
      const sender = held.chain.senders.get(address)!;
      const step = signingStep(deps, operations, { ...held, sender }, signing, () => signedCount++);
      return batch.sign(address, sender.minedNonce, indexes, step);
    }),
  );
  return signedCount;
}

/**
 * One sender's operations through the outbox's signing (outbox/signing.ts), one at a time: each
 * signature counts against the key's sealed budget in the enclave, and each check must see the
 * signings before it (facts.count).
 */
function signingStep(
  deps: ExecutorDeps,
  operations: MoneyOperation[],
  at: { facts: Facts; fees: Fees; now: Date; sender: SenderView },
  signing: Signing,
  onSigned: () => void,
): OutboxSigningStep<number> {
  const { facts, fees, now } = at;
  const costs = new Map<number, { costWei: bigint; costUnits: bigint }>();
  return {
    window: 1,
    admit(index) {
      const operation = operations[index]!;
      const cost = {
        costWei: operation.valueUnits * WEI_PER_UNIT + fees.gasLimit * fees.maxFeePerGas,
        costUnits: costUnits({
          valueUnits: operation.valueUnits,
          gasLimit: fees.gasLimit,
          maxFeePerGas: fees.maxFeePerGas,
        }),
      };
      const refusal = operation.check({
        sender: at.sender,
        fees,
        ...cost,
        inFlightWei: facts.inFlight(operation.sender.address),
        transferSpentUnits: facts.spent(operation.agentId),
        faucet: facts.payouts(operation.agentId),
        gate: facts.gate(operation.gateWallet),
        recipientBalanceWei: operation.readRecipientBalance ? facts.received(operation.to) : undefined,
        now,
      });
      if (refusal) {
        signing.refused.push({ index, refusal });
        return false;
      }
      costs.set(index, cost);
      return true;
    },
    sign(index, nonce) {
      const operation = operations[index]!;
      return operation.sign({
        keyRef: operation.sender.keyRef,
        // The enclave signs only when the key's address is the sender's (docs/enclave.md#the-enclaves-signing-policy).
        from: operation.sender.address as Hex,
        chainId: CHAIN_ID,
        to: operation.to as Hex,
        valueUnits: operation.valueUnits,
        nonce,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        gasLimit: fees.gasLimit,
      });
    },
    signed(index) {
      const cost = costs.get(index)!;
      facts.count(operations[index]!, cost.costWei, cost.costUnits, now);
      onSigned();
    },
    intent(index) {
      const operation = operations[index]!;
      const cost = costs.get(index)!;
      return {
        purpose: operation.purpose,
        maxCostWei: cost.costWei,
        row: {
          action_id: operation.actionId,
          agent_id: operation.agentId,
          cost_units: cost.costUnits.toString(),
        },
      };
    },
    unsigned(index, failure) {
      // Nothing signed, or nothing that left the enclave for good: the nonce is still free.
      const operation = operations[index]!;
      const refusal = refusesThisRequest(operation, failure);
      if (refusal) {
        signing.refused.push({ index, refusal });
      } else {
        signing.unavailable.push({ index, refusal: signerUnavailable(failure) });
      }
      if (failure.class !== "retryable") {
        deps.logger.warn(
          { action_id: operation.actionId, code: failure.code, class: failure.class },
          "enclave refused to sign",
        );
      }
    },
  };
}

/**
 * The batch's view of the chain: each sender's view as read when its first operation of the batch
 * queued (one consistent pair per sender), and, in one JSON-RPC batch now, the balances of the
 * recipients the checks need. Undefined when the chain did not answer.
 */
async function readChain(rpc: JsonRpcUpstream, queued: Queued[]): Promise<ChainView | undefined> {
  const firsts = new Map<string, Promise<SenderView | undefined>>();
  for (const { operation, senderView } of queued) {
    if (!firsts.has(operation.sender.address)) firsts.set(operation.sender.address, senderView);
  }
  const recipients = [
    ...new Set(
      queued.filter(({ operation }) => operation.readRecipientBalance).map(({ operation }) => operation.to),
    ),
  ];
  const [views, balances] = await Promise.all([Promise.all(firsts.values()), readBalances(rpc, recipients)]);
  if (views.includes(undefined) || !balances) return undefined;
  const addresses = [...firsts.keys()];
  return {
    senders: new Map(addresses.map((address, index) => [address, views[index]!])),
    received: new Map(recipients.map((address, index) => [address, balances[index]!])),
  };
}

/** The balances of `addresses` at `latest`, in one JSON-RPC batch; undefined if any is missing. */
async function readBalances(rpc: JsonRpcUpstream, addresses: string[]): Promise<bigint[] | undefined> {
  const results = await sendRpcBatch(
    rpc,
    addresses.map((address) => ethGetBalance(address)),
  );
  const balances: bigint[] = [];
  for (const result of results) {
    if (!result.ok) return undefined;
    balances.push(result.value);
  }
  return balances;
}
