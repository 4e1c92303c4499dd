// Every named statement of the origin declares the columns its rows hold (db/prepared.ts); nothing
// checks a row as it is read (docs/development.md#named-statements-declare-their-rows). This test
// holds each declaration to the migrated schema: Postgres parses and describes every statement,
// without running it, and the columns it says the statement returns must be the declared ones, by
// name, in order, of the declared types.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { abandonStatement } from "../actions/abandon.ts";
import { approvedStatement } from "../actions/approved.ts";
import * as moneyBatch from "../actions/batch-store.ts";
import { expireHoldsStatement } from "../agent-actions/holds.ts";
import * as agentActions from "../agent-actions/repository.ts";
import { OUTBOX_DOMAINS } from "../compose.ts";
import { fillerClaimStatement, fillerStoreStatement } from "../outbox/fillers.ts";
import { outboxStoreStatements } from "../outbox/store.ts";
import { lockStatement } from "../outbox/submit.ts";
import { dueStatement, readDue, submittedStatement } from "../outbox/tracker.ts";
import { policyStatement } from "../policy/store.ts";
import { bindStatement, boundFingerprintStatement } from "../x402/payee/payment-ids.ts";
import { reservedStatement, verifyReservationStatement } from "../x402/payee/reservations.ts";
import { payerRevertsStatement } from "../x402/payee/revert-guard.ts";
import * as settle from "../x402/payee/settle.ts";
import * as authorize from "../x402/payer/authorize-repository.ts";
import { byKeyStatement } from "./by-key.ts";
import {
  COLUMN_TYPES,
  type Columns,
  columnDeclaration,
  driverClient,
  type PreparedStatement,
  preparedStatement,
} from "./prepared.ts";

type AnyStatement = PreparedStatement<string, Columns>;

/**
 * Every named statement the origin runs. The outbox's store statements carry the followers the
 * composition root hands the outbox (compose.ts), so they are built here from the same ones.
 */
function originStatements(): AnyStatement[] {
  return [
    agentActions.claimStatement,
    agentActions.byIdStatement,
    agentActions.byKeysStatement,
    abandonStatement,
    expireHoldsStatement,
    approvedStatement,
    policyStatement,

    moneyBatch.claimStatement,
    moneyBatch.lockCeilingsStatement,
    moneyBatch.factsStatement,
    moneyBatch.storeStatement,
    lockStatement,
    byKeyStatement,
    fillerClaimStatement,
    fillerStoreStatement(OUTBOX_DOMAINS.fillerRows),
    settle.claimStatement,
    settle.storeStatement,
    reservedStatement,
    verifyReservationStatement,
    payerRevertsStatement,
    boundFingerprintStatement,
    bindStatement,
    authorize.signLockActionStatement,
    authorize.signLockDayStatement,
    authorize.signStoreStatement,
    authorize.signExpireStatement,
    authorize.signHoldStatement,
    authorize.signDenyStatement,
    submittedStatement,
    dueStatement,
    ...Object.values(outboxStoreStatements(OUTBOX_DOMAINS.followers)),
  ];
}

const originRoot = path.resolve(import.meta.dirname, "..");

/** The origin's source files, tests aside. */
function sourceFiles(dir = ""): string[] {
  return readdirSync(path.join(originRoot, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = dir ? `${dir}/${entry.name}` : entry.name;
    if (entry.isDirectory()) return sourceFiles(relative);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts") ? [relative] : [];
  });
}

/**
 * Files whose statements' names are composed, and how this test builds them: defineKindStore's
 * from each kind's name (the domains' exports above), the store's from the outbox's followers.
 */
const COMPOSED_NAMES = new Set(["outbox/kind.ts", "outbox/store.ts"]);

/**
 * The statement names the origin's source spells out, by file, and the files that compose names
 * of which this test knows nothing: a statement not in originStatements shows up in either.
 */
function namesInSource(): { named: { file: string; name: string }[]; composedElsewhere: string[] } {
  const named: { file: string; name: string }[] = [];
  const composedElsewhere: string[] = [];
  for (const file of sourceFiles()) {
    if (file === "db/prepared.ts") continue;
    const text = readFileSync(path.join(originRoot, file), "utf8");
    for (const [, first] of text.matchAll(/\bpreparedStatement(?:<[^>(]*>)?\(\s*([^,]+),/g)) {
      const literal = /^"([a-z0-9_]+)"$/.exec(first!.trim());
      if (literal) named.push({ file, name: literal[1]! });
      else if (!COMPOSED_NAMES.has(file)) composedElsewhere.push(file);
    }
    for (const [, domain] of text.matchAll(/\bdefineKindStore(?:<[^>(]*>)?\(\{\s*name:\s*"([a-z0-9_]+)"/g)) {
      named.push({ file, name: `${domain}_store_batch` });
    }
  }
  return { named, composedElsewhere };
}

type Described = { parameters: number; columns: { name: string; typeOid: number }[] };

/**
 * Parses `text` as an unnamed statement and asks Postgres to describe it (the extended protocol's
 * Parse, Describe, Sync): its parameters and its result columns, with nothing run.
 */
function describeStatement(client: pg.Client, text: string): Promise<Described> {
  return new Promise((resolve, reject) => {
    const described: Described = { parameters: 0, columns: [] };
    let failure: Error | undefined;
    const ignore = (): void => {};
    const parameters = (message: { parameterCount: number }): void => {
      described.parameters = message.parameterCount;
    };
    let connection: pg.Connection | undefined;
    client.query({
      submit(submitted) {
        connection = submitted;
        connection.on("parameterDescription", parameters);
        connection.parse({ name: "", text, types: [] }, false);
        connection.describe({ type: "S", name: "" }, false);
        connection.sync();
      },
      handleRowDescription(message: { fields: { name: string; dataTypeID: number }[] }) {
        described.columns = message.fields.map((field) => ({ name: field.name, typeOid: field.dataTypeID }));
      },
      handleError(error: Error) {
        failure = error;
      },
      handleReadyForQuery() {
        connection?.off("parameterDescription", parameters);
        if (failure) reject(failure);
        else resolve(described);
      },
      handleDataRow: ignore,
      handleCommandComplete: ignore,
      handleEmptyQuery: ignore,
      handlePortalSuspended: ignore,
      handleCopyInResponse: ignore,
      handleCopyData: ignore,
    } as pg.Submittable);
  });
}

/** What is wrong with `statement`'s declaration against what Postgres described, one line each. */
function mismatches(statement: AnyStatement, described: Described, typeNames: Map<number, string>): string[] {
  const found: string[] = [];
  if (described.parameters !== statement.params.length) {
    found.push(`sends ${statement.params.length} values, Postgres expects ${described.parameters}`);
  }
  const declared = Object.entries(statement.columns).map(([name, column]) => {
    const { type, nullable } = columnDeclaration(column);
    return { name, type, nullable, pgType: COLUMN_TYPES[type] };
  });
  const returned = described.columns.map((column) => ({
    name: column.name,
    pgType: typeNames.get(column.typeOid) ?? `type oid ${column.typeOid}`,
  }));
  for (let n = 0; n < Math.max(declared.length, returned.length); n++) {
    const want = declared[n];
    const got = returned[n];
    const wanted = want && `${want.name} ${want.type}${want.nullable ? "?" : ""} (${want.pgType})`;
    if (!want) found.push(`column ${n + 1}: returns ${got!.name} ${got!.pgType}, not declared`);
    else if (!got) found.push(`column ${n + 1}: declares ${wanted}, not returned`);
    else if (want.name !== got.name || want.pgType !== got.pgType) {
      found.push(`column ${n + 1}: declares ${wanted}, returns ${got.name} ${got.pgType}`);
    }
  }
  return found;
}

/**
 * Every node of the generic plan a connection would keep for `statement`, made on the tables as
 * they are (a test's empty ones), with the batch's planner settings (db/by-key.ts) or without.
 */
async function planNodesOn(
  client: pg.Client,
  statement: AnyStatement,
  byKey: boolean,
): Promise<Record<string, unknown>[]> {
  await client.query("begin");
  try {
    if (byKey) await client.query(byKeyStatement.text);
    await client.query("set local plan_cache_mode = force_generic_plan");
    await client.query(`prepare plan_probe as ${statement.text}`);
    const values = statement.params.map(() => "null").join(", ");
    const { rows } = await client.query<{ "QUERY PLAN": unknown }>(
      `explain (format json) execute plan_probe${values ? `(${values})` : ""}`,
    );
    const nodes: Record<string, unknown>[] = [];
    const walk = (node: Record<string, unknown>): void => {
      nodes.push(node);
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk((rows[0]!["QUERY PLAN"] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    return nodes;
  } finally {
    await client.query("rollback");
    await client.query("deallocate plan_probe");
  }
}

describe("the settle batch's reservations read, planned on a busy node's analyzed table", () => {
  // The plans a connection keeps are made at its first batch: on a new node's empty tables, or,
  // once the origin restarts or its pool opens a connection, on tables autovacuum has analyzed.
  // There, the generic plan of the branch of settlements mined after the balance's block read the
  // validity window's index: every payer's settlements still valid, to keep the batch's payers'
  // (bench:x402, BENCH_PG_STATEMENTS: 1.3 ms and 300 to 400 buffer hits a batch, against 0.1 ms and 40).
  let testDb: TestDatabase;
  let client: pg.Client;

  beforeAll(async () => {
    testDb = await createTestDatabase({ maxConnections: 1 });
    client = new pg.Client({ connectionString: testDb.url });
    await client.connect();
    // 40 payers, 100 settlements each, mined one a block and all still inside their validity.
    await client.query("begin");
    await client.query("set local session_replication_role = replica"); // no x402_settlements rows
    await client.query(
      `insert into x402_reservations (settlement_id, payer, amount_units, valid_before, tx_hash, settled_block)
       select gen_random_uuid(), '0x' || lpad(to_hex(n % 40), 40, '0'), 10000,
              extract(epoch from now())::bigint + 60, '0x' || lpad(to_hex(n), 64, '0'), n
       from generate_series(1, 4000) n`,
    );
    await client.query("commit");
    await client.query("analyze x402_reservations");
  });
  afterAll(async () => {
    await client?.end();
    await testDb?.drop();
  });

  it("reads each payer's own range of (payer, settled_block), as /verify's read does, not the validity window", async () => {
    const scans = (await planNodesOn(client, reservedStatement, true))
      .filter((node) => node["Relation Name"] === "x402_reservations")
      .map((node) => `${node["Node Type"]} using ${node["Index Name"]} on ${node["Index Cond"]}`);
    expect(scans).toEqual([
      expect.stringMatching(/^Index Scan using x402_reservations_payer_block_idx on \(\(payer = ANY/),
      expect.stringMatching(/^Index Scan using x402_reservations_payer_block_idx on \(\(payer = ANY/),
    ]);
    const verifyScans = (await planNodesOn(client, verifyReservationStatement, false))
      .filter((node) => node["Relation Name"] === "x402_reservations")
      .map((node) => `${node["Node Type"]} using ${node["Index Name"]} on ${node["Index Cond"]}`);
    expect(verifyScans).toEqual([
      expect.stringMatching(
        /^Index Scan using x402_reservations_payer_block_idx on \(\(payer = \$\d+\) AND \(settled_block IS NULL\)\)/,
      ),
    ]);
  });
});

describe("the reads run outside a batch, planned on a new node's small analyzed tables", () => {
  // Each is run through a plan its connection keeps from the sixth run until a table it reads is
  // analyzed again. bench:money's growing run analyzed the database while outgoing_transactions held
  // a page of rows, as autovacuum does on a new node, and the tracker's read of what is due kept a
  // plan that read the table whole and, for each row, the table whole again for a filler beside it:
  // quadratic, 1.8 s and 456,763 buffer hits a call at 1,960 rows, 5.7 s at 3,055 (auto_explain).
  // It runs under the outbox's planner settings (runByKey) for that reason.
  let testDb: TestDatabase;
  let pool: pg.Pool;

  beforeAll(async () => {
    testDb = await createTestDatabase({ maxConnections: 1 });
    pool = driverClient<pg.Pool>(testDb.handle.db);
    await pool.query(
      `insert into outgoing_transactions (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, status)
       select 'transfer', '0x' || lpad(to_hex(n % 4), 40, '0'), n, '0x' || lpad(to_hex(n), 64, '0'), '0x02', 0, 'confirmed'
       from generate_series(1, 20) n`,
    );
    await pool.query("analyze");
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /**
   * The scans of the plan the one connection keeps for `statement` after `run` ran it as the
   * origin does, eight times (past the runs the plan cache plans anew), shown for `values`.
   */
  const keptScans = async (
    statement: AnyStatement,
    values: Record<string, string | number>,
    run: () => Promise<unknown>,
  ) => {
    for (let n = 0; n < 8; n++) await run();
    const client = await pool.connect();
    try {
      await client.query("begin");
      await client.query("set local plan_cache_mode = force_generic_plan");
      const { rows } = await client.query<{ "QUERY PLAN": { Plan: Record<string, unknown> }[] }>(
        `explain (format json) execute ${statement.name}(${statement.params.map((param) => `'${"placeholder" in param ? values[param.placeholder] : param.fixed}'`).join(", ")})`,
      );
      const scans: string[] = [];
      const walk = (node: Record<string, unknown>): void => {
        const relation = node["Relation Name"];
        if (typeof relation === "string" && String(node["Node Type"]).endsWith("Scan")) {
          scans.push(
            `${node["Node Type"]} on ${relation}${node["Index Name"] ? ` using ${node["Index Name"]}` : ""}`,
          );
        }
        for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
      };
      walk(rows[0]!["QUERY PLAN"][0]!.Plan);
      return scans.sort();
    } finally {
      await client.query("rollback");
      client.release();
    }
  };

  it("an action read by its id (GET /v1/actions/{id}): the primary keys (agent-actions/repository.ts)", async () => {
    const id = "00000000-0000-4000-8000-000000000001";
    const read = () => agentActions.findAction(testDb.handle.db, id, id);
    expect(await read()).toBeUndefined();
    expect(await keptScans(agentActions.byIdStatement, { actionId: id, agentId: id }, read)).toEqual([
      "Index Scan on agent_actions using agent_actions_pkey",
      "Index Scan on outgoing_transactions using outgoing_transactions_pkey",
    ]);
  });

  it("what the tracker reads as due: the in-flight index and the fillers' index (outbox/tracker.ts)", async () => {
    const read = () => readDue(testDb.handle.db, { signedGraceMs: 5_000, resendAfterMs: 30_000 });
    expect(await read()).toEqual([]);
    expect(await keptScans(dueStatement, { signedGrace: 5, resendAfter: 30 }, read)).toEqual([
      "Index Only Scan on outgoing_transactions using outgoing_transactions_sender_nonce_filler_uq",
      "Index Scan on outgoing_transactions using outgoing_transactions_in_flight_idx",
    ]);
  });
});

describe("named statements", () => {
  let testDb: TestDatabase;
  let client: pg.Client;

  beforeAll(async () => {
    testDb = await createTestDatabase({ maxConnections: 1 });
    client = new pg.Client({ connectionString: testDb.url });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await testDb?.drop();
  });
  const planNodes = (statement: AnyStatement, byKey: boolean) => planNodesOn(client, statement, byKey);

  it("each returns, on the migrated schema, the columns it declares: names, order and types", async () => {
    const statements = originStatements();
    const described = new Map<AnyStatement, Described>();
    const failures: string[] = [];
    for (const statement of statements) {
      try {
        described.set(statement, await describeStatement(client, statement.text));
      } catch (error) {
        failures.push(`${statement.name}: Postgres refuses it: ${(error as Error).message}`);
      }
    }
    const oids = [...new Set([...described.values()].flatMap((each) => each.columns.map((c) => c.typeOid)))];
    const { rows } = await client.query<{ oid: number; name: string }>(
      "select oid::int as oid, format_type(oid, null) as name from pg_type where oid = any($1::oid[])",
      [oids],
    );
    const typeNames = new Map(rows.map((row) => [row.oid, row.name]));
    for (const [statement, each] of described) {
      failures.push(...mismatches(statement, each, typeNames).map((line) => `${statement.name}: ${line}`));
    }
    const names = statements.map((statement) => statement.name);
    for (const name of new Set(names.filter((name, n) => names.indexOf(name) !== n))) {
      failures.push(`${name}: two statements share the name (a connection keeps one text per name)`);
    }
    expect(failures).toEqual([]);
  });

  it("refuses a statement name longer than the 63 bytes Postgres keeps of it", () => {
    expect(() => preparedStatement(`a${"b".repeat(62)}`, sql`select 1`)).not.toThrow();
    expect(() => preparedStatement(`a${"b".repeat(63)}`, sql`select 1`)).toThrow(RangeError);
  });

  it("plans the money batch's claim and store by key on an empty table, under the batch's settings (outbox/submit.ts byKeyStatement)", async () => {
    // A connection plans a named statement once and keeps the generic plan; made on a new node's
    // empty tables, a plan that reads agent_actions whole (or a partial index's every entry,
    // through a bitmap) is kept as the table grows.
    const scansOfActions = async (statement: AnyStatement, byKey: boolean): Promise<string[]> =>
      planNodes(statement, byKey)
        .then((nodes) => nodes.filter((node) => node["Relation Name"] === "agent_actions"))
        .then((nodes) => nodes.map((node) => String(node["Node Type"])));
    for (const statement of [moneyBatch.claimStatement, moneyBatch.storeStatement]) {
      const nodes = await scansOfActions(statement, true);
      expect(nodes.length, statement.name).toBeGreaterThan(0);
      expect(
        nodes.filter((node) => node !== "ModifyTable" && !node.startsWith("Index")),
        statement.name,
      ).toEqual([]);
    }
    // Without the batch's settings, the claim's plan reads the partial index through a bitmap.
    expect(await scansOfActions(moneyBatch.claimStatement, false)).not.toEqual(["Index Scan"]);
  });

  it("plans the x402 batch's statements and the outbox's moves by key on empty tables: every scan of a batch's tables has an index condition (db/by-key.ts)", async () => {
    // Made on a new node's empty tables with only sequential and bitmap scans off, these plans
    // joined by hash over a whole index (the store read x402_settlements' primary key end to end)
    // or read a table whole (the receipts' statement, outgoing_transactions), once a batch;
    // the receipts of submitted transactions read the in-flight index by status.
    const tables = new Set([
      "outgoing_transactions",
      "x402_settlements",
      "x402_reservations",
      "x402_reverts",
      "agent_actions",
      "sender_nonces",
    ]);
    const unkeyedScans = async (statement: AnyStatement): Promise<string[]> =>
      (await planNodes(statement, true))
        .filter((node) => {
          const relation = node["Relation Name"];
          return (
            typeof relation === "string" && tables.has(relation) && String(node["Node Type"]).endsWith("Scan")
          );
        })
        // A search by status alone is no key: the in-flight index read by status, every entry of it
        // filtered by key (a receipt of a submitted transaction did, outbox/store.ts).
        .filter((node) => !("Index Cond" in node) || /^\(*status\b/.test(String(node["Index Cond"])))
        .map((node) => `${node["Node Type"]} on ${node["Relation Name"]}`);
    const statements = [
      settle.claimStatement,
      settle.storeStatement,
      reservedStatement,
      ...Object.values(outboxStoreStatements(OUTBOX_DOMAINS.followers)),
    ];
    for (const statement of statements) expect(await unkeyedScans(statement), statement.name).toEqual([]);
  });

  it("plans the statements a verify or a settle with a payment id runs on its own, outside a batch, by key on empty tables", async () => {
    // Named, each is planned once for a connection's life (plansOnce, db/client.ts), on whatever the
    // tables held then: a new node's are empty, where reading a table whole can look as cheap.
    const statements = [verifyReservationStatement, boundFingerprintStatement, bindStatement];
    for (const statement of statements) {
      const unkeyed = (await planNodes(statement, false))
        .filter(
          (node) =>
            typeof node["Relation Name"] === "string" &&
            String(node["Node Type"]).endsWith("Scan") &&
            !("Index Cond" in node),
        )
        .map((node) => `${node["Node Type"]} on ${node["Relation Name"]}`);
      expect(unkeyed, statement.name).toEqual([]);
    }
  });

  it("reads the approved transfers through the index of the actions to sign, on empty tables (actions/approved.ts)", async () => {
    // Once a second on every origin, for as long as a connection keeps the plan it made on a new
    // node's empty tables: `kind = 'transfer'` as the idempotency index's condition read every
    // transfer ever made (bench:money, BENCH_PG_STATEMENTS: 30 ms and 15,470 buffer hits a call).
    const scans = (await planNodes(approvedStatement, true))
      .filter((node) => node["Relation Name"] === "agent_actions")
      .map((node) => `${node["Node Type"]} using ${node["Index Name"]}`);
    expect(scans).toEqual(["Index Scan using agent_actions_to_sign_idx"]);
  });

  it("plans no statement to search an index by a column after its first, on empty tables, with the batch's settings or without", async () => {
    // An index searched by its second column and not its first is read whole: the approved
    // transfers' read, planned on empty tables, searched the idempotency index (agent_id, kind, …)
    // by kind alone, once a second, over every transfer the node had made (actions/approved.ts).
    const { rows } = await client.query<{ index: string; leading: string }>(
      `select c.relname as index, a.attname as leading
         from pg_index i join pg_class c on c.oid = i.indexrelid
         join pg_attribute a on a.attrelid = i.indrelid and a.attnum = i.indkey[0]
        where c.relnamespace = 'public'::regnamespace`,
    );
    const leadingColumn = new Map(rows.map((row) => [row.index, row.leading]));
    const found: string[] = [];
    for (const statement of originStatements()) {
      for (const byKey of [false, true]) {
        for (const node of await planNodes(statement, byKey)) {
          const index = node["Index Name"];
          const condition = node["Index Cond"];
          if (typeof index !== "string" || typeof condition !== "string") continue;
          const leading = leadingColumn.get(index);
          // An expression index (no leading column) is left to the other tests.
          if (leading === undefined) continue;
          if (!new RegExp(`\\(\\(?(\\w+\\.)?${leading}\\b`).test(condition)) {
            found.push(`${statement.name}${byKey ? " (by key)" : ""}: ${index} searched by ${condition}`);
          }
        }
      }
    }
    expect(found).toEqual([]);
  });

  it("expires held and approved actions through their indexes, never reading agent_actions whole, on empty tables (agent-actions/holds.ts)", async () => {
    // On every sweep of every origin's tracker. Planned on empty tables without the batch's
    // settings, the update joined the expired rows by hash over a sequential scan of agent_actions,
    // and the approved branch searched the idempotency index by kind (the test below).
    const scans = (await planNodes(expireHoldsStatement, true))
      .filter(
        (node) => node["Relation Name"] === "agent_actions" && String(node["Node Type"]).endsWith("Scan"),
      )
      .map((node) => `${node["Node Type"]} using ${node["Index Name"]}`);
    expect(scans.sort()).toEqual([
      "Index Scan using agent_actions_held_idx",
      "Index Scan using agent_actions_pkey",
      "Index Scan using agent_actions_to_sign_idx",
    ]);
  });

  it("covers every statement the origin's source names", () => {
    const covered = new Set(originStatements().map((statement) => statement.name));
    const { named, composedElsewhere } = namesInSource();
    expect(named.length).toBeGreaterThan(0);
    const missing = named
      .filter(({ name }) => !covered.has(name))
      .map(({ file, name }) => `${name} (origin/${file}): add it to originStatements`);
    const unknown = composedElsewhere.map(
      (file) => `origin/${file} composes a statement's name: build its statements in originStatements`,
    );
    expect([...missing, ...unknown]).toEqual([]);
  });
});
