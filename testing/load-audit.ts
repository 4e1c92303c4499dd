/**
 * What a fault test checks once the fault is over and the load driver has settled, from the rows
 * and the chain, not from what the service said: every action the driver was told of exists and
 * ended (none lost, none stuck in `requested`, `signed` or `submitted`), one transaction per action
 * (none doubled: each sender's chain nonce equals its mined rows), every balance equal to what the
 * settled actions moved, and no identity disabled by the fault.
 */
import { sql } from "drizzle-orm";
import { publicClientFor } from "../devnet/testing.ts";
import { type Db, pgArrayLiteral, queryRows } from "../origin/db/client.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { sleep } from "../shared/sleep.ts";
import type { LoadDriver } from "./load-driver.ts";

export type LoadAuditParams = {
  db: Db;
  /** The devnet, read directly (not through any proxy a test cuts). */
  chainUrl: string;
  driver: LoadDriver;
  /** The agents the load ran as, with what each was funded with before it (wei). */
  agents: { agentId: string; wallet: string; fundedWei: bigint }[];
  /** The faucet treasury and its balance before the load (wei), when the faucet was in the mix. */
  treasury?: { address: string; balanceWei: bigint };
  /** How long actions may take to end after the fault (receipts, rebroadcasts). */
  timeoutMs?: number;
};

export type LoadAudit = {
  /** One line per broken promise; empty when the service kept them all. */
  problems: string[];
  /** Actions of the load's agents by final status. */
  byStatus: Record<string, number>;
};

type ActionRow = {
  action_id: string;
  agent_id: string;
  kind: string;
  status: string;
  amount_units: string | null;
  to_address: string | null;
  tx_id: string | null;
};
type TxRow = { tx_id: string; sender: string; status: string; fee_wei: string | null; purpose: string };

const TERMINAL = new Set(["confirmed", "failed", "reverted"]);

export async function auditLoad(params: LoadAuditParams): Promise<LoadAudit> {
  const problems: string[] = [];
  const agentIds = params.agents.map((agent) => agent.agentId);
  const actions = await untilSettled(params.db, agentIds, params.timeoutMs ?? 30_000);
  const byStatus: Record<string, number> = {};
  for (const action of actions) byStatus[action.status] = (byStatus[action.status] ?? 0) + 1;

  // None lost: every action an answer named is a row, and it ended.
  const found = new Map(actions.map((action) => [action.action_id, action]));
  for (const seen of params.driver.actions.values()) {
    const row = found.get(seen.actionId);
    if (!row)
      problems.push(
        `action ${seen.actionId} (${seen.kind}, answered ${seen.lastStatus}) is not in the database`,
      );
  }
  for (const action of actions) {
    if (!TERMINAL.has(action.status))
      problems.push(`action ${action.action_id} (${action.kind}) is still ${action.status}`);
  }

  // None doubled: one transaction per action, each transaction one action's, and the chain has
  // exactly the transactions the rows say were mined.
  const senders = [
    ...params.agents.map((agent) => agent.wallet.toLowerCase()),
    ...(params.treasury ? [params.treasury.address.toLowerCase()] : []),
  ];
  const txs = await queryRows<TxRow>(
    params.db,
    sql`select tx_id, sender, status, fee_wei::text as fee_wei, purpose from outgoing_transactions
        where sender = any(${pgArrayLiteral(senders)}::text[])`,
  );
  const actionOfTx = new Map<string, string>();
  for (const action of actions) {
    if (!action.tx_id) continue;
    const other = actionOfTx.get(action.tx_id);
    if (other)
      problems.push(`transaction ${action.tx_id} belongs to actions ${other} and ${action.action_id}`);
    actionOfTx.set(action.tx_id, action.action_id);
  }
  for (const tx of txs) {
    if (tx.purpose !== "filler" && !actionOfTx.has(tx.tx_id))
      problems.push(`transaction ${tx.tx_id} of ${tx.sender} (${tx.status}) belongs to no action`);
  }
  const chain = publicClientFor(params.chainUrl);
  const mined = (tx: TxRow): boolean => tx.status === "confirmed" || tx.status === "reverted";
  for (const sender of senders) {
    const rows = txs.filter((tx) => tx.sender === sender && mined(tx)).length;
    const onChain = await chain.getTransactionCount({ address: sender as `0x${string}` });
    if (onChain !== rows)
      problems.push(`${sender} sent ${onChain} transactions on chain, its rows say ${rows}`);
  }

  // Balances: what each address held before, plus what confirmed actions moved, minus fees paid.
  const expected = new Map<string, bigint>();
  const add = (address: string, wei: bigint): void => {
    const key = address.toLowerCase();
    expected.set(key, (expected.get(key) ?? 0n) + wei);
  };
  for (const agent of params.agents) add(agent.wallet, agent.fundedWei);
  if (params.treasury) add(params.treasury.address, params.treasury.balanceWei);
  const walletOf = new Map(params.agents.map((agent) => [agent.agentId, agent.wallet.toLowerCase()]));
  for (const action of actions) {
    if (action.status !== "confirmed" || !action.amount_units || !action.to_address) continue;
    const wei = BigInt(action.amount_units) * WEI_PER_UNIT;
    const from = action.kind === "faucet" ? params.treasury?.address : walletOf.get(action.agent_id);
    if (!from) {
      problems.push(`confirmed ${action.kind} ${action.action_id} has no known sender`);
      continue;
    }
    add(from, -wei);
    add(action.to_address, wei);
  }
  for (const tx of txs) if (mined(tx)) add(tx.sender, -BigInt(tx.fee_wei ?? "0"));
  for (const [address, wei] of expected) {
    const balance = await chain.getBalance({ address: address as `0x${string}` });
    if (balance !== wei) problems.push(`${address} holds ${balance} wei, the settled actions say ${wei}`);
  }

  // No identity disabled by a transient fault (the sweep's `destructive` class is the only way).
  const [identities] = await queryRows<{ disabled: number; destructive: number }>(
    params.db,
    sql`select (select count(*)::int from agent_identities where not enabled) as disabled,
               (select count(*)::int from identity_findings where class = 'destructive') as destructive`,
  );
  if (identities!.disabled > 0) problems.push(`${identities!.disabled} identities are disabled`);
  if (identities!.destructive > 0) problems.push(`${identities!.destructive} destructive identity findings`);
  return { problems, byStatus };
}

/** The load's agents' actions, once none is in flight any more (or the timeout passed). */
async function untilSettled(db: Db, agentIds: string[], timeoutMs: number): Promise<ActionRow[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rows = await queryRows<ActionRow>(
      db,
      sql`select action_id, agent_id, kind, status, amount_units::text as amount_units, to_address, tx_id
          from agent_actions where agent_id = any(${pgArrayLiteral(agentIds)}::uuid[])`,
    );
    if (rows.every((row) => TERMINAL.has(row.status)) || Date.now() > deadline) return rows;
    await sleep(200);
  }
}
