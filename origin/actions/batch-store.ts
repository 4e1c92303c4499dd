/**
 * The money kind's statements (actions/execute.ts), each a named statement (db/prepared.ts) of
 * the outbox batch's pipelined transaction (outbox/submit.ts): its claim of the requested
 * actions; the facts its checks read, behind the lock of the senders' nonce rows and of the
 * recipients' pre-restore ceilings; and its rows in the statement that stores what was signed.
 */
import { sql } from "drizzle-orm";
import { policyFromDocument, storedAgentPolicySchema } from "../../shared/agent-policy.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import { refusalFieldsToStore } from "../agent-actions/refusal-fields.ts";
import { storedActionColumns } from "../agent-actions/repository.ts";
import { startOfUtcDay, utcDate } from "../agent-actions/utc-day.ts";
import { pgArrayLiteral } from "../db/client.ts";
import type { PipelinedTransaction } from "../db/pipelined-transaction.ts";
import { jsonOf, preparedStatement } from "../db/prepared.ts";
import { ceilingApplies, type WalletGateRow, walletGatesSql } from "../funding/gate.ts";
import { defineKindStore, type SenderView, type Unsigned } from "../outbox/index.ts";
import {
  type CheckFacts,
  isHeld,
  isNotNow,
  type MoneyOperation,
  type Refusal,
  type Stop,
} from "./operation.ts";

/** What the chain said of the batch's senders, as each queued. */
export type ChainView = { senders: Map<string, SenderView> };

/**
 * The batch's actions to run (requested, or held and then approved by an operator), skipping those
 * another executor holds, locked to its commit.
 */
export const claimStatement = preparedStatement<"actions">(
  "money_claim_batch",
  sql`select action_id::text as key, action_id::text as id from agent_actions
      where action_id = any(${sql.placeholder("actions")}::uuid[]) and status in ('requested', 'approved')
      for update skip locked`,
).returns({ key: "text", id: "text" });

/** An approved action whose hold (and with it its approval) is over, by the database's clock. */
const approvalOver = sql`(a.status = 'approved' and a.hold_expires_at < clock_timestamp() + interval '1 second')`;

/**
 * The money rows of the outbox's store statement (outbox/kind.ts defineKindStore): the signed
 * actions pointed at their transactions, today's transfer spend of their agents counted, the
 * refused actions ended `failed`, and why the ones that could not run now stay `requested`.
 */
export const storeStatement = defineKindStore<"day" | "failures" | "holds" | "notes">({
  name: "money",
  // The 202 is this row: what was stored, as GET /actions/{id} reads it.
  answer: "actions",
  signedColumns: sql`action_id uuid, agent_id uuid, value_units numeric, cost_units numeric, counted_on date`,
  ctes: [
    {
      name: "actions",
      // Stamped now, after the enclave signed: now() is the batch's begin, before its wait at the
      // senders' locks, and a payout dated so early ends its cooldown (docs/api.md#repeats-and-limits-of-the-faucet)
      // before the enclave's, which counts from its signature.
      // The amount is what was signed: a payout's is the node's payout when it signs, which an
      // operator's resealed terms may have changed since an origin on the old ones recorded the
      // request (its retry signed on a restarted origin); the action, and the faucet's daily sum
      // of its amounts, must say what moved.
      sql: sql`update agent_actions a set status = 'signed', tx_id = st.tx_id, tx_hash = st.tx_hash,
          amount_units = s.value_units, cost_units = s.cost_units, signed_at = stamp.at, error_code = null, error_message = null, updated_at = stamp.at
        from signed s join stored st on st.tx_hash = s.tx_hash cross join (select clock_timestamp() as at) stamp
        where a.action_id = s.action_id and a.status in ('requested', 'approved')
        returning ${storedActionColumns}`,
    },
    {
      // Each transfer on the day the enclave counted it on: the batch's day, but across a midnight,
      // when the enclave read its clock after the batch read its own (an older enclave, which does
      // not say, the batch's day). The enclave's sealed spend is the bound, so the gateway's count
      // of each day must be its count, for the refusals of the next day to be the gateway's own.
      name: "spend",
      sql: sql`insert into transfer_daily_spend as d (agent_id, day, spent_units, transfers)
        select agent_id, coalesce(counted_on, ${sql.placeholder("day")}::date), sum(cost_units), count(*)
        from signed where purpose = 'transfer'
        group by 1, 2
        on conflict (agent_id, day) do update
          set spent_units = d.spent_units + excluded.spent_units, transfers = d.transfers + excluded.transfers`,
    },
    {
      name: "failed",
      // The refusal's fields are kept, and a policy's rule, so a repeat of the key answers them
      // again (agent-actions/view.ts endingRefusal).
      sql: sql`update agent_actions a set status = 'failed', error_code = f.code, error_message = f.message,
          error_fields = f.fields, hold_rule = coalesce(f.rule, a.hold_rule), updated_at = now()
        from json_to_recordset(${sql.placeholder("failures")}::json)
          as f(action_id uuid, code text, message text, fields jsonb, rule text)
        where a.action_id = f.action_id and a.status in ('requested', 'approved')`,
    },
    {
      // A check's hold of a requested action, or an approved one the enclave holds again
      // (transfers.ts heldAgain).
      name: "held",
      // The hold's end by the database's clock, which the sweep that ends it reads
      // (agent-actions/holds.ts): an origin host's clock off the database host's would shorten or
      // lengthen AGENT_POLICY_HOLD_SECONDS by the difference.
      // An approved one whose hold has ended meanwhile (its signing waited, or began just before
      // the sweep) ends `expired`, as the sweep would have ended it: its approval lasted until the
      // hold's end, so that is why the enclave refused it, and a hold that ended is not held anew.
      // The approval's end is in whole seconds, the hold's second cut off, so it lapses up to a
      // second before; clock_timestamp(), as the refusal came after the batch's begin.
      sql: sql`update agent_actions a set
          status = case when ${approvalOver} then 'expired' else 'held' end,
          hold_rule = case when ${approvalOver} then a.hold_rule else h.rule end,
          hold_expires_at = case when ${approvalOver} then a.hold_expires_at
            else now() + make_interval(secs => h.seconds) end,
          error_code = null, error_message = null, updated_at = now()
        from json_to_recordset(${sql.placeholder("holds")}::json) as h(action_id uuid, rule text, seconds double precision)
        where a.action_id = h.action_id and a.status in ('requested', 'approved')`,
    },
    {
      name: "noted",
      sql: sql`update agent_actions a set error_code = n.code, error_message = n.message, updated_at = now()
        from json_to_recordset(${sql.placeholder("notes")}::json) as n(action_id uuid, code text, message text)
        where a.action_id = n.action_id and a.status in ('requested', 'approved')`,
    },
  ],
});

export type Facts = {
  /** The sender's chain view, as read when its first operation of the batch queued. */
  sender(address: string): SenderView;
  inFlight(sender: string): bigint;
  spent(agentId: string): bigint;
  /** The agent's policy and what its transfers used of its windows; null without a policy. */
  policy(agentId: string): CheckFacts["policy"];
  /** An operator froze every agent of the node. */
  nodeFrozen: boolean;
  payouts(agentId: string): { totalTodayUnits: bigint; sinceLastMs: number | null };
  /** The funding gate's facts of a wallet; null when it is not one of the service's agent wallets. */
  gate(wallet: string): WalletGateRow | null;
  /**
   * What `recipient` holds before the next operation into it: on chain, plus the service's
   * transactions in flight to it, plus what the operations admitted before in this batch bring it.
   * Read only for a recipient under a pre-restore ceiling (gate.ts ceilingApplies); undefined for
   * any other, and when the chain did not answer.
   */
  recipientBalance(recipient: string): bigint | undefined;
  /**
   * Counts what an admitted operation brings its recipient, so the operations admitted after it
   * see it (recipientBalance), whichever sender pays them.
   */
  admit(operation: MoneyOperation): void;
  /** Counts a signed operation, so the next ones of the batch see it as if it were committed. */
  count(operation: MoneyOperation, costWei: bigint, costUnits: bigint): void;
};

/**
 * Locks the batch's recipients' funding exceptions (those not revoked, in one order) before the
 * facts are read. So the checks of payments into one wallet under a pre-restore ceiling run one
 * batch after another, across origins, and each batch's facts (`incoming`) see what the one before
 * it signed into that wallet: two payments that each fit its ceiling cannot both be signed when
 * together they do not. A recipient without an exception (an outside address, a drilled wallet)
 * has nothing to lock: one probe of funding_exceptions_wallet_idx.
 */
export const lockCeilingsStatement = preparedStatement<"recipients">(
  "money_lock_ceilings",
  sql`select e.id::text as id from funding_exceptions e
      where e.wallet = any(${sql.placeholder("recipients")}::text[]) and e.revoked_at is null
      order by e.id
      for update`,
).returns({ id: "text" });

type FactsParam =
  | "mined"
  | "transferAgents"
  | "day"
  | "monthStart"
  | "faucetAgents"
  | "dayStart"
  | "at"
  | "wallets"
  | "recipients";

export const factsStatement = preparedStatement<FactsParam>(
  "money_read_facts",
  sql`select
        (select json_object_agg(m.address, f.total)
          from json_to_recordset(${sql.placeholder("mined")}::json) as m(address text, mined bigint)
          cross join lateral (select sum(part)::text as total from (
            -- Payments and fillers apart: each sum reads its own (sender, nonce) index.
            select sum(t.max_cost_wei) as part from outgoing_transactions t
              where t.sender = m.address and t.nonce >= m.mined and t.status <> 'failed' and t.purpose <> 'filler'
            union all
            select sum(t.max_cost_wei) from outgoing_transactions t
              where t.sender = m.address and t.nonce >= m.mined and t.status <> 'failed' and t.purpose = 'filler'
          ) parts) f
          where f.total is not null) as in_flight,
        (select json_object_agg(agent_id, json_build_array(spent_units::text, transfers)) from transfer_daily_spend
          where agent_id = any(${sql.placeholder("transferAgents")}::uuid[])
            and day = ${sql.placeholder("day")}::date) as spent,
        -- Only agents with a policy read their month: one range of transfer_daily_spend's key each.
        (select json_object_agg(p.agent_id, json_build_object('policy', p.policy, 'month', (
            select coalesce(sum(m.spent_units), 0)::text from transfer_daily_spend m
            where m.agent_id = p.agent_id and m.day >= ${sql.placeholder("monthStart")}::date
              and m.day <= ${sql.placeholder("day")}::date)))
          from agent_policies p where p.agent_id = any(${sql.placeholder("transferAgents")}::uuid[])) as policies,
        (select frozen from node_policy where id = 1) as node_frozen,
        -- How long ago the latest payout was signed is the database's to say: it stamped it, and
        -- an origin host's clock off the database host's would lengthen or shorten the cooldown.
        -- At this statement's start, after the locks: a payout committed before it is no later.
        (select json_object_agg(a.agent_id, json_build_object(
            'total_today', coalesce(today.total, 0)::text,
            'since_last_ms', floor(extract(epoch from statement_timestamp() - latest.signed_at) * 1000)))
          from unnest(${sql.placeholder("faucetAgents")}::uuid[]) as a(agent_id)
          -- Today is the origin's UTC day (the enclave's, on its host), and a payout's stamp is
          -- the database's: the origin's midnight is moved by how far the database's clock is
          -- from the origin's (its time now less the batch's), so a payout the origin signed
          -- before it counts in the day before, whatever the skew between the two hosts.
          cross join lateral (select sum(amount_units) as total from agent_actions
            where agent_id = a.agent_id and kind = 'faucet'
              and signed_at >= ${sql.placeholder("dayStart")}::timestamptz
                + (statement_timestamp() - ${sql.placeholder("at")}::timestamptz)) today
          cross join lateral (select max(signed_at) as signed_at from agent_actions
            where agent_id = a.agent_id and kind = 'faucet' and signed_at is not null) latest
          where latest.signed_at is not null) as payouts,
        ${walletGatesSql(sql`${sql.placeholder("wallets")}::text[]`)} as gates,
        -- What the service's payments still in flight bring each recipient under a ceiling (an
        -- active exception), in units: every transaction in flight (the in-flight index, whole),
        -- its action one lookup by tx_id. Only for such a recipient, which exists only until its
        -- batch is drilled: any other costs one probe of funding_exceptions. A wallet paying
        -- itself brings itself nothing.
        (select json_object_agg(r.wallet, i.units)
          from unnest(${sql.placeholder("recipients")}::text[]) as r(wallet)
          cross join lateral (select coalesce(sum(a.amount_units), 0)::text as units
            from outgoing_transactions t join agent_actions a on a.tx_id = t.tx_id
            where t.status in ('signed', 'submitted') and t.purpose in ('transfer', 'faucet')
              and t.sender <> r.wallet and a.to_address = r.wallet) i
          where exists (select 1 from funding_exceptions e
            where e.wallet = r.wallet and e.revoked_at is null and e.expires_at > now())) as incoming`,
).returns({
  in_flight: jsonOf<Record<string, string>>({ nullable: true }),
  spent: jsonOf<Record<string, [string, number]>>({ nullable: true }),
  policies: jsonOf<Record<string, { policy: unknown; month: string }>>({ nullable: true }),
  node_frozen: "bool?",
  payouts: jsonOf<Record<string, { total_today: string; since_last_ms: number }>>({ nullable: true }),
  gates: jsonOf<Record<string, WalletGateRow>>({ nullable: true }),
  incoming: jsonOf<Record<string, string>>({ nullable: true }),
});

/** Reads balances on chain, in order; undefined when the chain did not answer them all. */
export type ReadBalances = (addresses: readonly string[]) => Promise<bigint[] | undefined>;

/**
 * Everything the batch's checks read, in one statement after the locks (a statement reads what was
 * committed when it started, so this one sees every earlier signing of these senders, and of
 * payments into its recipients under a ceiling: lockCeilingsStatement, written just before it in
 * the same round trip). Each part is an index lookup per sender or agent, so what a check costs
 * grows neither with the table nor with an agent's history: the in-flight cost is a range of the
 * (sender, nonce) index, today's transfers one row of transfer_daily_spend, and the payouts a range
 * of the faucet's own index.
 *
 * Then, only for recipients under a pre-restore ceiling (rare: a wallet of a batch not yet
 * drilled, with an operator's exception), their balances on chain, in one JSON-RPC batch. Read
 * after the statement, never before: a payment into one of them that was in flight when the
 * statement read it and mined since is counted twice (which can only refuse more), whereas one
 * read before could be mined and recorded confirmed in between, and counted nowhere.
 */
export async function readFacts(
  read: { run: PipelinedTransaction["run"]; readBalances: ReadBalances },
  operations: readonly MoneyOperation[],
  chain: ChainView,
  now: Date,
): Promise<Facts> {
  const { run } = read;
  const mined = [...chain.senders].map(([address, view]) => ({ address, mined: view.minedNonce.toString() }));
  const agentsOf = (purpose: MoneyOperation["purpose"]): string => {
    const agents = operations.filter((operation) => operation.purpose === purpose);
    return pgArrayLiteral([...new Set(agents.map((operation) => operation.agentId))]);
  };
  const today = startOfUtcDay(now);
  const recipients = pgArrayLiteral(recipientsOf(operations));
  // The lock is written first: Postgres runs it, waiting for the ceilings' locks, before the facts
  // statement starts and takes its snapshot.
  const [, [row]] = await Promise.all([
    run(lockCeilingsStatement, { recipients }),
    run(factsStatement, {
      mined: JSON.stringify(mined),
      transferAgents: agentsOf("transfer"),
      day: utcDate(today),
      monthStart: `${utcDate(today).slice(0, 7)}-01`,
      faucetAgents: agentsOf("faucet"),
      dayStart: today.toISOString(),
      at: now.toISOString(),
      wallets: pgArrayLiteral([
        ...new Set(operations.flatMap((operation) => [operation.sender.address, operation.to])),
      ]),
      recipients,
    }),
  ]);
  const inFlight = new Map(
    Object.entries(row?.in_flight ?? {}).map(([address, total]) => [address, BigInt(total)]),
  );
  const spent = new Map(Object.entries(row?.spent ?? {}).map(([agent, [units]]) => [agent, BigInt(units)]));
  const policies = new Map(
    Object.entries(row?.policies ?? {}).map(([agent, { policy, month }]) => [
      agent,
      {
        // Written only once the enclave accepted it, and only through the schema (policy/store.ts).
        policy: policyFromDocument(storedAgentPolicySchema.parse(policy)),
        usage: {
          dayUnits: spent.get(agent) ?? 0n,
          monthUnits: BigInt(month),
          dayCount: row?.spent?.[agent]?.[1] ?? 0,
        },
      },
    ]),
  );
  const payouts = new Map(
    Object.entries(row?.payouts ?? {}).map(([agent, payout]) => [
      agent,
      {
        totalTodayUnits: BigInt(payout.total_today),
        sinceLastMs: Math.max(0, payout.since_last_ms),
      },
    ]),
  );
  const gates = new Map(Object.entries(row?.gates ?? {}));
  const onChain = await ceilingedBalances(read.readBalances, recipientsOf(operations), gates);
  const incoming = new Map(
    Object.entries(row?.incoming ?? {}).map(([wallet, units]) => [wallet, BigInt(units) * WEI_PER_UNIT]),
  );
  // What the operations admitted so far in this batch bring each recipient.
  const admitted = new Map<string, bigint>();
  return {
    sender: (address) => chain.senders.get(address)!,
    inFlight: (sender) => inFlight.get(sender) ?? 0n,
    spent: (agentId) => spent.get(agentId) ?? 0n,
    policy: (agentId) => policies.get(agentId) ?? null,
    nodeFrozen: row?.node_frozen ?? false,
    payouts: (agentId) => payouts.get(agentId) ?? { totalTodayUnits: 0n, sinceLastMs: null },
    gate: (wallet) => gates.get(wallet) ?? null,
    recipientBalance(recipient) {
      const balance = onChain.get(recipient);
      if (balance === undefined) return undefined;
      return balance + (incoming.get(recipient) ?? 0n) + (admitted.get(recipient) ?? 0n);
    },
    admit(operation) {
      if (operation.to === operation.sender.address) return;
      const value = operation.valueUnits * WEI_PER_UNIT;
      admitted.set(operation.to, (admitted.get(operation.to) ?? 0n) + value);
    },
    count(operation, costWei, costUnits) {
      inFlight.set(operation.sender.address, (inFlight.get(operation.sender.address) ?? 0n) + costWei);
      if (operation.purpose === "transfer") {
        spent.set(operation.agentId, (spent.get(operation.agentId) ?? 0n) + costUnits);
        const policy = policies.get(operation.agentId);
        if (policy) {
          const { usage } = policy;
          policy.usage = {
            dayUnits: usage.dayUnits + costUnits,
            monthUnits: usage.monthUnits + costUnits,
            dayCount: usage.dayCount + 1,
          };
        }
      } else {
        const before = payouts.get(operation.agentId) ?? { totalTodayUnits: 0n, sinceLastMs: null };
        // Signed just now, in this batch.
        payouts.set(operation.agentId, {
          totalTodayUnits: before.totalTodayUnits + operation.valueUnits,
          sinceLastMs: 0,
        });
      }
    },
  };
}

/** The wallets the batch pays into, each once, leaving out a sender paying itself. */
function recipientsOf(operations: readonly MoneyOperation[]): string[] {
  return [
    ...new Set(
      operations
        .filter((operation) => operation.to !== operation.sender.address)
        .map((operation) => operation.to),
    ),
  ];
}

/**
 * The balances on chain of the recipients a pre-restore ceiling holds, the only ones the gate
 * weighs (gate.ts ceilingApplies); none when the chain did not answer (their checks then answer
 * not now).
 */
async function ceilingedBalances(
  readBalances: ReadBalances,
  recipients: readonly string[],
  gates: ReadonlyMap<string, WalletGateRow>,
): Promise<Map<string, bigint>> {
  const ceilinged = recipients.filter((recipient) => ceilingApplies(gates.get(recipient) ?? null));
  if (ceilinged.length === 0) return new Map();
  const balances = await readBalances(ceilinged);
  return new Map(balances ? ceilinged.map((recipient, index) => [recipient, balances[index]!]) : []);
}

/**
 * The money parameters of the store statement: today's date, the refused (ended `failed`, with
 * the fields they were answered with, told at the batch's time), the held, and the noted (left
 * `requested` with why: what the outbox could not sign, and what a check could not decide now).
 */
export function storeValues(ended: {
  refused: readonly Unsigned<MoneyOperation, Stop>[];
  unavailable: readonly Unsigned<MoneyOperation, Stop>[];
  now: Date;
}): Record<"day" | "failures" | "holds" | "notes", unknown> {
  const row = (item: MoneyOperation, refusal: Refusal) => ({
    action_id: item.actionId,
    code: refusal.code,
    message: refusal.message,
    // Read by the `failed` rows only: a note ends nothing, so nothing of it is repeated.
    fields: refusalFieldsToStore(refusal.fields, ended.now),
    rule: refusal.code === "policy_denied" ? refusal.fields?.rule : undefined,
  });
  const failures = ended.refused.flatMap(({ item, refusal }) =>
    isHeld(refusal) || isNotNow(refusal) ? [] : [row(item, refusal)],
  );
  const notes = [
    // The outbox's own (the signer's, the chain's): refusals, never a check's hold or not now.
    ...ended.unavailable.map(({ item, refusal }) => row(item, refusal as Refusal)),
    ...ended.refused.flatMap(({ item, refusal }) => (isNotNow(refusal) ? [row(item, refusal.notNow)] : [])),
  ];
  const holds = ended.refused.flatMap(({ item, refusal }) =>
    isHeld(refusal)
      ? [
          {
            action_id: item.actionId,
            rule: refusal.held.rule,
            seconds: refusal.held.holdSeconds,
          },
        ]
      : [],
  );
  return {
    day: utcDate(ended.now),
    failures: JSON.stringify(failures),
    holds: JSON.stringify(holds),
    notes: JSON.stringify(notes),
  };
}
