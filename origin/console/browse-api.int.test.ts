import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  actionPageSchema,
  identityPageSchema,
  searchResultSchema,
} from "../../shared/console-browse-schemas.ts";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { queryRows } from "../db/client.ts";

// The console's browsing routes against the real origin and Postgres: the paged lists walk every
// row once, newest first; search lands on what a query names by its shape; a malformed query is a
// 400 naming what to fix, an unknown id a 404. (The money parts, a refusal and a settlement, are
// walked in a browser on a whole stack: console-walk.int.test.ts.)

const secrets = consoleSecrets();

describe("the console's search and paged lists", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  const made: { agentId: string; wallet: string }[] = [];
  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 7);
    origin = await startTestOrigin({ database: testDb.handle, env: secrets.env });
    for (let i = 0; i < 7; i++) {
      const result = await provisionedIdentity(testDb.handle.db, {
        capabilities: ["read"],
        origin: "public",
      });
      made.push({ agentId: result.agentId, wallet: result.assignedWallet });
    }
  });
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });
  const calls = () => consoleCalls(origin.base, { admin: secrets.adminToken });

  it("pages through every identity once, newest first, 3 at a time", async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const response = await calls().get(`/identities?limit=3${cursor ? `&cursor=${cursor}` : ""}`);
      expect(response.status).toBe(200);
      const page = identityPageSchema.parse(response.body);
      seen.push(...page.items.map((item) => item.agent_id));
      cursor = page.next_cursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(made.map((agent) => agent.agentId).reverse());
  });

  it("finds an agent by its id and by its wallet (any case), an action by its idempotency key; nothing for an unknown hash", async () => {
    const [agent] = made;
    const byWallet = searchResultSchema.parse(
      (await calls().get(`/search?q=${agent!.wallet.toUpperCase().replace("0X", "0x")}`)).body,
    );
    expect(byWallet).toMatchObject({ read_as: "wallet", matches: [{ kind: "agent", id: agent!.agentId }] });
    const byId = searchResultSchema.parse((await calls().get(`/search?q=${agent!.agentId}`)).body);
    expect(byId.matches).toEqual([{ kind: "agent", id: agent!.agentId, label: "agent id" }]);
    // An action written as the gateway writes one, under the agent's key.
    await testDb.handle.db.execute(
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, status, error_code, error_message)
          values (${agent!.agentId}, 'transfer', 'order-42', 'h', 'failed', 'limit_exceeded', 'over the daily limit')`,
    );
    const byKey = searchResultSchema.parse((await calls().get("/search?q=order-42")).body);
    expect(byKey.read_as).toBe("idempotency_key");
    expect(byKey.matches).toHaveLength(1);
    const actions = actionPageSchema.parse((await calls().get(`/actions?agent_id=${agent!.agentId}`)).body);
    expect(actions.items).toMatchObject([
      {
        action_id: byKey.matches[0]!.id,
        status: "failed",
        error_code: "limit_exceeded",
        error_message: "over the daily limit",
      },
    ]);
    const none = searchResultSchema.parse((await calls().get(`/search?q=0x${"ab".repeat(32)}`)).body);
    expect(none).toMatchObject({ read_as: "tx_hash", matches: [] });
  });

  it("finds the x402 settlements a wallet that is no agent's paid, newest first, by that wallet (any case)", async () => {
    const stranger = `0x${"c3".repeat(20)}`;
    // Settlement rows as the settler leaves them (seeded: no chain is needed to find them).
    const settle = (nonce: string, status: string, at: string) =>
      testDb.handle.db.execute(sql`insert into x402_settlements (payer, nonce, pay_to, amount_units,
          requirement_hash, payload_hash, valid_after, valid_before, signature, status, created_at)
        values (${stranger}, ${`0x${nonce.repeat(64)}`}, ${`0x${"42".repeat(20)}`}, 10000, 'r', 'p', 0, 1, '0x',
          ${status}, ${at})`);
    await settle("1", "failed", "2026-01-01T00:00:00Z");
    await settle("2", "settled", "2026-01-02T00:00:00Z");
    const [older, newer] = await queryRows<{ id: string }>(
      testDb.handle.db,
      sql`select id from x402_settlements where payer = ${stranger} order by created_at`,
    );
    const found = searchResultSchema.parse(
      (await calls().get(`/search?q=${stranger.toUpperCase().replace("0X", "0x")}`)).body,
    );
    expect(found).toMatchObject({
      read_as: "wallet",
      matches: [
        { kind: "settlement", id: newer!.id },
        { kind: "settlement", id: older!.id },
      ],
    });
    // An agent's wallet still names the agent alone.
    const [agent] = made;
    const byAgent = searchResultSchema.parse((await calls().get(`/search?q=${agent!.wallet}`)).body);
    expect(byAgent.matches).toEqual([
      { kind: "agent", id: agent!.agentId, label: `wallet of agent ${agent!.agentId}` },
    ]);
    await testDb.handle.db.execute(sql`delete from x402_settlements where payer = ${stranger}`);
  });

  it("finds an action by an idempotency key shaped as a UUID or a transaction hash, exact as the agent chose it", async () => {
    const [agent] = made;
    const uuidKey = randomUUID();
    const hashKey = `0x${"5e".repeat(32)}`;
    // Actions written as the gateway writes them, under keys the agent chose.
    const [uuidAction, hashAction] = await queryRows<{ action_id: string }>(
      testDb.handle.db,
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, status)
          values (${agent!.agentId}, 'transfer', ${uuidKey}, 'h', 'confirmed'),
                 (${agent!.agentId}, 'faucet', ${hashKey}, 'h', 'confirmed')
          returning action_id::text as action_id`,
    );
    const byUuidKey = searchResultSchema.parse((await calls().get(`/search?q=${uuidKey}`)).body);
    expect(byUuidKey).toMatchObject({
      read_as: "uuid",
      matches: [{ kind: "action", id: uuidAction!.action_id }],
    });
    const byHashKey = searchResultSchema.parse((await calls().get(`/search?q=${hashKey}`)).body);
    expect(byHashKey).toMatchObject({
      read_as: "tx_hash",
      matches: [{ kind: "action", id: hashAction!.action_id }],
    });
    // Keys are case-sensitive: the same UUID in capitals is no key of this agent's.
    const upper = searchResultSchema.parse((await calls().get(`/search?q=${uuidKey.toUpperCase()}`)).body);
    expect(upper.matches).toEqual([]);
    await testDb.handle.db.execute(
      sql`delete from agent_actions where idempotency_key in (${uuidKey}, ${hashKey})`,
    );
  });

  it("lists the actions in one state (held: what waits for an approval), of all agents or one, newest first", async () => {
    const [first, second] = made;
    const write = (agentId: string, key: string, status: string) =>
      testDb.handle.db.execute(
        sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, status, amount_units, to_address)
            values (${agentId}, 'transfer', ${key}, 'h', ${status}, 3000000, '0x00000000000000000000000000000000000000b1')`,
      );
    await write(first!.agentId, "held-1", "held");
    await write(first!.agentId, "done-1", "confirmed");
    await write(second!.agentId, "held-2", "held");
    const keys = async (path: string) =>
      actionPageSchema.parse((await calls().get(path)).body).items.map((item) => item.idempotency_key);
    expect(await keys("/actions?status=held")).toEqual(["held-2", "held-1"]);
    expect(await keys(`/actions?status=held&agent_id=${first!.agentId}`)).toEqual(["held-1"]);
    expect(await keys("/actions?status=held&limit=1")).toEqual(["held-2"]);
    expect(await keys(`/actions?status=confirmed&agent_id=${first!.agentId}`)).toEqual(["done-1"]);
  });

  it("answers 400 naming the parameter for a bad query, 404 for an unknown id, 401 without the token", async () => {
    for (const [path, message] of [
      ["/search", "q must be given"],
      ["/search?q=", "q must not be empty"],
      [`/search?q=${"x".repeat(129)}`, "q must be at most 128 characters"],
      ["/search?q=a%01b", "q must not hold control characters"],
      ["/identities?limit=0", "limit must be a whole number from 1 to 100"],
      ["/identities?limit=101", "limit must be a whole number from 1 to 100"],
      ["/identities?cursor=yesterday", "cursor must be a next_cursor this API answered"],
      // The cursor's shape, but no time or id a row can have: refused, never put to the database.
      ...[
        "2026-13-01T00:00:00.000000Z_00000000-0000-4000-8000-000000000000",
        "2026-02-30T00:00:00.000000Z_00000000-0000-4000-8000-000000000000",
        "0000-01-01T00:00:00.000000Z_00000000-0000-4000-8000-000000000000",
        "2026-01-01T24:00:00.000000Z_00000000-0000-4000-8000-000000000000",
        "2026-01-01T00:00:00.000000Z_0000000000000-4000-8000-000000000000",
      ].flatMap((cursor) =>
        ["identities", "actions", "settlements"].map(
          (list) => [`/${list}?cursor=${cursor}`, "cursor must be a next_cursor this API answered"] as const,
        ),
      ),
      ["/identities?offset=3", "unknown query parameter offset"],
      ["/actions?agent_id=nope", "agent_id must be an agent id (a UUID)"],
      ["/actions?status=pending", "status must be one of requested, held, approved"],
      ["/identities/nope", "agent_id must be an agent id (a UUID)"],
      ["/settlements/nope", "settlement_id must be a settlement id (a UUID)"],
    ] as const) {
      const response = await calls().get(path);
      expect(response.status, path).toBe(400);
      expect(response.body, path).toMatchObject({ error: { code: "validation_failed" } });
      expect((response.body as { error: { message: string } }).error.message, path).toContain(message);
    }
    const unknown = "00000000-0000-4000-8000-000000000000";
    for (const path of [`/identities/${unknown}`, `/actions/${unknown}`, `/settlements/${unknown}`]) {
      const response = await calls().get(path);
      expect(response.status, path).toBe(404);
      expect(response.body, path).toMatchObject({ error: { code: "not_found" } });
    }
    expect((await consoleCalls(origin.base, {}).get(`/search?q=${made[0]!.agentId}`)).status).toBe(401);
  });
});
