import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { holdLock } from "../../testing/held-lock.ts";
import type { TestResponse } from "../../testing/http.ts";
import { waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { registerAsEdge } from "../../testing/register-as-edge.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import { startTcpProxy, type TcpProxy } from "../../testing/tcp-proxy.ts";
import { connectDatabase, type DatabaseHandle, queryRows } from "../db/client.ts";
import { updateRegistrationPolicy } from "./policy-repository.ts";

// A registration whose issuance commits while the origin's connection to the database is lost:
// the commit reached Postgres, its answer never reached the origin (issuance.ts). Real origin,
// real Postgres behind a TCP proxy the test cuts; the test acts as the edge.
//
// The one thing made for the test: a deferred trigger on registration_issued that makes the
// issuance's COMMIT wait for an advisory lock the test holds, so the link is cut while that
// commit is in flight, and not somewhere near it. Nothing else of the commit changes.

const EDGE_SECRET = randomBytes(32).toString("hex");
const ENV = {
  AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
  AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
  AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
};
const COMMIT_HOLD = 770_077;
/** The issuance's COMMIT, as pg_stat_activity shows it. */
const COMMIT = "^(commit|COMMIT)";

describe("a registration whose commit's answer is lost with the database link", () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let handle: DatabaseHandle;
  let origin: TestOrigin;
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
    await db().execute(
      sql.raw(`
      create function hold_issuance_commit() returns trigger language plpgsql as $$
      begin perform pg_advisory_xact_lock(${COMMIT_HOLD}); return null; end $$;
      create constraint trigger hold_issuance_commit after insert on registration_issued
        deferrable initially deferred for each row execute function hold_issuance_commit();`),
    );
    proxy = await startTcpProxy(testDb.url);
    const proxied = new URL(testDb.url);
    proxied.host = new URL(proxy.url).host;
    handle = connectDatabase({ url: proxied.toString(), maxConnections: 4 });
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
  async function registerUntilItCommits(ip: string) {
    const hold = await holdLock(db(), sql`select pg_advisory_xact_lock(${COMMIT_HOLD})`);
    const pending: Promise<TestResponse> = registerAsEdge(origin.base, EDGE_SECRET, ip);
    await waitUntilBlockedBy(db(), { holder: hold.pid, statement: COMMIT, what: "the issuance's commit" });
    return { hold, pending };
  }

  it("answers 201 with the token of the identity its commit made, rather than 503 for an identity nobody holds", async () => {
    const { hold, pending } = await registerUntilItCommits("81.4.0.1");
    // The link drops while the commit is in Postgres's hands; the origin reaches it again at once.
    proxy.cut("reset");
    proxy.restore();
    // The commit goes through: Postgres learns of the lost client only when it answers.
    await hold.release();
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
    const { hold, pending } = await registerUntilItCommits("81.4.0.2");
    // The issuance's session ends in the middle of its commit: Postgres rolls it back.
    await db().execute(
      sql`select pg_terminate_backend(pid) from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and query ~ ${COMMIT}`,
    );
    await hold.release();
    const response = await pending;
    expect(response.status).toBe(503);
    expect(response.body).toMatchObject({
      error: { code: "registration_unavailable", reason: "unavailable" },
    });
    expect(await publicIdentities()).toEqual(before);
    expect(await freeKeys()).toBe(freeBefore);
  });
});
