/**
 * The money executor's statements (actions/execute.ts): the batch's locks, the facts its checks
 * read, and what it signed, each one named statement (db/prepared.ts) of the batch's pipelined
 * transaction (db/pipelined-transaction.ts).
 */
import { sql } from "drizzle-orm";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import { type Db, pgArrayLiteral, toDate } from "../db/client.ts";
import type { PipelinedTransaction } from "../db/pipelined-transaction.ts";
import { preparedStatement } from "../db/prepared.ts";
import { type WalletGateRow, walletGatesSql } from "../funding/gate.ts";
import type { SenderView } from "../outbox/index.ts";
import type { MoneyOperation, Refusal } from "./operation.ts";
import { startOfUtcDay, utcDate } from "./utc-day.ts";

/** What the chain said of the batch's senders (and of the recipients the checks need). */
export type ChainView = { senders: Map<string, SenderView>; received: Map<string, bigint> };

/** One signature of a batch: the operation's index, its nonce, the signed bytes and its cost. */
export type Signed = {
  index: number;
  nonce: bigint;
  txHash: `0x${string}`;
  rawTx: `0x${string}`;
  costWei: bigint;
  costUnits: bigint;
};

const lockStatement = preparedStatement<"actions" | "senders">(
  "money_lock_batch",
  sql`with locked as (
        select action_id from agent_actions
        where action_id = any(${sql.placeholder("actions")}::uuid[]) and status = 'requested'
        for update skip locked),
      nonces as (
        insert into sender_nonces (address, next_nonce)
        select address, 0 from unnest(${sql.placeholder("senders")}::text[]) with ordinality as s(address, n)
        order by n
        on conflict (address) do update set updated_at = now()
        returning address, next_nonce)
      select (select json_agg(action_id) from locked) as locked,
             (select json_object_agg(address, next_nonce::text) from nonces) as nonces`,
);

/**
 * Locks the batch's requested actions (skipping those another executor holds) and its senders'
 * nonce rows (made on a sender's first use), in address order so two batches never wait on each
 * other in a cycle; returns the actions it holds and each sender's stored next nonce.
 */
export async function lockBatch(
  tx: PipelinedTransaction,
  operations: MoneyOperation[],
): Promise<{ locked: Set<string>; storedNonces: Map<string, bigint> }> {
  const senders = [...new Set(operations.map((operation) => operation.sender.address))].sort();
  const [row] = await tx.run<
    { locked: string[] | null; nonces: Record<string, string> | null },
    "actions" | "senders"
  >(lockStatement, {
    actions: pgArrayLiteral(operations.map((operation) => operation.actionId)),
    senders: pgArrayLiteral(senders),
  });
  return {
    locked: new Set(row?.locked ?? []),
    storedNonces: new Map(
      Object.entries(row?.nonces ?? {}).map(([address, nonce]) => [address, BigInt(nonce)]),
    ),
  };
}

export type Facts = {
  inFlight(sender: string): bigint;
  spent(agentId: string): bigint;
  payouts(agentId: string): { totalTodayUnits: bigint; lastSignedAt: Date | null };
  gate(wallet: string): WalletGateRow | null;
  received(recipient: string): bigint;
  /** Counts a signed operation, so the next ones of the batch see it as if it were committed. */
  count(operation: MoneyOperation, costWei: bigint, costUnits: bigint, now: Date): void;
};

type FactsParam = "mined" | "transferAgents" | "day" | "faucetAgents" | "dayStart" | "wallets";

const factsStatement = preparedStatement<FactsParam>(
  "money_read_facts",
  sql`select
        (select json_object_agg(m.address, f.total)
          from json_to_recordset(${sql.placeholder("mined")}::json) as m(address text, mined bigint)
          cross join lateral (select sum(t.max_cost_wei)::text as total from outgoing_transactions t
            where t.sender = m.address and t.nonce >= m.mined and t.status <> 'failed') f
          where f.total is not null) as in_flight,
        (select json_object_agg(agent_id, spent_units::text) from transfer_daily_spend
          where agent_id = any(${sql.placeholder("transferAgents")}::uuid[])
            and day = ${sql.placeholder("day")}::date) as spent,
        (select json_object_agg(a.agent_id, json_build_object(
            'total_today', coalesce(today.total, 0)::text, 'last_signed_at', latest.signed_at))
          from unnest(${sql.placeholder("faucetAgents")}::uuid[]) as a(agent_id)
          cross join lateral (select sum(amount_units) as total from agent_actions
            where agent_id = a.agent_id and kind = 'faucet'
              and signed_at >= ${sql.placeholder("dayStart")}::timestamptz) today
          cross join lateral (select max(signed_at) as signed_at from agent_actions
            where agent_id = a.agent_id and kind = 'faucet' and signed_at is not null) latest
          where latest.signed_at is not null) as payouts,
        ${walletGatesSql(sql`${sql.placeholder("wallets")}::text[]`)} as gates`,
);

/**
 * Everything the batch's checks read, in one statement after the locks (a statement reads what was
 * committed when it started, so this one sees every earlier signing of these senders). Each part
 * is an index lookup per sender or agent, so what a check costs grows neither with the table nor
 * with an agent's history: the in-flight cost is a range of the (sender, nonce) index, today's
 * transfers one row of transfer_daily_spend, and the payouts a range of the faucet's own index.
 */
export async function readFacts(
  tx: PipelinedTransaction,
  operations: MoneyOperation[],
  chain: ChainView,
  now: Date,
): Promise<Facts> {
  const mined = [...chain.senders].map(([address, view]) => ({ address, mined: view.minedNonce.toString() }));
  const agentsOf = (purpose: MoneyOperation["purpose"]): string => {
    const agents = operations.filter((operation) => operation.purpose === purpose);
    return pgArrayLiteral([...new Set(agents.map((operation) => operation.agentId))]);
  };
  const today = startOfUtcDay(now);
  const [row] = await tx.run<
    {
      in_flight: Record<string, string> | null;
      spent: Record<string, string> | null;
      payouts: Record<string, { total_today: string; last_signed_at: string | null }> | null;
      gates: Record<string, WalletGateRow> | null;
    },
    FactsParam
  >(factsStatement, {
    mined: JSON.stringify(mined),
    transferAgents: agentsOf("transfer"),
    day: utcDate(today),
    faucetAgents: agentsOf("faucet"),
    dayStart: today.toISOString(),
    wallets: pgArrayLiteral([...new Set(operations.map((operation) => operation.gateWallet))]),
  });
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

type RecordParam = "signed" | "leaseSeconds" | "nonces" | "day" | "failures";

const recordStatement = preparedStatement<RecordParam>(
  "money_record_batch",
  sql`with signed as (
        select * from json_to_recordset(${sql.placeholder("signed")}::json) as s(
          action_id uuid, agent_id uuid, purpose text, sender text, nonce bigint, tx_hash text, raw_tx text,
          max_cost_wei numeric, cost_units numeric)),
      stored as (
        insert into outgoing_transactions (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, broadcast_lease_until)
        select purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei,
          clock_timestamp() + make_interval(secs => ${sql.placeholder("leaseSeconds")}::double precision)
        from signed order by sender, nonce
        returning tx_id, tx_hash),
      nonces as (
        update sender_nonces s set next_nonce = n.next, updated_at = now()
        from json_to_recordset(${sql.placeholder("nonces")}::json) as n(address text, next bigint)
        where s.address = n.address),
      actions as (
        update agent_actions a set status = 'signed', tx_id = st.tx_id, tx_hash = st.tx_hash,
          cost_units = s.cost_units, signed_at = now(), error_code = null, error_message = null, updated_at = now()
        from signed s join stored st on st.tx_hash = s.tx_hash
        where a.action_id = s.action_id and a.status = 'requested'),
      spend as (
        insert into transfer_daily_spend as d (agent_id, day, spent_units)
        select agent_id, ${sql.placeholder("day")}::date, sum(cost_units) from signed where purpose = 'transfer'
        group by agent_id
        on conflict (agent_id, day) do update set spent_units = d.spent_units + excluded.spent_units),
      failed as (
        update agent_actions a set status = 'failed', error_code = f.code, error_message = f.message, updated_at = now()
        from json_to_recordset(${sql.placeholder("failures")}::json) as f(action_id uuid, code text, message text)
        where a.action_id = f.action_id and a.status = 'requested')
      select tx_hash, tx_id from stored`,
);

/**
 * In one statement: the signed transactions stored (with broadcast leases that run from this
 * statement's clock, after the signing, not from the transaction's start), the senders' next
 * nonces moved past them, the signed actions pointed at them, today's transfer spend of their
 * agents counted, the refused actions ended `failed`. Returns each stored transaction's id by hash.
 */
export async function recordBatch(
  tx: PipelinedTransaction,
  operations: MoneyOperation[],
  signed: Signed[],
  refused: { index: number; refusal: Refusal }[],
  { leaseMs, now }: { leaseMs: number; now: Date },
): Promise<Map<string, string>> {
  if (signed.length === 0 && refused.length === 0) return new Map();
  const transactions = signed.map((item) => {
    const operation = operations[item.index]!;
    return {
      action_id: operation.actionId,
      agent_id: operation.agentId,
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
  const failures = refused.map(({ index, refusal }) => ({
    action_id: operations[index]!.actionId,
    code: refusal.code,
    message: refusal.message,
  }));
  const rows = await tx.run<{ tx_hash: string; tx_id: string }, RecordParam>(recordStatement, {
    signed: JSON.stringify(transactions),
    leaseSeconds: leaseMs / 1000,
    nonces: JSON.stringify([...nextNonces].map(([address, next]) => ({ address, next: next.toString() }))),
    day: utcDate(now),
    failures: JSON.stringify(failures),
  });
  return new Map(rows.map((row) => [row.tx_hash, row.tx_id]));
}

/** Notes why requested actions could not run now; they stay `requested` for a retry. */
export async function noteRetryable(db: Db, operations: MoneyOperation[], refusal: Refusal): Promise<void> {
  await db.execute(sql`update agent_actions set error_code = ${refusal.code}, error_message = ${refusal.message},
      updated_at = now()
    where action_id = any(${pgArrayLiteral(operations.map((operation) => operation.actionId))}::uuid[])
      and status = 'requested'`);
}
