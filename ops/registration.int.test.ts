import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows } from "../origin/db/client.ts";
import { getRegistrationPolicy } from "../origin/registration/policy-repository.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { seedFreeKeys } from "../testing/seed.ts";

describe("npm run registration (policy CLI)", () => {
  let testDb: TestDatabase;
  const run = (...args: string[]): Promise<ToolRun> =>
    runTool("ops/registration.ts", args, { env: { DATABASE_URL: testDb.url, LOG_LEVEL: "silent" } });
  const changes = () =>
    queryRows<{ setting: string; before_value: string; after_value: string; reason: string; source: string }>(
      testDb.handle.db,
      sql`select setting, before_value, after_value, reason, source from registration_policy_changes order by changed_at`,
    );

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 12);
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it("opens, sets and pauses, printing before → after and recording the reason and the channel (cli)", async () => {
    const opened = await run("open", "--reason", "local testing");
    expect(opened).toMatchObject({
      code: 0,
      stdout: "registration: paused: true → false\nregistration: paused is false\n",
    });
    const set = await run("set", "per_ip_daily", "5", "network_daily", "200", "--reason", "launch week");
    expect(set.code).toBe(0);
    expect(set.stdout).toContain("registration: per_ip_daily: 3 → 5");
    expect(set.stdout).toContain("registration: network_daily: 100 → 200");
    const paused = await run("pause", "--reason", "incident 7");
    expect(paused.stdout).toContain("registration: paused: false → true");
    expect(await changes()).toEqual([
      {
        setting: "paused",
        before_value: "true",
        after_value: "false",
        reason: "local testing",
        source: "cli",
      },
      { setting: "perIpDaily", before_value: "3", after_value: "5", reason: "launch week", source: "cli" },
      {
        setting: "networkDaily",
        before_value: "100",
        after_value: "200",
        reason: "launch week",
        source: "cli",
      },
      { setting: "paused", before_value: "false", after_value: "true", reason: "incident 7", source: "cli" },
    ]);
  });

  it("shows the settings and counters", async () => {
    const status = await run("status");
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({
      settings: {
        paused: true,
        per_ip_daily: 5,
        network_daily: 200,
        total_ceiling: 1000,
        key_reserve: 10,
        attempts_per_ip_per_minute: 10,
        attempts_global_per_minute: 120,
      },
      free_keys: 12,
      issuable_before_reserve: 2,
      issued_total: 0,
      recent_changes: expect.arrayContaining([
        expect.objectContaining({ setting: "per_ip_daily", reason: "launch week" }),
      ]),
    });
  });

  it("refuses bad settings, ranges, reasons and usage with exit 2, one clear line and the usage, changing nothing", async () => {
    const cases: [string[], string][] = [
      [["set", "per_ip_weekly", "5", "--reason", "x"], "unknown setting 'per_ip_weekly'"],
      [["set", "key_reserve", "-1", "--reason", "x"], "key_reserve must be a whole number from 0 to 1000000"],
      [
        ["set", "per_ip_daily", "100001", "--reason", "x"],
        "per_ip_daily must be a whole number from 0 to 100000",
      ],
      [["set", "paused", "yes", "--reason", "x"], "paused must be true or false"],
      [["open", "--reason", "  "], "--reason is required and must not be empty"],
      [["set", "per_ip_daily", "4", "bogus", "1", "--reason", "x"], "unknown setting 'bogus'"],
      [["close", "--reason", "x"], "unknown command 'close'"],
    ];
    const before = await getRegistrationPolicy(testDb.handle.db);
    const changesBefore = (await changes()).length;
    // In parallel: none of them may change anything, so none can disturb another.
    const results = await Promise.all(cases.map(([args]) => run(...args)));
    results.forEach((result, i) => {
      const [args, message] = cases[i]!;
      expect(result.code, args.join(" ")).toBe(2);
      const [line, usage, ...more] = result.stderr.trim().split("\n");
      expect(line, args.join(" ")).toMatch(/^registration: /);
      expect(line, args.join(" ")).toContain(message);
      expect(usage, args.join(" ")).toMatch(/^usage: npm run registration -- status/);
      expect(more, args.join(" ")).toEqual([]);
    });
    expect(await getRegistrationPolicy(testDb.handle.db)).toEqual(before);
    expect(await changes()).toHaveLength(changesBefore);
  });
});
