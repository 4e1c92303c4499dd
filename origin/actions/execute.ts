/**
 * Executes `requested` faucet payouts and transfers (docs/api.md#faucet-and-transfer-actions-states): the checks that need locks, the enclave's signature, the signed bytes stored, then the
 * broadcast. Three steps, each safe to crash in:
 *   1. (the caller) the action is committed as `requested` before anything is signed;
 *   2. one transaction holds the actions and their senders' nonce rows: checks, nonces,
 *      signatures, the transactions stored, actions `signed`. The nonce row lock serialises all one
 *      sender does, so the checks that count its past (limits, balance) see every earlier signing;
 *   3. the stored bytes are broadcast under a lease, in signing order (outbox/lane.ts).
 * A crash in 2 leaves actions `requested` with nothing signed that escaped (a retry of the key runs
 * them again; untouched, the tracker ends them `abandoned`, actions/abandon.ts); a crash after 2
 * leaves them `signed`, and the tracker sends the same bytes.
 * The request is answered after step 2: `signed` (202), with the transaction's hash. What follows
 * is the chain's pace, not the agent's wait: a node may take seconds to mine, and the answer's
 * promise (stored, sent in order, never signed again) holds from the commit on. GET
 * /actions/{id} follows the action to `confirmed`.
 *
 * This file is money's kind of the outbox (outbox/kind.ts): what an operation claims (its
 * requested action), the facts its checks read (batch-store.ts), which enclave op signs it with
 * which key, and what each refusal or failure tells the agent. The outbox runs it (outbox/submit.ts):
 * operations that arrive together share one batch, each sender's in arrival order with running
 * totals, so each sees the ones before it exactly as if they had committed.
 */
import { costUnits } from "../../shared/fees.ts";
import type { Hex } from "../../shared/hex.ts";
import { storedAction } from "../agent-actions/repository.ts";
import { ethGetBalance } from "../chain/eth-calls.ts";
import type { Fees } from "../chain/fees.ts";
import { NATIVE_TRANSFER_GAS } from "../chain/fees.ts";
import { sendRpcBatch } from "../chain/json-rpc-call.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { Clock } from "../clock.ts";
import { pgArrayLiteral } from "../db/client.ts";
import type { CheckAt, Outbox, OutboxKind, SenderView } from "../outbox/index.ts";
import {
  type ChainView,
  claimStatement,
  type Facts,
  readFacts,
  storeStatement,
  storeValues,
} from "./batch-store.ts";
import { chainRefusal, refusesThisRequest, signerUnavailable } from "./not-signed.ts";
import {
  type CheckFacts,
  type ExecuteOutcome,
  isHeld,
  isNotNow,
  type MoneyExecutor,
  type MoneyOperation,
  type Refusal,
  type Stop,
} from "./operation.ts";

export type ExecutorDeps = {
  /** The checks' time. */
  clock: Clock;
  /** The node's outbox: it runs the operations, and sends what was signed in order once committed. */
  outbox: Pick<Outbox, "submit">;
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

export function createMoneyExecutor(deps: ExecutorDeps): MoneyExecutor {
  const kind = moneyKind(deps);
  return {
    async execute(operation): Promise<ExecuteOutcome> {
      const outcome = await deps.outbox.submit(kind, operation);
      switch (outcome.kind) {
        case "sent":
          return { kind: "signed", action: storedAction(outcome.stored) };
        case "unclaimed":
          return { kind: "busy" };
        case "refused":
          if (isHeld(outcome.refusal)) return { kind: "held" };
          // A check that could not read what it needs: stored as not signed, not as refused.
          if (isNotNow(outcome.refusal)) return { kind: "unavailable", refusal: outcome.refusal.notNow };
          return { kind: "refused", refusal: outcome.refusal };
        case "unavailable":
          // unsigned and chainDown answer refusals only: a hold comes from a check.
          return { kind: "unavailable", refusal: outcome.refusal as Refusal };
      }
    },
  };
}

/** Money's kind: faucet payouts from the treasury and transfers from agent wallets. */
function moneyKind(deps: ExecutorDeps): OutboxKind<MoneyOperation, ChainView, Facts, Stop> {
  return {
    name: "money",
    purpose: (operation) => operation.purpose,
    batching: { maxBatch: MAX_BATCH, maxInFlight: MAX_IN_FLIGHT, untilBroadcast: false, waitsForRoom: true },
    gasLimit: NATIVE_TRANSFER_GAS,
    // Each signature counts against the key's sealed budget in the enclave, and each check must
    // see the signings before it (facts.count): one at a time.
    window: 1,
    now: () => deps.clock.now(),
    sender: (operation) => operation.sender.address,
    readsSenderViews: true,
    claim: {
      key: (operation) => operation.actionId,
      statement: claimStatement,
      values: (operations) => ({
        actions: pgArrayLiteral(operations.map((operation) => operation.actionId)),
      }),
    },
    chain: (_rpc, batch) => readChain(batch.views),
    facts: ({ run, rpc }, batch) =>
      readFacts(
        { run, readBalances: (addresses) => readBalances(rpc, addresses) },
        batch.items,
        batch.chain,
        batch.now,
      ),
    check(operation, facts, at) {
      const stop = operation.check(checkFacts(operation, facts, at));
      // What it brings its recipient counts from its admission, not its signature: the batch
      // admits each sender's first operation before any is signed (senders are signed at once), so
      // another sender's payment into the same wallet, admitted next, must already see this one. A
      // signature the enclave then refuses stays counted for the rest of the batch, which can only
      // refuse more.
      if (stop === null) facts.admit(operation);
      return stop;
    },
    count: (operation, facts, at) => facts.count(operation, at.costWei, unitsOf(operation, at.fees)),
    signing: (operation) => ({
      op: operation.signerOp,
      keyRef: operation.sender.keyRef,
      // The enclave signs only when the key's address is the sender's (docs/enclave.md#the-enclaves-signing-policy).
      from: operation.sender.address as Hex,
      to: operation.to as Hex,
      valueUnits: operation.valueUnits,
      // The enclave matches an operator's approval of a held transfer by its action (approve_held).
      ...(operation.purpose === "transfer" ? { actionId: operation.actionId } : {}),
    }),
    unsigned(operation, failure) {
      const refusal = refusesThisRequest(operation, failure);
      return refusal ? { final: true, refusal } : { final: false, refusal: signerUnavailable(failure) };
    },
    chainDown: chainRefusal,
    store: {
      statement: storeStatement,
      row: ({ item }, at, signed) => ({
        action_id: item.actionId,
        agent_id: item.agentId,
        value_units: item.valueUnits.toString(),
        cost_units: unitsOf(item, at.fees).toString(),
        // The day the enclave counted a transfer's cost on (storeStatement's `spend`).
        counted_on: signed.countedOn,
      }),
      values: storeValues,
    },
  };
}

/** Value plus the maximum fee, in units, rounded up: what the limits count. */
function unitsOf(operation: MoneyOperation, fees: Fees): bigint {
  return costUnits({
    valueUnits: operation.valueUnits,
    gasLimit: fees.gasLimit,
    maxFeePerGas: fees.maxFeePerGas,
  });
}

/** What an operation's own checks see (operation.ts CheckFacts). */
function checkFacts(operation: MoneyOperation, facts: Facts, at: CheckAt): CheckFacts {
  const sender = operation.sender.address;
  return {
    sender: facts.sender(sender),
    fees: at.fees,
    costWei: at.costWei,
    costUnits: unitsOf(operation, at.fees),
    inFlightWei: facts.inFlight(sender),
    transferSpentUnits: facts.spent(operation.agentId),
    faucet: facts.payouts(operation.agentId),
    senderGate: facts.gate(sender),
    recipientGate: facts.gate(operation.to),
    recipientBalanceWei: facts.recipientBalance(operation.to),
    policy: operation.purpose === "transfer" ? facts.policy(operation.agentId) : null,
    nodeFrozen: facts.nodeFrozen,
    now: at.now,
  };
}

/**
 * The batch's view of the chain: each sender's view as read when its first operation of the batch
 * queued (the outbox's). Undefined when the chain did not answer one. Recipients' balances are read
 * later, behind the locks, and only when a ceiling makes them count (batch-store.ts readFacts).
 */
async function readChain(
  firsts: ReadonlyMap<string, Promise<SenderView | undefined>>,
): Promise<{ minedNonces: Map<string, bigint>; chain: ChainView } | undefined> {
  const views = await Promise.all(firsts.values());
  if (views.includes(undefined)) return undefined;
  const senders = new Map([...firsts.keys()].map((address, index) => [address, views[index]!]));
  return {
    minedNonces: new Map([...senders].map(([address, view]) => [address, view.minedNonce])),
    chain: { senders },
  };
}

/** The balances of `addresses` at `latest`, in one JSON-RPC batch; undefined if any is missing. */
async function readBalances(
  rpc: JsonRpcUpstream,
  addresses: readonly string[],
): Promise<bigint[] | undefined> {
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
