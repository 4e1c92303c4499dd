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
 * Operations that arrive together run as one batch: one read of the chain, one lock statement, one
 * read of the facts the checks need, one statement storing what was signed, one commit, one
 * JSON-RPC batch of broadcasts (a node mines them in one block). Round trips between processes are
 * what a transfer costs most here, so a batch pays them once. Within a batch each sender's
 * operations run in arrival order with running totals, so each sees the ones before it exactly as
 * if they had committed; different senders sign concurrently.
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
  recordBroadcastOutcomes,
  type SenderView,
  sendRawBatch,
  type TxPurpose,
} from "../chain/outgoing.ts";
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
  /** Called once transactions are in flight, so the tracker looks for their receipts soon. */
  onInFlight?: () => void;
  /** How long a broadcast lease lasts (chain/outgoing.ts broadcastLeaseMs). */
  leaseMs: number;
  /** Fault injection for crash tests only (scripts/test/money-crash-origin.ts); never set otherwise. */
  faults?: ExecutorFaults;
};

export type ExecutorFaults = {
  /** After signed transactions are committed, before they are broadcast. */
  afterSigned?: () => void;
  /** After the chain accepted a broadcast, before anything waits for the receipt. */
  afterBroadcast?: () => void;
};

/** What an operation's checks see, read under the locks, counting earlier operations of its batch. */
export type CheckFacts = {
  /** The sender's mined nonce and balance, read before the locks (chain/outgoing.ts). */
  sender: SenderView;
  fees: Fees;
  /** Value plus the maximum fee of this transaction, in wei and in units (rounded up). */
  costWei: bigint;
  costUnits: bigint;
  /** What the sender's unmined transactions can still take from it. */
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
  /** Signed and stored; `broadcast` says how the chain took it. */
  | { kind: "signed"; lease: BroadcastLease; broadcast: BroadcastOutcome | undefined }
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
 * One batch at a time: the next gathers what arrives meanwhile. Two at once (one signing, one
 * broadcasting) moved no more transfers per second in bench:money and cost origin and Postgres
 * 20 to 30 % more CPU per transfer, in smaller batches.
 */
const MAX_IN_FLIGHT = 1;

export function createMoneyExecutor(deps: ExecutorDeps): MoneyExecutor {
  const execute = createBatcher<MoneyOperation, ExecuteOutcome>((operations) => runBatch(deps, operations), {
    maxBatch: MAX_BATCH,
    maxInFlight: MAX_IN_FLIGHT,
  });
  return { execute };
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

async function runBatch(deps: ExecutorDeps, operations: MoneyOperation[]): Promise<ExecuteOutcome[]> {
  const outcomes: (ExecuteOutcome | undefined)[] = new Array(operations.length);
  // Read before the transaction, so no database lock is held across these calls (see
  // SenderView for why a stale view can only err towards refusing).
  const quote = await deps.fees.quote(NATIVE_TRANSFER_GAS);
  const chain = quote.ok ? await readChain(deps.rpc, operations) : undefined;
  if (!quote.ok || !chain) {
    const refusal: Refusal =
      !quote.ok && quote.reason === "above_fee_ceiling"
        ? { code: "service_unavailable", message: `${quote.detail}; try again later` }
        : CHAIN_DOWN;
    await noteRetryable(deps.db, operations, refusal);
    return operations.map(() => ({ kind: "unavailable", refusal }));
  }
  const fees = quote.fees;
  const now = deps.clock.now();

  const signed: Signed[] = [];
  const refused: { index: number; refusal: Refusal }[] = [];
  const unavailable: number[] = [];
  const stored = await deps.db.transaction(async (tx) => {
    const { locked, nextNonces } = await lockBatch(tx, operations, chain.senders);
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
        let nonce = nextNonces.get(address)!;
        for (const index of indexes) {
          const operation = operations[index]!;
          const cost = costUnits({
            valueUnits: operation.valueUnits,
            gasLimit: fees.gasLimit,
            maxFeePerGas: fees.maxFeePerGas,
          });
          const costWei = operation.valueUnits * WEI_PER_UNIT + fees.gasLimit * fees.maxFeePerGas;
          const refusal = operation.check({
            sender: chain.senders.get(address)!,
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
  for (const { index, refusal } of refused) outcomes[index] = { kind: "refused", refusal };
  if (unavailable.length > 0) {
    await noteRetryable(
      deps.db,
      unavailable.map((index) => operations[index]!),
      SIGNER_UNAVAILABLE,
    );
    for (const index of unavailable) outcomes[index] = { kind: "unavailable", refusal: SIGNER_UNAVAILABLE };
  }
  if (signed.length === 0) return outcomes as ExecuteOutcome[];

  deps.faults?.afterSigned?.();
  const leases: BroadcastLease[] = signed.map((item) => ({
    txId: stored.get(item.txHash)!,
    rawTx: item.rawTx,
    txHash: item.txHash,
    status: "signed",
  }));
  const broadcasts = await sendRawBatch(deps.rpc, leases);
  await recordBroadcastOutcomes(deps.db, leases, broadcasts);
  if (broadcasts.some((outcome) => outcome.kind === "accepted")) deps.faults?.afterBroadcast?.();
  if (broadcasts.some((outcome) => outcome.kind !== "refused")) deps.onInFlight?.();
  signed.forEach((item, n) => {
    const broadcast = broadcasts[n]!;
    if (broadcast.kind === "refused") {
      deps.logger.warn(
        { action_id: operations[item.index]!.actionId, reason: broadcast.reason },
        "chain refused a signed transaction",
      );
    }
    outcomes[item.index] = { kind: "signed", lease: leases[n]!, broadcast };
  });
  return outcomes as ExecuteOutcome[];
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
 * nonce rows, in address order so two batches never wait on each other in a cycle; returns the
 * actions it holds and each sender's next nonce (chain/outgoing.ts nextNonceUpsert says how).
 */
async function lockBatch(
  tx: Db,
  operations: MoneyOperation[],
  senders: Map<string, SenderView>,
): Promise<{ locked: Set<string>; nextNonces: Map<string, bigint> }> {
  const mined = [...senders]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([address, view]) => ({ address, mined: view.minedNonce.toString() }));
  const [row] = await queryRows<{ locked: string[] | null; nonces: Record<string, string> | null }>(
    tx,
    sql`with locked as (
          select action_id from agent_actions
          where action_id = any(${pgArrayLiteral(operations.map((operation) => operation.actionId))}::uuid[])
            and status = 'requested'
          for update skip locked),
        nonces as (
          insert into sender_nonces (address, next_nonce)
          select address, mined::bigint from json_to_recordset(${JSON.stringify(mined)}::json)
            as m(address text, mined text) order by address
          on conflict (address) do update
            set next_nonce = greatest(sender_nonces.next_nonce, excluded.next_nonce), updated_at = now()
          returning address, next_nonce)
        select (select json_agg(action_id) from locked) as locked,
               (select json_object_agg(address, next_nonce::text) from nonces) as nonces`,
  );
  return {
    locked: new Set(row?.locked ?? []),
    nextNonces: new Map(
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
 * committed when it started, so this one sees every earlier signing of these senders).
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
            where t.status in ('signed', 'submitted') group by t.sender) x) as in_flight,
          (select json_object_agg(agent_id, total) from (
            select agent_id, sum(cost_units)::text as total from agent_actions
            where agent_id = any(${pgArrayLiteral(agents)}::uuid[]) and kind = 'transfer' and signed_at >= ${today}
            group by agent_id) x) as spent,
          (select json_object_agg(agent_id, json_build_object('total_today', total_today, 'last_signed_at', last_signed_at)) from (
            select agent_id,
              coalesce(sum(amount_units) filter (where signed_at >= ${today}), 0)::text as total_today,
              max(signed_at) as last_signed_at
            from agent_actions
            where agent_id = any(${pgArrayLiteral(agents)}::uuid[]) and kind = 'faucet' and signed_at is not null
            group by agent_id) x) as payouts,
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
