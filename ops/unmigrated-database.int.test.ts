import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { adminQuery, withDatabase } from "../testing/global-setup.ts";
import { runTool } from "../testing/run-tool.ts";

/**
 * A tool pointed at a database nobody has migrated yet (a fresh cluster, a new DATABASE_URL) says
 * what to run, not only which table Postgres did not find.
 */
describe("an operator tool on a database that was never migrated", () => {
  const adminUrl = inject("pgAdminUrl");
  const name = `agents_unmigrated_${randomBytes(6).toString("hex")}`;
  let url: string;

  beforeAll(async () => {
    // An empty database, not a clone of the run's migrated template.
    await adminQuery(adminUrl, `create database "${name}"`);
    url = withDatabase(adminUrl, name);
  });
  afterAll(async () => {
    await adminQuery(adminUrl, `drop database if exists "${name}" with (force)`);
  });

  it("says to run npm run migrate", async () => {
    const run = await runTool("ops/registration.ts", ["status"], {
      env: { DATABASE_URL: url },
      timeoutMs: 60_000,
    });
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/relation "registration_policy" does not exist/);
    expect(run.stderr).toMatch(/run `npm run migrate`/);
  });
});
