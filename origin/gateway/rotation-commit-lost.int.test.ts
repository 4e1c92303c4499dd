import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import type { TokenRotationResponse } from "../../shared/token-schemas.ts";
import { createTestDatabase, databaseBehindProxy, type TestDatabase } from "../../testing/database.ts";
import { type CommitHold, holdCommitsInserting } from "../../testing/held-commit.ts";
import { send } from "../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { recordSecret } from "../../testing/secret-sink.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import type { TcpProxy } from "../../testing/tcp-proxy.ts";
import { type DatabaseHandle, queryRows } from "../db/client.ts";

// An agent's rotation of its own token whose commit goes through while the origin's connection to
// the database is lost: the old token is gone, and the new one is shown nowhere but in the answer
// (origin/auth/rotate-token.ts). Real origin, real Postgres behind a TCP proxy the test cuts.
//
// The one thing made for the test: the rotation's COMMIT waits for a lock the test holds
// (testing/held-commit.ts), so the link is cut while that commit is in flight.

describe("an agent's token rotation whose commit's answer is lost with the database link", () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let handle: DatabaseHandle;
  let origin: TestOrigin;
  let commits: CommitHold;
  const db = () => testDb.handle.db;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 2);
    commits = await holdCommitsInserting(db(), "agent_tokens", 770_079);
    ({ proxy, database: handle } = await databaseBehindProxy(testDb.url, { maxConnections: 4 }));
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
    const { pending, release } = await commits.whileCommitting("the rotation's commit", () =>
      send(`${origin.base}/agent/v1/token/rotate`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${identity.token}` },
        body: "{}",
      }),
    );
    proxy.cut("reset");
    proxy.restore();
    await release();
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
