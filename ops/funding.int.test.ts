import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows } from "../origin/db/client.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { provisionedIdentity, seedFreeKeys } from "../testing/seed.ts";

describe("npm run funding (pre-restore exceptions)", () => {
  let testDb: TestDatabase;
  let agent: { agentId: string; wallet: string };
  const run = (...args: string[]): Promise<ToolRun> =>
    runTool("ops/funding.ts", args, { env: { DATABASE_URL: testDb.url, LOG_LEVEL: "silent" } });
  const changes = () =>
    queryRows<{ change: string; before: unknown; after: Record<string, unknown>; reason: string }>(
      testDb.handle.db,
      sql`select change, before, after, reason from funding_exception_changes order by changed_at`,
    );

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 1);
    const provisioned = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    agent = { agentId: provisioned.agentId, wallet: provisioned.assignedWallet };
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it("grants by agent, lists it active, revokes it, and records before, after and reason each time", async () => {
    const granted = await run(
      "grant",
      "--agent",
      agent.agentId,
      "--ceiling",
      "5000000",
      "--expires-in",
      "24h",
      "--reason",
      "pilot",
    );
    expect(granted.code).toBe(0);
    const exception = (JSON.parse(granted.stdout) as { granted: Record<string, unknown> }).granted;
    expect(exception).toMatchObject({
      wallet: agent.wallet,
      ceiling_units: "5000000",
      mode: "approved_non_zero",
      active: true,
    });
    const expires = new Date(String(exception.expires_at)).getTime();
    expect(Math.abs(expires - (Date.now() + 86_400_000))).toBeLessThan(60_000);

    expect(JSON.parse((await run("list")).stdout)).toEqual([
      expect.objectContaining({ id: exception.id, active: true }),
    ]);

    const revoked = await run("revoke", "--id", String(exception.id), "--reason", "drill passed");
    expect(revoked.code).toBe(0);
    expect(JSON.parse((await run("list")).stdout)).toEqual([]);
    expect(JSON.parse((await run("list", "--all")).stdout)).toEqual([
      expect.objectContaining({ id: exception.id, active: false, revoked_at: expect.any(String) }),
    ]);
    expect(await changes()).toEqual([
      {
        change: "grant",
        before: null,
        after: expect.objectContaining({ ceiling_units: "5000000", revoked_at: null }),
        reason: "pilot",
      },
      {
        change: "revoke",
        before: expect.objectContaining({ revoked_at: null }),
        after: expect.objectContaining({ revoked_at: expect.any(String) }),
        reason: "drill passed",
      },
    ]);
    const again = await run("revoke", "--id", String(exception.id), "--reason", "twice");
    expect(again).toMatchObject({ code: 1, stderr: "funding: already revoked\n" });
  });

  it("--help says what a ceiling caps (the balance after the move), in its own words", async () => {
    const help = await run("--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/balance AFTER the move is\s+at most UNITS/);
    expect(help.stdout).toMatch(/The ceiling caps what the wallet holds, not\s+what it moves/);
    expect(help.stdout).toMatch(/exit codes: 0 done, 1 refused/);
    // A usage error shows the same text; neither points at a source file.
    const usage = await run("frobnicate");
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain(help.stdout.trim());
    for (const text of [help.stdout, usage.stderr]) expect(text).not.toMatch(/\.ts\b|scripts\//);
  });

  it("refuses a grant for an agent the node does not know with exit 1 (no such agent), changing nothing", async () => {
    // The id is a well-formed UUID: the command line is right, the answer is no
    // (docs/operations.md#exit-codes-of-the-operator-tools). Exit 2 would send the operator to
    // correct a command that has nothing wrong with it.
    const before = (await changes()).length;
    const unknown = "00000000-0000-4000-8000-000000000000";
    const result = await run(
      "grant",
      "--agent",
      unknown,
      "--ceiling",
      "1",
      "--expires-in",
      "1h",
      "--reason",
      "r",
    );
    expect(result).toMatchObject({ code: 1, stdout: "", stderr: `funding: no agent ${unknown}\n` });
    expect((await changes()).length).toBe(before);
  });

  it("refuses a grant for a wallet that is no agent's (exit 1, naming it) and for a revoked agent, changing nothing", async () => {
    // A well-formed address the node has no agent for (a typo, another node's wallet) was granted,
    // exit 0, and audited: the operator read "granted" while the gate went on refusing every
    // payment, since it gates the service's wallets only. A revoked identity never moves funds
    // again, whatever its ceiling.
    const before = (await changes()).length;
    const stranger = `0x${"cd".repeat(20)}`;
    const grant = (...target: string[]) =>
      run("grant", ...target, "--ceiling", "1", "--expires-in", "1h", "--reason", "r");
    expect(await grant("--wallet", stranger)).toMatchObject({
      code: 1,
      stdout: "",
      stderr: `funding: no agent's wallet is ${stranger}: the funding gate holds this service's wallets only\n`,
    });
    await seedFreeKeys(testDb.handle.db, 1);
    const revoked = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    await queryRows(
      testDb.handle.db,
      sql`update agent_identities set revoked = true, revoked_at = now() where agent_id = ${revoked.agentId}`,
    );
    for (const target of [
      ["--agent", revoked.agentId],
      ["--wallet", revoked.assignedWallet],
    ]) {
      expect(await grant(...target)).toMatchObject({
        code: 1,
        stdout: "",
        stderr: `funding: agent ${revoked.agentId} is revoked: no funds move for its wallet ${revoked.assignedWallet} again\n`,
      });
    }
    expect((await changes()).length).toBe(before);
  });

  it("refuses bad usage with exit 2 and changes nothing", async () => {
    const before = (await changes()).length;
    const cases = [
      ["grant", "--wallet", agent.wallet, "--ceiling", "1", "--expires-in", "24h"],
      ["grant", "--wallet", agent.wallet, "--ceiling", "1", "--expires-in", "24h", "--reason", "  "],
      ["grant", "--wallet", "0x1234", "--ceiling", "1", "--expires-in", "1h", "--reason", "r"],
      ["grant", "--wallet", agent.wallet, "--ceiling", "-1", "--expires-in", "1h", "--reason", "r"],
      ["grant", "--wallet", agent.wallet, "--ceiling", "1", "--expires-in", "soon", "--reason", "r"],
      // Past what a date holds: was "error: Invalid time value", exit 3.
      ["grant", "--wallet", agent.wallet, "--ceiling", "1", "--expires-in", "99999999999d", "--reason", "r"],
      ["grant", "--wallet", agent.wallet, "--ceiling", "1e3", "--expires-in", "1h", "--reason", "r"],
      ["grant", "--wallet", agent.wallet, "--ceiling", "0.5", "--expires-in", "1h", "--reason", "r"],
      ["grant", "--wallet", agent.wallet, "--ceiling", " 5", "--expires-in", "1h", "--reason", "r"],
      [
        "grant",
        "--wallet",
        agent.wallet,
        "--ceiling",
        "1",
        "--expires-at",
        "2000-01-01T00:00:00Z",
        "--reason",
        "r",
      ],
      ["revoke", "--id", "not-a-uuid", "--reason", "r"],
      ["frobnicate"],
    ];
    for (const args of cases) {
      const result = await run(...args);
      expect({ args, code: result.code }).toEqual({ args, code: 2 });
      expect(result.stderr).toMatch(/^funding: /);
    }
    expect((await changes()).length).toBe(before);
  });

  it("lists an active exception however many newer ones have ended since", async () => {
    // The newest 1000 were read and the active picked from them: behind 1000 newer revoked or
    // expired ones, an active exception went missing from `list`, so its id, which `revoke`
    // needs, could not be found while the wallet still held funds under it.
    const granted = await run(
      "grant",
      "--wallet",
      agent.wallet,
      "--ceiling",
      "3000000",
      "--expires-in",
      "7d",
      "--reason",
      "still open",
    );
    expect(granted.code).toBe(0);
    const id = (JSON.parse(granted.stdout) as { granted: { id: string } }).granted.id;
    await queryRows(
      testDb.handle.db,
      sql`insert into funding_exceptions (wallet, ceiling_units, reason, approved_at, expires_at, revoked_at)
          select ${agent.wallet}, 1, 'ended', now() + n * interval '1 millisecond', now() + interval '1 day', now()
          from generate_series(1, 1000) as n`,
    );
    const listed = JSON.parse((await run("list")).stdout) as { id: string }[];
    expect(listed.map((exception) => exception.id)).toContain(id);
  });
});
