import { sql } from "drizzle-orm";
import {
  boolean,
  check,
  date,
  index,
  integer,
  pgTable,
  primaryKey,
  smallint,
  text,
  timestamp,
  uuid,
} from "drizzle-orm/pg-core";
import { agentIdentities } from "./identities.ts";

/** One row, holding the initial policy of docs/api.md#registration-quotas-and-counters. */
export const registrationPolicy = pgTable(
  "registration_policy",
  {
    id: smallint("id").primaryKey().default(1),
    paused: boolean("paused").notNull().default(true),
    perIpDaily: integer("per_ip_daily").notNull().default(3),
    networkDaily: integer("network_daily").notNull().default(100),
    totalCeiling: integer("total_ceiling").notNull().default(1000),
    keyReserve: integer("key_reserve").notNull().default(10),
    attemptsPerIpPerMinute: integer("attempts_per_ip_per_minute").notNull().default(10),
    attemptsGlobalPerMinute: integer("attempts_global_per_minute").notNull().default(120),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check("registration_policy_singleton", sql`${t.id} = 1`),
    check(
      "registration_policy_nonnegative",
      sql`${t.perIpDaily} >= 0 AND ${t.networkDaily} >= 0 AND ${t.totalCeiling} >= 0 AND ${t.keyReserve} >= 0 AND ${t.attemptsPerIpPerMinute} >= 0 AND ${t.attemptsGlobalPerMinute} >= 0`,
    ),
  ],
);

/**
 * Each setting change, with its before and after values and its reason
 * (docs/api.md#the-operator-console).
 */
export const registrationPolicyChanges = pgTable(
  "registration_policy_changes",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    setting: text("setting").notNull(),
    beforeValue: text("before_value").notNull(),
    afterValue: text("after_value").notNull(),
    reason: text("reason").notNull(),
    /**
     * The channel the change came through (console or CLI); who made it is `operator`, when a
     * passkey session did. Null for changes recorded before the channel was kept, and for test and bench setup
     * that writes the policy directly.
     */
    source: text("source"),
    /**
     * The operator signed in with a passkey who made the change, and that passkey's key id
     * (docs/operations.md#signing-in-with-a-passkey); both null for the shared admin tokens and the CLI.
     */
    operator: text("operator"),
    passkeyKeyId: text("passkey_key_id"),
    changedAt: timestamp("changed_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check("registration_policy_changes_reason_nonempty", sql`length(trim(${t.reason})) > 0`),
    check(
      "registration_policy_changes_operator_whole",
      sql`(${t.operator} IS NULL) = (${t.passkeyKeyId} IS NULL)`,
    ),
    check("registration_policy_changes_source_enum", sql`${t.source} IN ('console','cli')`),
  ],
);

/** Successful registrations per UTC day and IP group; ip_group '*' is the network-wide row. */
export const registrationAdmissions = pgTable(
  "registration_admissions",
  {
    day: date("day").notNull(),
    ipGroup: text("ip_group").notNull(),
    count: integer("count").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.day, t.ipGroup] })],
);

/**
 * Admission attempts per minute bucket and IP group ('*' global), persisted
 * (docs/api.md#registration-quotas-and-counters).
 */
export const registrationAttempts = pgTable(
  "registration_attempts",
  {
    minute: timestamp("minute", { withTimezone: true }).notNull(),
    ipGroup: text("ip_group").notNull(),
    count: integer("count").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.minute, t.ipGroup] })],
);

/** Identities issued by public registration, with the hashed IP group they came from. */
export const registrationIssued = pgTable(
  "registration_issued",
  {
    agentId: uuid("agent_id")
      .primaryKey()
      .references(() => agentIdentities.agentId),
    ipGroup: text("ip_group").notNull(),
    issuedAt: timestamp("issued_at", { withTimezone: true }).notNull().defaultNow(),
  },
  // The console's registrations per hour (console/charts-queries.ts).
  (t) => [index("registration_issued_issued_idx").on(t.issuedAt)],
);

/**
 * The node-wide refusal public registration last reported (docs/events.md#registration-events):
 * `key_reserve`, `total_ceiling` or `network_daily` while issuance is refused for it, null once an
 * identity is issued again. One row. Moving it to another refusal writes one
 * `registration.at_reserve` or `registration.at_quota` event (migration 0019's trigger), so a storm
 * of refused registrations writes one event, not one per request.
 */
export const registrationRefusalState = pgTable(
  "registration_refusal_state",
  {
    singleton: smallint("singleton").primaryKey().default(1),
    refusing: text("refusing"),
    /** The UTC day of the refused request (the daily quota's day), for the event's figures. */
    day: date("day"),
    since: timestamp("since", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check("registration_refusal_state_one_row", sql`${t.singleton} = 1`),
    check(
      "registration_refusal_state_refusing_enum",
      sql`${t.refusing} IN ('key_reserve','total_ceiling','network_daily')`,
    ),
  ],
);
