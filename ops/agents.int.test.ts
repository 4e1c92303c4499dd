import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows } from "../origin/db/client.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { holdLock } from "../testing/held-lock.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { seedFreeKeys } from "../testing/seed.ts";

describe("npm run agents (operator CLI)", () => {
  let testDb: TestDatabase;
  const run = (...args: string[]): Promise<ToolRun> =>
    runTool("ops/agents.ts", args, { env: { DATABASE_URL: testDb.url, LOG_LEVEL: "silent" } });

  const identityCount = async (): Promise<number> =>
    (
      await queryRows<{ n: number }>(testDb.handle.db, sql`select count(*)::int as n from agent_identities`)
    )[0]!.n;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 2);
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it("creates an identity and prints the token once, as JSON", async () => {
    const created = await run("create", "--capabilities", "read,faucet,transfer");
    expect(created.code).toBe(0);
    const body = JSON.parse(created.stdout) as Record<string, unknown>;
    expect(body).toEqual({
      token: expect.stringMatching(/^agt_[0-9a-f]{32}_[0-9a-f]{64}$/),
      agent_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      assigned_wallet: expect.stringMatching(/^0x[0-9a-f]{40}$/),
      capabilities: ["read", "faucet", "transfer"],
    });
    const listed = await run("list");
    expect(listed.code).toBe(0);
    expect(listed.stdout).not.toContain(String(body.token));
    expect(listed.stdout).not.toContain(String(body.token).split("_")[2]);
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ agent_id: body.agent_id, enabled: true, revoked: false, origin: "operator" }),
    ]);
  });

  it("refuses bad input with a clear message", async () => {
    // An unknown capability is an invalid value: a usage error (exit 2), as the exit codes say.
    const badCapability = await run("create", "--capabilities", "read,admin");
    expect(badCapability.code).toBe(2);
    expect(badCapability.stderr).toMatch(
      /^agents: --capabilities must be a non-empty subset of read, faucet, transfer, not 'admin'\nusage:/,
    );
    expect((await run("create", "--capabilities", "read,,transfer")).code).toBe(2);
    expect((await run("create")).stderr).toContain("--capabilities is required");
    expect((await run("frobnicate")).code).toBe(2);
    expect((await run("disable", "--agent", "nope", "--reason", "x")).stderr).toContain(
      "--agent must be an agent id",
    );
    expect((await run("list", "--bogus")).code).toBe(2);
  });

  it("disables, enables and revokes, each with a reason and recorded (source cli)", async () => {
    const created = JSON.parse((await run("create", "--capabilities", "read")).stdout) as {
      agent_id: string;
    };
    const id = created.agent_id;
    const row = async () =>
      (
        await queryRows<{ enabled: boolean; revoked: boolean; disabled_reason: string | null }>(
          testDb.handle.db,
          sql`select enabled, revoked, disabled_reason from agent_identities where agent_id = ${id}`,
        )
      )[0];

    expect((await run("disable", "--agent", id)).code).toBe(2);
    expect(await run("disable", "--agent", id, "--reason", "suspicious traffic")).toMatchObject({ code: 0 });
    expect(await row()).toEqual({
      enabled: false,
      revoked: false,
      disabled_reason: "operator: suspicious traffic",
    });
    expect((await run("enable", "--agent", id)).code).toBe(2);
    expect((await run("enable", "--agent", id, "--reason", "cleared")).stdout).toContain("enabled");
    expect(await row()).toEqual({ enabled: true, revoked: false, disabled_reason: null });
    // The same record the console writes and shows in its audit: before, after, reason, source.
    const changes = () =>
      queryRows<{
        change: string;
        before_enabled: boolean;
        after_enabled: boolean;
        reason: string;
        source: string;
      }>(
        testDb.handle.db,
        sql`select change, before_enabled, after_enabled, reason, source from identity_changes
            where agent_id = ${id} order by changed_at`,
      );
    const recorded = [
      {
        change: "disable",
        before_enabled: true,
        after_enabled: false,
        reason: "suspicious traffic",
        source: "cli",
      },
      { change: "enable", before_enabled: false, after_enabled: true, reason: "cleared", source: "cli" },
    ];
    expect(await changes()).toEqual(recorded);

    // A revocation is final, so it needs its reason like the others, and is recorded the same way.
    const unexplained = await run("revoke", "--agent", id);
    expect(unexplained).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--reason is required to revoke"),
    });
    expect((await run("revoke", "--agent", id, "--reason", "  ")).code).toBe(2);
    expect((await row())?.revoked).toBe(false);
    expect(await changes()).toEqual(recorded);
    expect(await run("revoke", "--agent", id, "--reason", "token leaked")).toMatchObject({
      code: 0,
      stdout: `agents: ${id} revoked\n`,
    });
    expect((await row())?.revoked).toBe(true);
    const revocation = {
      change: "revoke",
      before_enabled: true,
      after_enabled: true,
      reason: "token leaked",
      source: "cli",
    };
    expect(await changes()).toEqual([...recorded, revocation]);
    // Again: done, nothing more to change or record.
    expect(await run("revoke", "--agent", id, "--reason", "twice")).toMatchObject({
      code: 0,
      stdout: `agents: ${id} was already revoked\n`,
    });
    expect(await changes()).toEqual([...recorded, revocation]);
    // Enabling a revoked identity flips its flag and says the token stays refused: "enabled"
    // alone read as an agent back at work.
    expect(await run("disable", "--agent", id, "--reason", "after the leak")).toMatchObject({ code: 0 });
    expect(await run("enable", "--agent", id, "--reason", "by mistake")).toMatchObject({
      code: 0,
      stdout: `agents: ${id} enabled; it is revoked, so its token stays refused (revocation is final)\n`,
    });
    expect((await row())?.revoked).toBe(true);
    expect(
      await run("revoke", "--agent", "00000000-0000-4000-8000-000000000000", "--reason", "x"),
    ).toMatchObject({ code: 1, stderr: expect.stringContaining("no agent") });
    // The key stays with its (revoked) identity; it never returns to the pool.
    const keys = await queryRows<{ status: string }>(
      testDb.handle.db,
      sql`select status from key_pool where assigned_agent_id = ${id}`,
    );
    expect(keys).toEqual([{ status: "assigned" }]);
    const missing = await run("enable", "--agent", "00000000-0000-4000-8000-000000000000", "--reason", "x");
    expect(missing).toMatchObject({ code: 1, stderr: expect.stringContaining("no agent") });
  });

  it("reports an exhausted pool without creating anything, and where keys come from", async () => {
    const before = await identityCount();
    const result = await run("create", "--capabilities", "read");
    // It said `agents: agent_key_pool_exhausted`, the API's code alone.
    expect(result).toMatchObject({
      code: 1,
      stderr:
        'agents: no free key in the pool (agent_key_pool_exhausted); nothing was made: the origin\'s key-pool refill makes keys while it runs with the enclave (docs/operations.md#the-key-pool-refills-on-demand); run it again once origin_key_pool_keys{state="free"} is above 0\n',
    });
    expect(await identityCount()).toBe(before);
  });

  it("reports keys all being claimed by others as that, nothing made, and to run it again", async () => {
    await seedFreeKeys(testDb.handle.db, 1);
    const before = await identityCount();
    // Another provisioning holds every free key for the whole of this one's waits.
    const hold = await holdLock(
      testDb.handle.db,
      sql`select key_ref from key_pool where status = 'free' for update`,
    );
    const result = await run("create", "--capabilities", "read");
    await hold.release();
    // It said `agents: agent_key_pool_busy`, the API's code alone.
    expect(result).toMatchObject({
      code: 1,
      stderr:
        "agents: every free key is being claimed by another provisioning at this moment (agent_key_pool_busy); nothing was made: run it again\n",
    });
    expect(await identityCount()).toBe(before);
    // The key is still free for the next one.
    expect((await run("create", "--capabilities", "read")).code).toBe(0);
  });
});
