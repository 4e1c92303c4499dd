import { sql } from "drizzle-orm";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { createApp } from "./app.ts";
import { loadConfig } from "./config.ts";
import type { AppEnv } from "./http/env.ts";
import { createLogger } from "./logger.ts";
import { openInfrastructure } from "./open-infrastructure.ts";

// A failed query's error (drizzle's) carries the statement and its parameters in its message, and a
// parameter may be a secret (a webhook endpoint's, written by its insert). The origin logs what it
// did not handle; the line names the database's reason, never the parameters.
const SECRET = `whsec_${"7".repeat(43)}`;

describe("the origin's log of a request whose query failed (real Postgres)", () => {
  let testDb: TestDatabase;
  const lines: string[] = [];

  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it("names the database's reason and carries none of the statement's parameters", async () => {
    const logger = createLogger("info", { write: (line: string) => void lines.push(line) });
    const opened = await openInfrastructure(loadConfig({}), logger, {
      database: testDb.handle,
      processMetrics: false,
    });
    const router = new Hono<AppEnv>();
    router.post("/store-secret", async (c) => {
      await testDb.handle.db.execute(sql`insert into no_such_table (secret) values (${SECRET})`);
      return c.body(null, 204);
    });
    const app = createApp(opened.infrastructure, [
      {
        name: "webhooks",
        routes: [{ path: "/", router }],
        workers: () => [],
        stop: async () => {},
        endStreams: () => {},
      },
    ]);

    const response = await app.request("/77/store-secret", { method: "POST" });
    expect(response.status).toBe(500);
    const unhandled = lines.map((line) => JSON.parse(line) as { msg: string; err?: { message: string } });
    expect(unhandled.find((entry) => entry.msg === "unhandled")?.err?.message).toBe(
      'database query failed: relation "no_such_table" does not exist',
    );
    expect(lines.join("\n")).not.toContain(SECRET);
  });
});
