/**
 * The agents' spending policies as the database keeps them (db/schema/policies.ts): a row only
 * once the enclave sealed the change, so the gateway never allows what the enclave refuses; what
 * each agent used of its windows; the node's freeze. Reads for the routes (GET and check, which
 * decide nothing under a lock) and the one write every change goes through.
 */
import { sql } from "drizzle-orm";
import {
  type AgentPolicy,
  type AgentPolicyDocument,
  type PolicyUsage,
  policyFromDocument,
  storedAgentPolicySchema,
} from "../../shared/agent-policy.ts";
import { startOfUtcDay, utcDate } from "../agent-actions/utc-day.ts";
import { type Db, queryRows } from "../db/client.ts";
import { jsonOf, preparedStatement, type RowOf, runPrepared } from "../db/prepared.ts";

export type StoredPolicy = { document: AgentPolicyDocument; policy: AgentPolicy; version: number };

/** A stored document: written through the schema, read back through it (a bug, not a user's error, if it fails). */
export function storedPolicy(document: unknown, version: number): StoredPolicy {
  const parsed = storedAgentPolicySchema.parse(document);
  return { document: parsed, policy: policyFromDocument(parsed), version };
}

export const policyStatement = preparedStatement<"agentId" | "day" | "monthStart">(
  "policy_read",
  sql`select
        (select json_build_object('document', policy, 'version', version) from agent_policies
          where agent_id = ${sql.placeholder("agentId")}::uuid) as stored,
        (select frozen from node_policy where id = 1) as node_frozen,
        (select json_build_array(spent_units::text, transfers) from transfer_daily_spend
          where agent_id = ${sql.placeholder("agentId")}::uuid and day = ${sql.placeholder("day")}::date) as day,
        (select coalesce(sum(spent_units), 0)::text from transfer_daily_spend
          where agent_id = ${sql.placeholder("agentId")}::uuid
            and day between ${sql.placeholder("monthStart")}::date and ${sql.placeholder("day")}::date) as month,
        (select json_build_array(units::text, authorizations) from x402_daily_authorizations
          where agent_id = ${sql.placeholder("agentId")}::uuid and day = ${sql.placeholder("day")}::date) as x402,
        (select json_object_agg(pay_to, units::text) from x402_daily_payee_units
          where agent_id = ${sql.placeholder("agentId")}::uuid and day = ${sql.placeholder("day")}::date) as payees`,
).returns({
  stored: jsonOf<{ document: unknown; version: number }>({ nullable: true }),
  node_frozen: "bool?",
  day: jsonOf<[string, number]>({ nullable: true }),
  month: "text",
  x402: jsonOf<[string, number]>({ nullable: true }),
  payees: jsonOf<Record<string, string>>({ nullable: true }),
});

export type PolicyState = {
  /** Null: the agent has no policy (the node's limits only). */
  stored: StoredPolicy | null;
  usage: PolicyUsage;
  nodeFrozen: boolean;
};

/** The agent's policy, what it used of its windows at `now`, and the node's freeze, in one statement. */
export async function readPolicyState(db: Db, agentId: string, now: Date): Promise<PolicyState> {
  const [row] = await runPrepared(db, policyStatement, policyValues(agentId, now));
  return policyStateOf(row);
}

/** policyStatement's values for `agentId` at `now`: its UTC day and month. */
export function policyValues(
  agentId: string,
  now: Date,
): { agentId: string; day: string; monthStart: string } {
  const day = utcDate(startOfUtcDay(now));
  return { agentId, day, monthStart: `${day.slice(0, 7)}-01` };
}

/** The state policyStatement's row tells (no row: no policy, nothing used, not frozen). */
export function policyStateOf(row: RowOf<(typeof policyStatement)["columns"]> | undefined): PolicyState {
  const [dayUnits, dayCount] = row?.day ?? ["0", 0];
  const [x402Units, x402Count] = row?.x402 ?? ["0", 0];
  return {
    stored: row?.stored ? storedPolicy(row.stored.document, row.stored.version) : null,
    usage: {
      transfers: { dayUnits: BigInt(dayUnits), monthUnits: BigInt(row?.month ?? "0"), dayCount },
      x402: {
        dayUnits: BigInt(x402Units),
        dayCount: x402Count,
        payeeDayUnits: new Map(
          Object.entries(row?.payees ?? {}).map(([payTo, units]) => [payTo, BigInt(units)]),
        ),
      },
    },
    nodeFrozen: row?.node_frozen ?? false,
  };
}

/** Every agent's stored policy with its key, in the agents' order (a tool's walk over the node). */
export async function storedAgentPolicies(
  db: Db,
): Promise<{ agentId: string; keyRef: string; stored: StoredPolicy }[]> {
  const rows = await queryRows<{ agent_id: string; key_ref: string; policy: unknown; version: number }>(
    db,
    sql`select p.agent_id, i.agent_transfer_key_ref as key_ref, p.policy, p.version
        from agent_policies p join agent_identities i using (agent_id)
        order by p.agent_id`,
  );
  return rows.map((row) => ({
    agentId: row.agent_id,
    keyRef: row.key_ref,
    stored: storedPolicy(row.policy, row.version),
  }));
}

/** Who made a change (policy_changes.changed_by). */
export type ChangedBy = { by: "agent" | "admin" } | { by: "operator"; operatorKeyId: string };

/**
 * Stores what the enclave sealed for the agent (null: the agent has no policy any more), with the
 * change in the audit, in `db`'s transaction.
 */
export async function writeAgentPolicy(
  db: Db,
  change: {
    agentId: string;
    before: AgentPolicyDocument | null;
    after: AgentPolicyDocument | null;
    version: number;
    changedBy: ChangedBy;
  },
): Promise<void> {
  const { agentId, before, after, version, changedBy } = change;
  await db.execute(
    after === null
      ? sql`delete from agent_policies where agent_id = ${agentId}`
      : sql`insert into agent_policies (agent_id, policy, version) values (${agentId}, ${JSON.stringify(after)}::jsonb, ${version})
          on conflict (agent_id) do update set policy = excluded.policy, version = excluded.version, updated_at = now()`,
  );
  await recordChange(db, { agentId, before, after, changedBy });
}

/**
 * Stores the node's freeze as the enclave sealed it, with the change in the audit: `before` is the
 * freeze the change found stored.
 */
export async function writeNodeFrozen(
  db: Db,
  change: { before: boolean; frozen: boolean },
  changedBy: ChangedBy,
): Promise<void> {
  const { before, frozen } = change;
  await db.execute(sql`update node_policy set frozen = ${frozen}, updated_at = now() where id = 1`);
  await recordChange(db, {
    agentId: null,
    before: { frozen: before },
    after: { frozen },
    changedBy,
  });
}

async function recordChange(
  db: Db,
  change: { agentId: string | null; before: unknown; after: unknown; changedBy: ChangedBy },
): Promise<void> {
  const { agentId, before, after, changedBy } = change;
  const operatorKeyId = changedBy.by === "operator" ? changedBy.operatorKeyId : null;
  await db.execute(
    sql`insert into policy_changes (agent_id, changed_by, operator_key_id, before, after)
        values (${agentId}, ${changedBy.by}, ${operatorKeyId},
          ${before === null ? null : JSON.stringify(before)}::jsonb, ${after === null ? null : JSON.stringify(after)}::jsonb)`,
  );
}
