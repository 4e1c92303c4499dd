import { sql } from "drizzle-orm";
import {
  check,
  date,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uuid,
} from "drizzle-orm/pg-core";
import { agentIdentities } from "./identities.ts";
import { outgoingTransactions } from "./transactions.ts";

/** Written before signing; unique per (agent, kind, key) (docs/api.md#conventions). */
export const agentActions = pgTable(
  "agent_actions",
  {
    actionId: uuid("action_id").primaryKey().defaultRandom(),
    agentId: uuid("agent_id")
      .notNull()
      .references(() => agentIdentities.agentId),
    kind: text("kind").notNull(),
    idempotencyKey: text("idempotency_key").notNull(),
    requestHash: text("request_hash").notNull(),
    status: text("status").notNull().default("requested"),
    amountUnits: numeric("amount_units", { precision: 78, scale: 0 }),
    toAddress: text("to_address"),
    txHash: text("tx_hash"),
    /** The signed transaction of a faucet payout or transfer (its chain state lives there too). */
    txId: uuid("tx_id").references(() => outgoingTransactions.txId),
    /** Value plus the maximum fee, in units, as the enclave counts it against limits (docs/enclave.md). */
    costUnits: numeric("cost_units", { precision: 78, scale: 0 }),
    signedAt: timestamp("signed_at", { withTimezone: true }),
    signedPayload: jsonb("signed_payload"),
    errorCode: text("error_code"),
    errorMessage: text("error_message"),
    /**
     * The extra fields a final refusal was answered with, so a repeat of the key answers them again
     * (agent-actions/refusal-fields.ts): `[name, value]` pairs in the answer's order, a
     * time-relative `retry_after` stored as the instant `retry_at`. Null for an action that did not
     * end so, or that ended before the column existed (docs/agents.md#moving-money).
     */
    errorFields: jsonb("error_fields"),
    /**
     * While the action's transaction is in flight: the reason its last broadcast got, if it was not
     * accepted (docs/api.md#faucet-and-transfer-actions-states).
     */
    lastBroadcastError: text("last_broadcast_error"),
    /**
     * For an action ended `failed` because another transaction took its nonce: the agent's filler
     * action that did, when it was one (docs/api.md#faucet-and-transfer-actions-states).
     */
    replacedByActionId: uuid("replaced_by_action_id"),
    /**
     * The spending-policy rule that held the action (its agent's policy asks an operator's
     * approval) or refused it, and, while held, when it ends `expired` if nobody approved or
     * rejected it (docs/agents.md#holds).
     */
    holdRule: text("hold_rule"),
    holdExpiresAt: timestamp("hold_expires_at", { withTimezone: true }),
    /**
     * An x402 authorization asked for without a key or nonce: which purchases it is one of (the
     * agent, the resource URL and the quote's terms), whose latest a retry of the same quote finds
     * (x402/payer/authorize-derived-key.ts). Null for every other action.
     */
    x402Purchase: text("x402_purchase"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique("agent_actions_idempotency_uq").on(t.agentId, t.kind, t.idempotencyKey),
    check("agent_actions_kind_enum", sql`${t.kind} IN ('faucet','transfer','x402','filler')`),
    check(
      "agent_actions_status_enum",
      sql`${t.status} IN ('requested','held','approved','rejected','expired','signed','submitted','confirmed','failed','reverted')`,
    ),
    check("agent_actions_amount_nonnegative", sql`${t.amountUnits} IS NULL OR ${t.amountUnits} >= 0`),
    // The faucet's cooldown and daily limit (actions/execute.ts readFacts): an agent's payouts
    // signed today and its latest one. Payouts only: a transfer's update leaves it alone.
    index("agent_actions_faucet_signed_idx")
      .on(t.agentId, t.signedAt)
      .where(sql`${t.kind} = 'faucet' AND ${t.signedAt} IS NOT NULL`),
    // The actions still to sign: `requested`, and `approved` (held, then approved by an operator).
    // One index for both on purpose: the money batch claims and updates its actions with
    // `status in ('requested', 'approved')`, and Postgres can use a partial index only when the
    // query's condition implies its predicate. With an index per status, the batch's statements
    // were planned (on a small table, and kept as generic plans) as sequential scans of
    // agent_actions, which grew with the table: bench:money lost about 15 %.
    index("agent_actions_to_sign_idx").on(t.updatedAt).where(sql`${t.status} IN ('requested','approved')`),
    index("agent_actions_held_idx").on(t.holdExpiresAt).where(sql`${t.status} = 'held'`),
    index("agent_actions_tx_idx").on(t.txId),
    // The console's latest actions and its charts of the last hour (console/charts-queries.ts):
    // a range of this index, never the whole table. updated_at already moves with every status
    // change and is indexed by agent_actions_to_sign_idx, so no update that was HOT stops being so.
    index("agent_actions_updated_idx").on(t.updatedAt),
    // The console's list of actions, newest first (console/browse-queries.ts readActionPage): a
    // page is a range of this index, not the whole table sorted. created_at never changes, so no
    // status update stops being HOT for it. Without action_id, the page's tie-break: an index
    // holding it was taken for the lookup of one action by its id (planned generically on small
    // tables, origin/db/prepared.int.test.ts), reading the whole index instead of the primary key.
    index("agent_actions_created_idx").on(t.createdAt),
    // The console's search by an idempotency key, whatever the agent (console/browse-queries.ts
    // search): the unique key above leads with the agent, so without this the search read the
    // whole table. The key never changes, so no status update stops being HOT for it.
    index("agent_actions_idempotency_key_idx").on(t.idempotencyKey),
    // The latest purchase of one quote by one agent (x402/payer/authorize-derived-key.ts): one
    // entry of this index. Written with the claim and never changed.
    index("agent_actions_x402_purchase_idx")
      .on(t.agentId, t.x402Purchase, t.createdAt)
      .where(sql`${t.x402Purchase} IS NOT NULL`),
    check("agent_actions_cost_nonnegative", sql`${t.costUnits} IS NULL OR ${t.costUnits} >= 0`),
  ],
);

/**
 * What each agent's transfers signed on one UTC day count against its daily limit (value plus the
 * maximum fee, in units), kept beside the actions by the statement that marks them `signed`, so
 * the limit's check reads one row however many transfers the agent made that day.
 */
export const transferDailySpend = pgTable(
  "transfer_daily_spend",
  {
    agentId: uuid("agent_id").notNull(),
    day: date("day").notNull(),
    spentUnits: numeric("spent_units", { precision: 78, scale: 0 }).notNull(),
    /** Transfers signed that day (fillers are not transfers): a policy's `daily_count`. */
    transfers: integer("transfers").notNull().default(0),
  },
  (t) => [
    primaryKey({ name: "transfer_daily_spend_pk", columns: [t.agentId, t.day] }),
    check("transfer_daily_spend_nonnegative", sql`${t.spentUnits} >= 0`),
    check("transfer_daily_spend_transfers_nonnegative", sql`${t.transfers} >= 0`),
  ],
);

/**
 * How many x402 authorizations each agent had signed on one UTC day (AGENT_X402_DAILY_LIMIT),
 * counted by the statement that signs one (x402/payer/authorize-repository.ts), so the limit's check
 * reads one row however many the agent signed.
 */
export const x402DailyAuthorizations = pgTable(
  "x402_daily_authorizations",
  {
    agentId: uuid("agent_id").notNull(),
    day: date("day").notNull(),
    authorizations: integer("authorizations").notNull(),
    /** What they authorized, in units: a policy's x402 `daily_units`. */
    units: numeric("units", { precision: 78, scale: 0 }).notNull().default("0"),
  },
  (t) => [
    primaryKey({ name: "x402_daily_authorizations_pk", columns: [t.agentId, t.day] }),
    check("x402_daily_authorizations_nonnegative", sql`${t.authorizations} >= 0`),
    check("x402_daily_authorizations_units_nonnegative", sql`${t.units} >= 0`),
  ],
);

/** A time-limited `approved_non_zero` pre-restore ceiling for one wallet. */
export const fundingExceptions = pgTable(
  "funding_exceptions",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    wallet: text("wallet").notNull(),
    mode: text("mode").notNull().default("approved_non_zero"),
    ceilingUnits: numeric("ceiling_units", { precision: 78, scale: 0 }).notNull(),
    reason: text("reason").notNull(),
    approvedAt: timestamp("approved_at", { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
    revokedAt: timestamp("revoked_at", { withTimezone: true }),
  },
  (t) => [
    check("funding_exceptions_mode_enum", sql`${t.mode} IN ('approved_non_zero')`),
    check("funding_exceptions_ceiling_nonnegative", sql`${t.ceilingUnits} >= 0`),
    check("funding_exceptions_reason_nonempty", sql`length(trim(${t.reason})) > 0`),
    index("funding_exceptions_wallet_idx").on(t.wallet),
  ],
);

/** Every grant and revocation of a funding exception, with before, after and reason. */
export const fundingExceptionChanges = pgTable(
  "funding_exception_changes",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    exceptionId: uuid("exception_id")
      .notNull()
      .references(() => fundingExceptions.id),
    change: text("change").notNull(),
    before: jsonb("before"),
    after: jsonb("after").notNull(),
    reason: text("reason").notNull(),
    changedAt: timestamp("changed_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check("funding_exception_changes_change_enum", sql`${t.change} IN ('grant','revoke')`),
    check("funding_exception_changes_reason_nonempty", sql`length(trim(${t.reason})) > 0`),
    index("funding_exception_changes_exception_idx").on(t.exceptionId, t.changedAt),
  ],
);
