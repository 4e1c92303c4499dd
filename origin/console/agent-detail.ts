import { sql } from "drizzle-orm";
import type { AgentDetail } from "../../shared/console-browse-schemas.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import { ethBlockNumber, ethGetBalance } from "../chain/eth-calls.ts";
import { sendRpcBatch } from "../chain/json-rpc-call.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { type Db, queryRows } from "../db/client.ts";
import { RESTORE_METHOD_NEW_ENCLAVE } from "../db/schema.ts";
import { readPolicyState } from "../policy/store.ts";
import { policyView } from "../policy/view.ts";
import { readActionPage, readIdentity } from "./browse-queries.ts";

/**
 * One agent as its console page shows it: identity and findings, its balance read from the chain
 * now, its policy with what remains of each budget (the row the enclave sealed, read as GET
 * /agent/v1/policy reads it), its key's batch and restore drill, and its latest actions.
 */
export async function readAgentDetail(
  db: Db,
  rpc: JsonRpcUpstream | undefined,
  agentId: string,
  now: Date,
): Promise<AgentDetail | null> {
  const identity = await readIdentity(db, agentId);
  if (!identity) return null;
  const [findings, key, counts, actions, policy, balance] = await Promise.all([
    queryRows<{ class: string; code: string; detail: string | null; at: Date }>(
      db,
      sql`select class, code, detail, at from identity_findings where agent_id = ${agentId}::uuid
          order by at desc limit 20`,
    ),
    queryRows<{ batch_id: string; batch_status: string; drilled: boolean }>(
      db,
      sql`select k.batch_id, b.status as batch_status, exists (select 1 from restore_evidence r
            where r.batch_id = k.batch_id and r.method = ${RESTORE_METHOD_NEW_ENCLAVE}) as drilled
          from key_pool k join key_batches b on b.batch_id = k.batch_id
          where k.assigned_agent_id = ${agentId}::uuid`,
    ),
    queryRows<{ kind: string; state: string; count: number }>(
      db,
      sql`select kind, status as state, count(*)::int as count from agent_actions
          where agent_id = ${agentId}::uuid group by kind, status order by kind, status`,
    ),
    readActionPage(db, { agentId, limit: 25 }),
    readPolicyState(db, agentId, now),
    readBalance(rpc, identity.assigned_wallet),
  ]);
  const view = policyView(policy, now);
  return {
    generated_at: now.toISOString(),
    identity,
    findings: findings.map((row) => ({ ...row, at: new Date(row.at).toISOString() })),
    balance,
    policy: {
      document: view.policy as Record<string, unknown> | null,
      version: view.version,
      node_frozen: view.node_frozen,
      budgets: view.budgets,
    },
    key: key[0] ?? { batch_id: null, batch_status: null, drilled: false },
    actions,
    action_counts: counts,
  };
}

/** The wallet's balance and the block it was read at, in one batch; the reason when the chain does not answer. */
async function readBalance(
  rpc: JsonRpcUpstream | undefined,
  wallet: string,
): Promise<AgentDetail["balance"]> {
  if (!rpc) return { unavailable: "no chain is configured on this node" };
  try {
    const [block, balance] = await sendRpcBatch(rpc, [ethBlockNumber(), ethGetBalance(wallet)]);
    if (!block.ok || !balance.ok) return { unavailable: "the chain did not answer" };
    return {
      units: (balance.value / WEI_PER_UNIT).toString(),
      wei: balance.value.toString(),
      block_number: block.value.toString(),
    };
  } catch {
    return { unavailable: "the chain did not answer" };
  }
}
