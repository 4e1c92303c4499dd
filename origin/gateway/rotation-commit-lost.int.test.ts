import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import type { TokenRotationResponse } from "../../shared/token-schemas.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { holdLock } from "../../testing/held-lock.ts";
import { send } from "../../testing/http.ts";
import { waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { recordSecret } from "../../testing/secret-sink.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { startTcpProxy, type TcpProxy } from "../../testing/tcp-proxy.ts";
import { connectDatabase, type DatabaseHandle, queryRows } from "../db/client.ts";

// An agent's rotation of its own token whose commit goes through while the origin's connection to
// the database is lost: the old token is gone, and the new one is shown nowhere but in the answer
// (origin/auth/rotate-token.ts). Real origin, real Postgres behind a TCP proxy the test cuts.
//
// The one thing made for the test: a deferred trigger on agent_tokens that makes the rotation's
// COMMIT wait for an advisory lock the test holds, so the link is cut while that commit is in
// flight. Nothing else of the commit changes.

const COMMIT_HOLD = 770_079;
const COMMIT = "^(commit|COMMIT)";

describe("an agent's token rotation whose commit's answer is lost with the database link", () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let handle: DatabaseHandle;
  let origin: TestOrigin;
  const db = () => testDb.handle.db;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 2);
    await db().execute(
      sql.raw(`
      create function hold_token_commit() returns trigger language plpgsql as $$
      begin perform pg_advisory_xact_lock(${COMMIT_HOLD}); return null; end $$;
      create constraint trigger hold_token_commit after insert on agent_tokens
        deferrable initially deferred for each row execute function hold_token_commit();`),
    );
    proxy = await startTcpProxy(testDb.url);
    const proxied = new URL(testDb.url);
    proxied.host = new URL(proxy.url).host;
    handle = connectDatabase({ url: proxied.toString(), maxConnections: 4 });
    origin = await startTestOrigin({ database: handle, workers: [] });
  });
  afterAll(async () => {
    await origin?.close();
    await handle?.close();
    await proxy?.close();
    await testDb?.drop();
  });

  it("answers 200 with the new token its commit stored, rather than 503 while the old token no longer works", async () => {
    const identity = await provisionedIdentity(db(), { capabilities: ["read"], origin: "operator" });
    const hold = await holdLock(db(), sql`select pg_advisory_xact_lock(${COMMIT_HOLD})`);
    const pending = send(`${origin.base}/agent/v1/token/rotate`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${identity.token}` },
      body: "{}",
    });
    await waitUntilBlockedBy(db(), { holder: hold.pid, statement: COMMIT, what: "the rotation's commit" });
    proxy.cut("reset");
    proxy.restore();
    await hold.release();
    const response = await pending;
    const issued = (response.body as Partial<TokenRotationResponse>).token;
    if (issued) recordSecret(issued);
    const tokensOf = async (): Promise<string[]> =>
      (
        await queryRows<{ token_id: string }>(
          db(),
          sql`select token_id from agent_tokens where agent_id = ${identity.agentId}::uuid`,
        )
      ).map((row) => row.token_id);
    // The rotation went through: the old token is gone.
    const oldTokenId = parseBearerHeader(`Bearer ${identity.token}`)!.tokenId;
    await expect.poll(async () => (await tokensOf()).includes(oldTokenId), { timeout: 10_000 }).toBe(false);
    // Answered 503, the agent held only a token that no longer works: locked out of its wallet
    // until an operator rotated for it.
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({
      agent_id: identity.agentId,
      assigned_wallet: identity.assignedWallet,
    });
    expect(await tokensOf()).toEqual([parseBearerHeader(`Bearer ${issued ?? ""}`)?.tokenId]);
  });
});
