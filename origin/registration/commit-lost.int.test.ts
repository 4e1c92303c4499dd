import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import { createTestDatabase, databaseBehindProxy, type TestDatabase } from "../../testing/database.ts";
import { type CommitHold, holdCommitsInserting } from "../../testing/held-commit.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { registerAsEdge } from "../../testing/register-as-edge.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import type { TcpProxy } from "../../testing/tcp-proxy.ts";
import { type DatabaseHandle, queryRows } from "../db/client.ts";
import { updateRegistrationPolicy } from "./policy-repository.ts";

// A registration whose issuance commits while the origin's connection to the database is lost:
// the commit reached Postgres, its answer never reached the origin (issuance.ts). Real origin,
// real Postgres behind a TCP proxy the test cuts; the test acts as the edge.
//
// The one thing made for the test: the issuance's COMMIT waits for a lock the test holds
// (testing/held-commit.ts), so the link is cut while that commit is in flight.

const EDGE_SECRET = randomBytes(32).toString("hex");
const ENV = {
  AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
  AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
  AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
};

describe("a registration whose commit's answer is lost with the database link", () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let handle: DatabaseHandle;
  let origin: TestOrigin;
  let commits: CommitHold;
  const db = () => testDb.handle.db;
  const freeKeys = async (): Promise<number> =>
    (
      await queryRows<{ n: number }>(db(), sql`select count(*)::int as n from key_pool where status = 'free'`)
    )[0]!.n;
  const publicIdentities = async (): Promise<{ agent_id: string; assigned_wallet: string }[]> =>
    queryRows(db(), sql`select agent_id, assigned_wallet from agent_identities where origin = 'public'`);

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 10);
    commits = await holdCommitsInserting(db(), "registration_issued", 770_077);
    ({ proxy, database: handle } = await databaseBehindProxy(testDb.url, { maxConnections: 4 }));
    origin = await startTestOrigin({ database: handle, env: ENV, workers: [] });
    await updateRegistrationPolicy(db(), { changes: { paused: false, keyReserve: 0 }, reason: "test" });
  });
  afterAll(async () => {
    await origin?.close();
    await handle?.close();
    await proxy?.close();
    await testDb?.drop();
  });

  /** A registration, sent once the test holds the commits of issuances; resolves once its commit waits. */
  const registerUntilItCommits = (ip: string) =>
    commits.whileCommitting("the issuance's commit", () => registerAsEdge(origin.base, EDGE_SECRET, ip));

  it("answers 201 with the token of the identity its commit made, rather than 503 for an identity nobody holds", async () => {
    const { release, pending } = await registerUntilItCommits("81.4.0.1");
    // The link drops while the commit is in Postgres's hands; the origin reaches it again at once.
    proxy.cut("reset");
    proxy.restore();
    // The commit goes through: Postgres learns of the lost client only when it answers.
    await release();
    const response = await pending;
    // The identity is made either way, once its commit has gone through.
    await expect.poll(async () => (await publicIdentities()).length, { timeout: 10_000 }).toBe(1);
    const made = await publicIdentities();
    // Answered 503 registration_unavailable, the client was told to try again (docs/api.md, "Error
    // codes"): its next registration made a second identity, and this one's token was never shown.
    expect(response.status).toBe(201);
    expect(response.body).toMatchObject({
      agent_id: made[0]!.agent_id,
      assigned_wallet: made[0]!.assigned_wallet,
    });
    // The token shown is the identity's own.
    const tokenId = parseBearerHeader(`Bearer ${(response.body as { token: string }).token}`)?.tokenId;
    const [owner] = await queryRows<{ agent_id: string }>(
      db(),
      sql`select agent_id from agent_tokens where token_id = ${tokenId ?? ""}`,
    );
    expect(owner?.agent_id).toBe(made[0]!.agent_id);
  });

  it("a commit that did not go through is refused 503 as before, and nothing is made", async () => {
    const before = await publicIdentities();
    const freeBefore = await freeKeys();
    const { release, pending } = await registerUntilItCommits("81.4.0.2");
    // The issuance's session ends in the middle of its commit: Postgres rolls it back.
    await commits.endWaitingCommit();
    await release();
    const response = await pending;
    expect(response.status).toBe(503);
    expect(response.body).toMatchObject({
      error: { code: "registration_unavailable", reason: "unavailable" },
    });
    expect(await publicIdentities()).toEqual(before);
    expect(await freeKeys()).toBe(freeBefore);
  });
});
