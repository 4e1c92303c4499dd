import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { type Db, queryRows } from "./client.ts";
import { migrateDatabase } from "./migrate.ts";
import { agentActions, agentIdentities } from "./schema.ts";

const hex = (bytes: number): string => randomBytes(bytes).toString("hex");

async function insertIdentity(db: Db, capabilities: string[]): Promise<string> {
  const [row] = await db
    .insert(agentIdentities)
    .values({
      assignedWallet: `0x${hex(20)}`,
      agentTransferKeyRef: hex(32),
      capabilities,
      origin: "operator",
    })
    .returning({ agentId: agentIdentities.agentId });
  return row!.agentId;
}

/** Postgres wraps constraint failures; drizzle wraps them again. Find the SQLSTATE and name. */
function pgError(error: unknown): { code?: string; constraint?: string } {
  let current: unknown = error;
  while (current && typeof current === "object") {
    const candidate = current as { code?: unknown; constraint?: unknown; cause?: unknown };
    if (typeof candidate.code === "string" && /^\d{5}$|^[0-9A-Z]{5}$/.test(candidate.code)) {
      return { code: candidate.code, constraint: String(candidate.constraint ?? "") };
    }
    current = candidate.cause;
  }
  return {};
}

describe("migrations and constraints", () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it("creates every table of the schema and seeds the paused registration policy", async () => {
    const { db } = testDb.handle;
    const tables = await queryRows<{ table_name: string }>(
      db,
      sql`select table_name from information_schema.tables where table_schema = 'public' order by 1`,
    );
    const names = tables.map((row) => row.table_name);
    expect(names).toEqual(
      [
        "agent_actions",
        "agent_identities",
        "agent_policies",
        "agent_tokens",
        "events",
        "funding_exception_changes",
        "funding_exceptions",
        "identity_changes",
        "identity_findings",
        "key_batches",
        "key_pool",
        "node_policy",
        "operator_passkeys",
        "operator_sessions",
        "outgoing_transactions",
        "passkey_approvals",
        "policy_changes",
        "registration_admissions",
        "registration_attempts",
        "registration_issued",
        "registration_policy",
        "registration_policy_changes",
        "registration_refusal_state",
        "restore_evidence",
        "schema_migrations",
        "sender_nonces",
        "state_count_changes",
        "state_counts",
        "transfer_daily_spend",
        "webhook_deliveries",
        "webhook_endpoint_changes",
        "webhook_endpoints",
        "x402_daily_authorizations",
        "x402_daily_payee_units",
        "x402_paid_answers",
        "x402_payment_ids",
        "x402_resources",
        "x402_reservations",
        "x402_reverts",
        "x402_settlements",
      ].sort(),
    );
    const policy = await queryRows(db, sql`select * from registration_policy`);
    expect(policy).toEqual([
      expect.objectContaining({
        id: 1,
        paused: true,
        per_ip_daily: 3,
        network_daily: 100,
        total_ceiling: 1000,
        key_reserve: 10,
        attempts_per_ip_per_minute: 10,
        attempts_global_per_minute: 120,
      }),
    ]);
  });

  it("keeps no index that another index of its table covers: its columns that one's first ones, under the same condition", async () => {
    // Every write of a row it covers writes its entry too, and a read it could serve the wider
    // one serves as well (migration 0034 dropped key_pool_free_idx, covered by key_pool_free_order_idx).
    const all = await queryRows<{
      table: string;
      name: string;
      unique: boolean;
      columns: string;
      condition: string | null;
    }>(
      testDb.handle.db,
      // Each key column with its operator class, order and collation: an index by the same column
      // under another class (text_pattern_ops, say) serves other reads.
      sql`select t.relname as table, i.relname as name, x.indisunique as unique,
            (select string_agg(concat_ws('/', x.indkey[k], x.indclass[k], x.indoption[k], x.indcollation[k]), ' '
                order by k)
              from generate_series(0, x.indnkeyatts - 1) k) as columns,
            pg_get_expr(x.indpred, x.indrelid) as condition
          from pg_index x join pg_class i on i.oid = x.indexrelid join pg_class t on t.oid = x.indrelid
            join pg_namespace n on n.oid = t.relnamespace join pg_am a on a.oid = i.relam
          where n.nspname = 'public' and a.amname = 'btree' and x.indexprs is null`,
    );
    // A unique index is a constraint as well: it stays whatever covers it.
    const indexes = all.filter((index) => !index.unique);
    const covered = indexes.flatMap((index) =>
      all
        .filter(
          (other) =>
            other.name !== index.name &&
            other.table === index.table &&
            other.condition === index.condition &&
            `${other.columns} `.startsWith(`${index.columns} `),
        )
        .map((other) => `${index.name} (${index.table}) is covered by ${other.name}`),
    );
    expect(indexes.length).toBeGreaterThan(10);
    expect(covered).toEqual([]);
  });

  it("is idempotent: a second run applies nothing", async () => {
    expect(await migrateDatabase(testDb.handle.db)).toEqual({ applied: [], restoredEvents: 0 });
  });

  it("refuses a capability outside read|faucet|transfer", async () => {
    const { db } = testDb.handle;
    await expect(insertIdentity(db, ["read", "admin"])).rejects.toSatisfy(
      (error) => pgError(error).constraint === "agent_identities_capabilities_enum",
    );
    await expect(insertIdentity(db, [])).rejects.toSatisfy(
      (error) => pgError(error).constraint === "agent_identities_capabilities_enum",
    );
    const agentId = await insertIdentity(db, ["read", "faucet", "transfer"]);
    expect(agentId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("holds (agent_id, kind, idempotency_key) unique, and only that", async () => {
    const { db } = testDb.handle;
    const agentId = await insertIdentity(db, ["read", "transfer"]);
    const otherAgent = await insertIdentity(db, ["read", "transfer"]);
    const action = { agentId, kind: "transfer", idempotencyKey: "k-1", requestHash: "h", amountUnits: "5" };
    await db.insert(agentActions).values(action);
    await expect(db.insert(agentActions).values(action)).rejects.toSatisfy(
      (error) => pgError(error).constraint === "agent_actions_idempotency_uq",
    );
    // The same key under another kind or another agent is a different action.
    await db.insert(agentActions).values({ ...action, kind: "faucet" });
    await db.insert(agentActions).values({ ...action, agentId: otherAgent });
    const count = await queryRows(
      db,
      sql`select count(*)::int as n from agent_actions where idempotency_key = 'k-1'`,
    );
    expect(count).toEqual([{ n: 3 }]);
  });

  it("stores money as exact numeric, beyond the range of a double", async () => {
    const { db } = testDb.handle;
    const agentId = await insertIdentity(db, ["read"]);
    const huge = "115792089237316195423570985008687907853269984665640564039457584007913129639935";
    const [row] = await db
      .insert(agentActions)
      .values({ agentId, kind: "x402", idempotencyKey: "big", requestHash: "h", amountUnits: huge })
      .returning({ amount: agentActions.amountUnits });
    expect(row!.amount).toBe(huge);
  });

  it("refuses a negative amount in every table money is counted from", async () => {
    const { db } = testDb.handle;
    const agentId = await insertIdentity(db, ["read", "transfer"]);
    const refusedBy = async (insert: ReturnType<typeof sql>): Promise<string | undefined> =>
      db.execute(insert).then(
        () => undefined,
        (error: unknown) => pgError(error).constraint,
      );
    const settlement = (units: string) =>
      sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
            valid_after, valid_before, signature)
          values (${`0x${hex(20)}`}, ${`0x${hex(32)}`}, ${`0x${hex(20)}`}, ${units}::numeric, '', '', 0, 1, '0x')
          returning id`;
    const transaction = (nonce: string, maxCost: string, fee: string | null) =>
      sql`insert into outgoing_transactions (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, fee_wei)
          values ('transfer', ${`0x${hex(20)}`}, ${nonce}::bigint, ${`0x${hex(32)}`}, '0x', ${maxCost}::numeric,
            ${fee}::numeric)`;

    expect(await refusedBy(settlement("-1"))).toBe("x402_settlements_amount_nonnegative");
    const [kept] = await queryRows<{ id: string }>(db, settlement("1"));
    expect(
      await refusedBy(
        sql`insert into x402_reservations (settlement_id, payer, amount_units, valid_before)
            values (${kept!.id}::uuid, ${`0x${hex(20)}`}, -1, 1)`,
      ),
    ).toBe("x402_reservations_amount_nonnegative");
    expect(await refusedBy(transaction("0", "-1", null))).toBe("outgoing_transactions_amounts_nonnegative");
    expect(await refusedBy(transaction("0", "1", "-1"))).toBe("outgoing_transactions_amounts_nonnegative");
    expect(await refusedBy(transaction("-1", "1", null))).toBe("outgoing_transactions_amounts_nonnegative");
    expect(
      await refusedBy(
        sql`insert into transfer_daily_spend (agent_id, day, spent_units, transfers)
            values (${agentId}::uuid, '2026-12-06', 1, -1)`,
      ),
    ).toBe("transfer_daily_spend_transfers_nonnegative");
    expect(
      await refusedBy(
        sql`insert into x402_daily_authorizations (agent_id, day, authorizations, units)
            values (${agentId}::uuid, '2026-12-06', 1, -1)`,
      ),
    ).toBe("x402_daily_authorizations_units_nonnegative");
    // Zero is an amount like any other.
    expect(await refusedBy(transaction("0", "0", "0"))).toBeUndefined();
  });
});
