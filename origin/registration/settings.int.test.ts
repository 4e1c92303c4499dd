import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { getRegistrationPolicy } from "./policy-repository.ts";
import { changeRegistrationSettings, REGISTRATION_SETTINGS } from "./settings.ts";

// The settings service the CLI and the console call: every refusal changes nothing.

describe("registration settings service", () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it("takes every setting at both ends of its range, as text or as JSON values", async () => {
    for (const [name, rule] of Object.entries(REGISTRATION_SETTINGS)) {
      const values = rule.kind === "boolean" ? [true, "false"] : [0, String(rule.max)];
      for (const value of values) {
        const result = await changeRegistrationSettings(testDb.handle.db, {
          changes: { [name]: value },
          reason: "range",
          source: "cli",
        });
        expect(result.ok, `${name}=${value}`).toBe(true);
      }
    }
  });

  it.each([
    [{ per_ip_weekly: 1 }, "range", "unknown_setting"],
    [{ per_ip_daily: -1 }, "range", "invalid_value"],
    [{ per_ip_daily: 1.5 }, "range", "invalid_value"],
    [{ per_ip_daily: "1.5" }, "range", "invalid_value"],
    [{ per_ip_daily: "1e3" }, "range", "invalid_value"],
    [{ network_daily: REGISTRATION_SETTINGS.network_daily.max + 1 }, "range", "invalid_value"],
    [{ paused: "yes" }, "range", "invalid_value"],
    [{ paused: 1 }, "range", "invalid_value"],
    [{ per_ip_daily: 4, constructor: 1 }, "range", "unknown_setting"],
    [{ per_ip_daily: 4 }, "   ", "empty_reason"],
    [{}, "range", "no_change_requested"],
  ])("refuses %j (reason %j) with %s, changing nothing", async (changes, reason, code) => {
    const before = await getRegistrationPolicy(testDb.handle.db);
    const result = await changeRegistrationSettings(testDb.handle.db, { changes, reason, source: "cli" });
    expect(result.ok ? "accepted" : result.error.code).toBe(code);
    expect(await getRegistrationPolicy(testDb.handle.db)).toEqual(before);
  });
});
