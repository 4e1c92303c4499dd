/**
 * Executes `requested` faucet payouts and transfers (SPEC "States and transitions / Agent
 * action"): the checks that need locks, the enclave's signature, the signed bytes stored, then the
 * broadcast. Three steps, each safe to crash in:
 *   1. (the caller) the action is committed as `requested` before anything is signed;
 *   2. one transaction holds the actions and their senders' nonce rows: checks, nonces,
 *      signatures, the transactions stored, actions `signed`. The nonce row lock serialises all one
 *      sender does, so the checks that count its past (limits, balance) see every earlier signing;
 *   3. the stored bytes are broadcast under a lease (chain/outgoing.ts).
 * A crash in 2 leaves actions `requested` with nothing signed that escaped (a retry or the tracker
 * runs them again); a crash after 2 leaves them `signed`, and the tracker sends the same bytes.
 *
 * Operations that arrive together run as one batch: one read of the chain (while the batch takes
 * its locks), one lock statement, one read of the facts the checks need, one statement storing
 * what was signed, one commit, one JSON-RPC batch of broadcasts (a node mines them in one block).
 * Round trips between processes are what a transfer costs most here, so a batch pays them once.
 * Within a batch each sender's operations run in arrival order with running totals, so each sees
 * the ones before it exactly as if they had committed; different senders sign concurrently. Once
 * the chain has taken a batch's broadcasts the next batch starts, while this one's are recorded.
 */
import { sql } from "drizzle-orm";
import { CHAIN_ID, WEI_PER_UNIT } from "../../shared/constants.ts";
import { costUnits } from "../../shared/fees.ts";
import type { Hex } from "../../shared/hex.ts";
import type { FeeOracle, Fees } from "../chain/fees.ts";
import { NATIVE_TRANSFER_GAS } from "../chain/fees.ts";
import { batchResults, isQuantity } from "../chain/json-rpc-results.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import {
  type BroadcastLease,
  type BroadcastOutcome,
  type ReceiptOutcome,
  type SenderView,
  sendRawBatch,
  type TxPurpose,
} from "../chain/outgoing.ts";
import { recordSentBatch } from "../chain/sent-batch.ts";
import { createBatcher } from "../db/batcher.ts";
import { type Db, pgArrayLiteral, queryRows, toDate } from "../db/client.ts";
import type { Clock } from "../deps.ts";
import type { ErrorCode } from "../errors.ts";
import { type WalletGateRow, walletGatesSql } from "../funding/gate.ts";
import type { Logger } from "../logger.ts";
import type {
  SignerFailure,
  SignerResult,
  SignTransactionParams,
  SignTransactionResult,
} from "../signer/types.ts";
import { startOfUtcDay } from "./utc-day.ts";

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
  /** Called when transactions are left in flight, so the tracker looks for their receipts soon. */
  onInFlight?: () => void;
  /** How long a broadcast lease lasts (chain/outgoing.ts broadcastLeaseMs). */
  leaseMs: number;
  /** Fault injection for crash tests only (scripts/test/money-crash-origin.ts); never set otherwise. */
  faults?: ExecutorFaults;
};

export type ExecutorFaults = {
  /** After signed transactions are committed, before they are broadcast. */
  afterSigned?: () => void;
  /** After the chain accepted a broadcast, before it is recorded or the receipt is read. */
  afterBroadcast?: () => void;
};

/** What an operation's checks see, read under the locks, counting earlier operations of its batch. */
export type CheckFacts = {
  /** The sender's mined nonce and balance, read while the batch took its locks (chain/outgoing.ts). */
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
  /** The agent's faucet payouts: units signed today, and when the latest was signed. */
  faucet: { totalTodayUnits: bigint; lastSignedAt: Date | null };
  /** The funding gate's facts of `gateWallet` (null: not one of the service's wallets). */
  gate: WalletGateRow | null;
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
  /** The wallet the funding gate is about (DESIGN §8): the sender's, or the payout's recipient. */
  gateWallet: string;
  /** Read the recipient's balance for the checks (the faucet's funding gate needs it). */
  readRecipientBalance?: boolean;
  /** Null lets the operation go on. */
  check: (facts: CheckFacts) => Refusal | null;
  sign: (params: SignTransactionParams) => Promise<SignerResult<SignTransactionResult>>;
  /** Turns a signer refusal (not a transport failure) into what the agent is told. */
  signerRefusal: (failure: SignerFailure) => Refusal;
};

export type ExecuteOutcome =
  /**
   * Signed, stored and sent; `broadcast` says how the chain took it, and `receipt` is the one the
   * chain had right after (undefined while it has none), both as recorded.
   */
  | {
      kind: "signed";
      lease: BroadcastLease;
      broadcast: BroadcastOutcome;
      receipt: ReceiptOutcome | undefined;
    }
  /** Refused; the action is now `failed` with the refusal's code. */
  | { kind: "refused"; refusal: Refusal }
  /** Could not be done now (signer or chain unreachable); the action stays `requested`. */
  | { kind: "unavailable"; refusal: Refusal }
  /** Another request or the tracker is executing this action right now. */
  | { kind: "busy" };

export type MoneyExecutor = { execute(operation: MoneyOperation): Promise<ExecuteOutcome> };

/** At most this many operations share a batch. */
const MAX_BATCH = 64;
/**
 * One batch at a time up to its broadcast: the next gathers what arrives meanwhile. Two at once
 * (one signing, one broadcasting) moved no more transfers per second in bench:money and cost
 * origin and Postgres 20 to 30 % more CPU per transfer, in smaller batches. One at a time also
 * sends each sender's nonces in order.
 */
const MAX_IN_FLIGHT = 1;

/** What a batch hands back at its broadcast: the outcomes, those of sent operations once recorded. */
type BatchOutcome = ExecuteOutcome | { kind: "sent"; outcome: Promise<ExecuteOutcome> };

export function createMoneyExecutor(deps: ExecutorDeps): MoneyExecutor {
  const run = createBatcher<MoneyOperation, BatchOutcome>(
    async (operations) => broadcastSigned(deps, operations, await signBatch(deps, operations)),
    { maxBatch: MAX_BATCH, maxInFlight: MAX_IN_FLIGHT },
  );
  return {
    async execute(operation) {
      const outcome = await run(operation);
      return outcome.kind === "sent" ? outcome.outcome : outcome;
    },
  };
}

const SIGNER_UNAVAILABLE: Refusal = {
  code: "agent_signer_unavailable",
  message: "the signer is unreachable; nothing was signed and a retry is safe",
};
const CHAIN_DOWN: Refusal = {
  code: "chain_unavailable",
  message: "the chain is unreachable; nothing was signed and a retry is safe",
};

type Signed = { index: number; nonce: bigint; txHash: Hex; rawTx: Hex; costWei: bigint; costUnits: bigint };

/** A batch up to its commit: the outcomes of the operations that were not signed, and the signed. */
type SignedBatch = {
  outcomes: (ExecuteOutcome | undefined)[];
  signed: Signed[];
  stored: Map<string, string>;
};

/** The chain or the fee ceiling says no for now; thrown inside the transaction to roll it back. */
class Unavailable extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.message);
  }
}

async function signBatch(deps: ExecutorDeps, operations: MoneyOperation[]): Promise<SignedBatch> {
  const outcomes: (ExecuteOutcome | undefined)[] = new Array(operations.length);
  // The chain is read while the transaction takes its locks; no database lock waits on the chain
  // beyond that (see SenderView for why a view older than the locks can only err towards refusing).
  const reads = Promise.all([deps.fees.quote(NATIVE_TRANSFER_GAS), readChain(deps.rpc, operations)]);
  reads.catch(() => {}); // awaited inside the transaction; a rejection there ends the batch
  const now = deps.clock.now();

  const signed: Signed[] = [];
  const refused: { index: number; refusal: Refusal }[] = [];
  const unavailable: number[] = [];
  let stored: Map<string, string>;
  try {
    stored = await deps.db.transaction(async (tx) => {
      const { locked, storedNonces } = await lockBatch(tx, operations);
      const [quote, chain] = await reads;
      if (!quote.ok) {
        throw new Unavailable(
          quote.reason === "above_fee_ceiling"
            ? { code: "service_unavailable", message: `${quote.detail}; try again later` }
            : CHAIN_DOWN,
        );
      }
      if (!chain) throw new Unavailable(CHAIN_DOWN);
      const fees = quote.fees;
      const facts = await readFacts(tx, operations, chain, now);
      // Each sender's operations in arrival order; different senders at once.
      const bySender = new Map<string, number[]>();
      operations.forEach((operation, index) => {
        if (!locked.has(operation.actionId)) {
          outcomes[index] = { kind: "busy" };
          return;
        }
        locked.delete(operation.actionId); // a second request for the same action in this batch is busy
        bySender.set(operation.sender.address, [...(bySender.get(operation.sender.address) ?? []), index]);
      });
      await Promise.all(
        [...bySender].map(async ([address, indexes]) => {
          const sender = chain.senders.get(address)!;
          // The stored next nonce, or the chain's if it is ahead (chain/outgoing.ts nextNonceUpsert).
          const storedNonce = storedNonces.get(address) ?? 0n;
          let nonce = storedNonce > sender.minedNonce ? storedNonce : sender.minedNonce;
          for (const index of indexes) {
            const operation = operations[index]!;
            const cost = costUnits({
              valueUnits: operation.valueUnits,
              gasLimit: fees.gasLimit,
              maxFeePerGas: fees.maxFeePerGas,
            });
            const costWei = operation.valueUnits * WEI_PER_UNIT + fees.gasLimit * fees.maxFeePerGas;
            const refusal = operation.check({
              sender,
              fees,
              costWei,
              costUnits: cost,
              inFlightWei: facts.inFlight(address),
              transferSpentUnits: facts.spent(operation.agentId),
              faucet: facts.payouts(operation.agentId),
              gate: facts.gate(operation.gateWallet),
              recipientBalanceWei: operation.readRecipientBalance ? facts.received(operation.to) : undefined,
              now,
            });
            if (refusal) {
              refused.push({ index, refusal });
              continue;
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
              // Nothing signed, or nothing that left the enclave for good: this nonce is still free.
              if (result.error.class === "retryable") unavailable.push(index);
              else {
                refused.push({ index, refusal: operation.signerRefusal(result.error) });
                deps.logger.warn(
                  { action_id: operation.actionId, code: result.error.code, class: result.error.class },
                  "enclave refused to sign",
                );
              }
              continue;
            }
            signed.push({
              index,
              nonce,
              txHash: result.value.txHash,
              rawTx: result.value.rawTransaction,
              costWei,
              costUnits: cost,
            });
            facts.count(operation, costWei, cost, now);
            nonce++;
          }
        }),
      );
      return recordBatch(tx, operations, signed, refused, deps.leaseMs);
    });
  } catch (error) {
    if (!(error instanceof Unavailable)) throw error;
    await noteRetryable(deps.db, operations, error.refusal);
    return {
      outcomes: operations.map(() => ({ kind: "unavailable", refusal: error.refusal })),
      signed: [],
      stored: new Map(),
    };
  }
  for (const { index, refusal } of refused) outcomes[index] = { kind: "refused", refusal };
  if (unavailable.length > 0) {
    await noteRetryable(
      deps.db,
      unavailable.map((index) => operations[index]!),
      SIGNER_UNAVAILABLE,
    );
    for (const index of unavailable) outcomes[index] = { kind: "unavailable", refusal: SIGNER_UNAVAILABLE };
  }
  return { outcomes, signed, stored };
}

/**
 * One JSON-RPC batch broadcasts what the batch signed. Once the chain has taken it the next batch
 * may start (its nonces follow these), while another JSON-RPC batch reads the receipts and they
 * are recorded (chain/sent-batch.ts); the sent operations are answered after that, so an agent
 * told `confirmed` or `submitted` reads the same from GET /actions/{id}.
 */
async function broadcastSigned(
  deps: ExecutorDeps,
  operations: MoneyOperation[],
  { outcomes, signed, stored }: SignedBatch,
): Promise<BatchOutcome[]> {
  if (signed.length === 0) return outcomes as ExecuteOutcome[];
  deps.faults?.afterSigned?.();
  const leases: BroadcastLease[] = signed.map((item) => ({
    txId: stored.get(item.txHash)!,
    rawTx: item.rawTx,
    txHash: item.txHash,
    status: "signed",
  }));
  const broadcasts = await sendRawBatch(deps.rpc, leases);
  if (broadcasts.some((outcome) => outcome.kind === "accepted")) deps.faults?.afterBroadcast?.();
  const recorded = recordSentBatch(
    {
      db: deps.db,
      rpc: deps.rpc,
      logger: deps.logger,
      onInFlight: deps.onInFlight,
      context: "money executor",
    },
    leases,
    broadcasts,
  );
  const batchOutcomes: BatchOutcome[] = outcomes as ExecuteOutcome[];
  signed.forEach((item, n) => {
    const broadcast = broadcasts[n]!;
    if (broadcast.kind === "refused") {
      deps.logger.warn(
        { action_id: operations[item.index]!.actionId, reason: broadcast.reason },
        "chain refused a signed transaction",
      );
    }
    batchOutcomes[item.index] = {
      kind: "sent",
      outcome: recorded.then((receipts) => ({
        kind: "signed",
        lease: leases[n]!,
        broadcast,
        receipt: receipts.get(item.txHash),
      })),
    };
  });
  return batchOutcomes;
}

type ChainView = { senders: Map<string, SenderView>; received: Map<string, bigint> };

/**
 * One JSON-RPC batch: each sender's mined nonce then its balance (nodes run a batch's calls in the
 * order listed; see SenderView), and the balances of recipients the checks need.
 */
async function readChain(rpc: JsonRpcUpstream, operations: MoneyOperation[]): Promise<ChainView | undefined> {
  const senders = [...new Set(operations.map((operation) => operation.sender.address))];
  const recipients = [
    ...new Set(
      operations.filter((operation) => operation.readRecipientBalance).map((operation) => operation.to),
    ),
  ];
  const calls = [
    ...senders.flatMap((address) => [
      { method: "eth_getTransactionCount", params: [address, "latest"] },
      { method: "eth_getBalance", params: [address, "latest"] },
    ]),
    ...recipients.map((address) => ({ method: "eth_getBalance", params: [address, "latest"] })),
  ];
  const result = await rpc.send(calls.map((call, id) => ({ jsonrpc: "2.0", id, ...call })));
  const byId = batchResults(result);
  const quantity = (id: number): bigint | undefined => {
    const value = byId.get(id);
    return isQuantity(value) ? BigInt(value) : undefined;
  };
  const view: ChainView = { senders: new Map(), received: new Map() };
  for (const [n, address] of senders.entries()) {
    const minedNonce = quantity(2 * n);
    const balanceWei = quantity(2 * n + 1);
    if (minedNonce === undefined || balanceWei === undefined) return undefined;
    view.senders.set(address, { minedNonce, balanceWei });
  }
  for (const [n, address] of recipients.entries()) {
    const balance = quantity(2 * senders.length + n);
    if (balance === undefined) return undefined;
    view.received.set(address, balance);
  }
  return view;
}

/**
 * Locks the batch's requested actions (skipping those another executor holds) and its senders'
 * nonce rows (made on a sender's first use), in address order so two batches never wait on each
 * other in a cycle; returns the actions it holds and each sender's stored next nonce.
 */
async function lockBatch(
  tx: Db,
  operations: MoneyOperation[],
): Promise<{ locked: Set<string>; storedNonces: Map<string, bigint> }> {
  const senders = [...new Set(operations.map((operation) => operation.sender.address))].sort();
  const [row] = await queryRows<{ locked: string[] | null; nonces: Record<string, string> | null }>(
    tx,
    sql`with locked as (
          select action_id from agent_actions
          where action_id = any(${pgArrayLiteral(operations.map((operation) => operation.actionId))}::uuid[])
            and status = 'requested'
          for update skip locked),
        nonces as (
          insert into sender_nonces (address, next_nonce)
          select address, 0 from unnest(${pgArrayLiteral(senders)}::text[]) with ordinality as s(address, n)
          order by n
          on conflict (address) do update set updated_at = now()
          returning address, next_nonce)
        select (select json_agg(action_id) from locked) as locked,
               (select json_object_agg(address, next_nonce::text) from nonces) as nonces`,
  );
  return {
    locked: new Set(row?.locked ?? []),
    storedNonces: new Map(
      Object.entries(row?.nonces ?? {}).map(([address, nonce]) => [address, BigInt(nonce)]),
    ),
  };
}

type Facts = {
  inFlight(sender: string): bigint;
  spent(agentId: string): bigint;
  payouts(agentId: string): { totalTodayUnits: bigint; lastSignedAt: Date | null };
  gate(wallet: string): WalletGateRow | null;
  received(recipient: string): bigint;
  /** Counts a signed operation, so the next ones of the batch see it as if it were committed. */
  count(operation: MoneyOperation, costWei: bigint, costUnits: bigint, now: Date): void;
};

/**
 * Everything the batch's checks read, in one statement after the locks (a statement reads what was
 * committed when it started, so this one sees every earlier signing of these senders). The agents'
 * parts read today's signed actions and the latest payout through agent_actions_signed_idx, so
 * what a check costs does not grow with an agent's history.
 */
async function readFacts(tx: Db, operations: MoneyOperation[], chain: ChainView, now: Date): Promise<Facts> {
  const mined = [...chain.senders].map(([address, view]) => ({ address, mined: view.minedNonce.toString() }));
  const agents = [...new Set(operations.map((operation) => operation.agentId))];
  const wallets = [...new Set(operations.map((operation) => operation.gateWallet))];
  const today = startOfUtcDay(now).toISOString();
  const [row] = await queryRows<{
    in_flight: Record<string, string> | null;
    spent: Record<string, string> | null;
    payouts: Record<string, { total_today: string; last_signed_at: string | null }> | null;
    gates: Record<string, WalletGateRow> | null;
  }>(
    tx,
    sql`select
          (select json_object_agg(sender, total) from (
            select t.sender, sum(t.max_cost_wei)::text as total
            from outgoing_transactions t
            join json_to_recordset(${JSON.stringify(mined)}::json) as m(address text, mined text)
              on t.sender = m.address and t.nonce >= m.mined::bigint
            where t.status <> 'failed' group by t.sender) x) as in_flight,
          (select json_object_agg(agent_id, total) from (
            select agent_id, sum(cost_units)::text as total from agent_actions
            where agent_id = any(${pgArrayLiteral(agents)}::uuid[]) and kind = 'transfer' and signed_at >= ${today}
            group by agent_id) x) as spent,
          (select json_object_agg(a.agent_id, json_build_object(
              'total_today', coalesce(today.total, 0)::text, 'last_signed_at', latest.signed_at))
            from unnest(${pgArrayLiteral(agents)}::uuid[]) as a(agent_id)
            cross join lateral (select sum(amount_units) as total from agent_actions
              where agent_id = a.agent_id and kind = 'faucet' and signed_at >= ${today}) today
            cross join lateral (select max(signed_at) as signed_at from agent_actions
              where agent_id = a.agent_id and kind = 'faucet' and signed_at is not null) latest
            where latest.signed_at is not null) as payouts,
          ${walletGatesSql(wallets)} as gates`,
  );
  const inFlight = new Map(
    Object.entries(row?.in_flight ?? {}).map(([address, total]) => [address, BigInt(total)]),
  );
  const spent = new Map(Object.entries(row?.spent ?? {}).map(([agent, total]) => [agent, BigInt(total)]));
  const payouts = new Map(
    Object.entries(row?.payouts ?? {}).map(([agent, payout]) => [
      agent,
      {
        totalTodayUnits: BigInt(payout.total_today),
        lastSignedAt: payout.last_signed_at ? toDate(payout.last_signed_at) : null,
      },
    ]),
  );
  const gates = new Map(Object.entries(row?.gates ?? {}));
  // Starts from the chain's balances; payouts signed in this batch are added as they are counted.
  const received = new Map(chain.received);
  return {
    inFlight: (sender) => inFlight.get(sender) ?? 0n,
    spent: (agentId) => spent.get(agentId) ?? 0n,
    payouts: (agentId) => payouts.get(agentId) ?? { totalTodayUnits: 0n, lastSignedAt: null },
    gate: (wallet) => gates.get(wallet) ?? null,
    received: (recipient) => received.get(recipient) ?? 0n,
    count(operation, costWei, costUnits, at) {
      inFlight.set(operation.sender.address, (inFlight.get(operation.sender.address) ?? 0n) + costWei);
      if (operation.purpose === "transfer") {
        spent.set(operation.agentId, (spent.get(operation.agentId) ?? 0n) + costUnits);
      } else {
        const before = payouts.get(operation.agentId) ?? { totalTodayUnits: 0n, lastSignedAt: null };
        payouts.set(operation.agentId, {
          totalTodayUnits: before.totalTodayUnits + operation.valueUnits,
          lastSignedAt: at,
        });
      }
      if (operation.readRecipientBalance) {
        received.set(operation.to, (received.get(operation.to) ?? 0n) + operation.valueUnits * WEI_PER_UNIT);
      }
    },
  };
}

/**
 * In one statement: the signed transactions stored (with their broadcast leases), the senders'
 * next nonces moved past them, the signed actions pointed at them, the refused actions ended
 * `failed`. Returns each stored transaction's id by hash.
 */
async function recordBatch(
  tx: Db,
  operations: MoneyOperation[],
  signed: Signed[],
  refused: { index: number; refusal: Refusal }[],
  leaseMs: number,
): Promise<Map<string, string>> {
  if (signed.length === 0 && refused.length === 0) return new Map();
  const transactions = signed.map((item) => {
    const operation = operations[item.index]!;
    return {
      action_id: operation.actionId,
      purpose: operation.purpose,
      sender: operation.sender.address,
      nonce: item.nonce.toString(),
      tx_hash: item.txHash,
      raw_tx: item.rawTx,
      max_cost_wei: item.costWei.toString(),
      cost_units: item.costUnits.toString(),
    };
  });
  const nextNonces = new Map<string, bigint>();
  for (const item of signed) {
    const address = operations[item.index]!.sender.address;
    if ((nextNonces.get(address) ?? -1n) < item.nonce + 1n) nextNonces.set(address, item.nonce + 1n);
  }
  const nonceRows = [...nextNonces].map(([address, next]) => ({ address, next: next.toString() }));
  const failures = refused.map(({ index, refusal }) => ({
    action_id: operations[index]!.actionId,
    code: refusal.code,
    message: refusal.message,
  }));
  const rows = await queryRows<{ tx_hash: string; tx_id: string }>(
    tx,
    sql`with signed as (
          select * from json_to_recordset(${JSON.stringify(transactions)}::json) as s(
            action_id uuid, purpose text, sender text, nonce bigint, tx_hash text, raw_tx text,
            max_cost_wei numeric, cost_units numeric)),
        stored as (
          insert into outgoing_transactions (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, broadcast_lease_until)
          select purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, now() + make_interval(secs => ${leaseMs / 1000})
          from signed order by sender, nonce
          returning tx_id, tx_hash),
        nonces as (
          update sender_nonces s set next_nonce = n.next::bigint, updated_at = now()
          from json_to_recordset(${JSON.stringify(nonceRows)}::json) as n(address text, next text)
          where s.address = n.address),
        actions as (
          update agent_actions a set status = 'signed', tx_id = st.tx_id, tx_hash = st.tx_hash,
            cost_units = s.cost_units, signed_at = now(), error_code = null, error_message = null, updated_at = now()
          from signed s join stored st on st.tx_hash = s.tx_hash
          where a.action_id = s.action_id and a.status = 'requested'),
        failed as (
          update agent_actions a set status = 'failed', error_code = f.code, error_message = f.message, updated_at = now()
          from json_to_recordset(${JSON.stringify(failures)}::json) as f(action_id uuid, code text, message text)
          where a.action_id = f.action_id and a.status = 'requested')
        select tx_hash, tx_id from stored`,
  );
  return new Map(rows.map((row) => [row.tx_hash, row.tx_id]));
}

/** Notes why requested actions could not run now; they stay `requested` for a retry. */
async function noteRetryable(db: Db, operations: MoneyOperation[], refusal: Refusal): Promise<void> {
  await db.execute(sql`update agent_actions set error_code = ${refusal.code}, error_message = ${refusal.message},
      updated_at = now()
    where action_id = any(${pgArrayLiteral(operations.map((operation) => operation.actionId))}::uuid[])
      and status = 'requested'`);
}
