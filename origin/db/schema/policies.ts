import { sql } from "drizzle-orm";
import {
  bigserial,
  boolean,
  check,
  date,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  primaryKey,
  smallint,
  text,
  timestamp,
  uuid,
} from "drizzle-orm/pg-core";
import { agentIdentities } from "./identities.ts";

/**
 * Each agent's spending policy (shared/agent-policy.ts, docs/agents.md#your-spending-policy), as the
 * enclave sealed it: a row is written only after the enclave accepted the change, so the gateway
 * never allows what the enclave would refuse. No row: the node's limits only.
 */
export const agentPolicies = pgTable(
  "agent_policies",
  {
    agentId: uuid("agent_id")
      .primaryKey()
      .references(() => agentIdentities.agentId),
    /** The document (shared/agent-policy.ts agentPolicySchema), as the agent or operator wrote it. */
    policy: jsonb("policy").notNull(),
    /** The enclave's version of the key's policy: +1 on each accepted change. */
    version: integer("version").notNull(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [check("agent_policies_version_positive", sql`${t.version} > 0`)],
);

/** Every change of an agent's policy or of the node's freeze: who, before, after (the audit). */
export const policyChanges = pgTable(
  "policy_changes",
  {
    changeId: bigserial("change_id", { mode: "bigint" }).primaryKey(),
    /** Null for the node's freeze. */
    agentId: uuid("agent_id").references(() => agentIdentities.agentId),
    /** `agent` (its own token), `operator` (an operator key's signature), `admin` (the origin's, tightening only). */
    changedBy: text("changed_by").notNull(),
    /** The operator key that signed it, when one did. */
    operatorKeyId: text("operator_key_id"),
    before: jsonb("before"),
    after: jsonb("after"),
    changedAt: timestamp("changed_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check("policy_changes_changed_by_enum", sql`${t.changedBy} IN ('agent','operator','admin')`),
    index("policy_changes_agent_idx").on(t.agentId, t.changedAt),
  ],
);

/** One row: whether an operator froze every agent of the node (as the enclave sealed it). */
export const nodePolicy = pgTable(
  "node_policy",
  {
    id: smallint("id").primaryKey().default(1),
    frozen: boolean("frozen").notNull().default(false),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [check("node_policy_singleton", sql`${t.id} = 1`)],
);

/**
 * What each agent's x402 authorizations signed on one UTC day paid each payee, for the policy's
 * per-payee daily budgets; kept by the statement that signs one, as x402_daily_authorizations is.
 */
export const x402DailyPayeeUnits = pgTable(
  "x402_daily_payee_units",
  {
    agentId: uuid("agent_id").notNull(),
    day: date("day").notNull(),
    payTo: text("pay_to").notNull(),
    units: numeric("units", { precision: 78, scale: 0 }).notNull(),
  },
  (t) => [
    primaryKey({ name: "x402_daily_payee_units_pk", columns: [t.agentId, t.day, t.payTo] }),
    check("x402_daily_payee_units_nonnegative", sql`${t.units} >= 0`),
  ],
);
