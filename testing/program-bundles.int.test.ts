import { existsSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "./database.ts";
import { REPO_ROOT } from "./enclave-process.ts";
import { BUNDLED_PROGRAMS, PROGRAMS_ENV, programArgs } from "./program-bundles.ts";
import { runTool } from "./run-tool.ts";

describe("the programs tests start (program-bundles.ts)", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("runs each from this run's bundle, built by the suite's setup", () => {
    const dir = process.env[PROGRAMS_ENV];
    expect(dir).toBeTruthy();
    for (const entry of BUNDLED_PROGRAMS) {
      const args = programArgs(REPO_ROOT, entry);
      expect(args).toEqual([path.join(dir!, entry.replace(/\.ts$/, ".mjs"))]);
      expect(existsSync(args[0]!)).toBe(true);
    }
  });

  it("runs the TypeScript through tsx where no bundle was built", () => {
    const saved = process.env[PROGRAMS_ENV];
    delete process.env[PROGRAMS_ENV];
    try {
      const args = programArgs(REPO_ROOT, "ops/migrate.ts");
      expect(args).toHaveLength(3);
      expect(args[0]).toBe("--import");
      expect(args[1]).toMatch(/node_modules\/tsx\/dist\/loader\.mjs$/);
      expect(args[2]).toBe(path.join(REPO_ROOT, "ops/migrate.ts"));
    } finally {
      process.env[PROGRAMS_ENV] = saved;
    }
  });

  it("a bundled tool reads the files beside its sources: migrate finds the migrations and the database up to date", async () => {
    const run = await runTool("ops/migrate.ts", [], { env: { DATABASE_URL: db.url }, timeoutMs: 60_000 });
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe("migrate: up to date\n");
    expect(run.code).toBe(0);
  });
});
