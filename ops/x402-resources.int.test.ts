import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows } from "../origin/db/client.ts";
import { MAX_REGISTERED_RESOURCES } from "../origin/x402/payee/catalogue-entry.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";

// The operator's tool for the discovery catalogue (docs/operations.md#the-x402-discovery-catalogue),
// run as a process against a migrated database. What discovery then answers is
// origin/x402/payee/discovery.int.test.ts.
describe("npm run x402-resources (operator CLI)", () => {
  let testDb: TestDatabase;
  const run = (args: string[]): Promise<ToolRun> =>
    runTool("ops/x402-resources.ts", args, { env: { DATABASE_URL: testDb.url, LOG_LEVEL: "silent" } });

  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it("add --json prints the entry as stored; list shows it; add again updates it; remove takes it out", async () => {
    const added = await run([
      "add",
      "--url",
      "HTTPS://Seller.Example/weather",
      "--description",
      "Hourly weather",
      "--mime-type",
      "application/json",
      "--json",
    ]);
    expect(added.stderr).toBe("");
    expect(added.code).toBe(0);
    expect(JSON.parse(added.stdout)).toEqual({
      url: "https://seller.example/weather",
      source: "operator",
      description: "Hourly weather",
      mime_type: "application/json",
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const again = await run([
      "add",
      "--url",
      "https://seller.example/weather",
      "--description",
      "Daily weather",
    ]);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe("x402-resources: https://seller.example/weather listed\n");
    const listed = await run(["list", "--json"]);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({
        url: "https://seller.example/weather",
        description: "Daily weather",
        mime_type: null,
      }),
    ]);
    expect((await run(["list"])).stdout).toBe("operator https://seller.example/weather  Daily weather\n");
    const removed = await run(["remove", "--url", "https://seller.example/weather"]);
    expect(removed.code).toBe(0);
    expect(JSON.parse((await run(["list", "--json"])).stdout)).toEqual([]);
    // An empty catalogue is a line, not silence, which an operator could not tell from a tool
    // that did nothing; the demo is no row, so the line says where it is.
    expect(await run(["list"])).toEqual({
      code: 0,
      stdout:
        "x402-resources: no resources in the catalogue (discovery still lists the demo while x402 is on)\n",
      stderr: "",
    });
    // Removing what is not listed is a refusal (exit 1), with a line saying so.
    const missing = await run(["remove", "--url", "https://seller.example/weather"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe("x402-resources: https://seller.example/weather is not in the catalogue\n");
  });

  it("refuses a URL, description or MIME type over its limit as a usage error naming it, writing nothing", async () => {
    // Mutation: catalogueEntry without the length checks stores these (the table's checks then fail: exit 3).
    for (const [args, message] of [
      [["--url", `https://a.example/${"u".repeat(2048)}`], "--url: the resource URL is over 2048 characters"],
      [["--url", "ftp://a.example/"], "--url: the resource must be an absolute http(s) URL"],
      [["--url", "https://user:pw@a.example/"], "--url: the resource URL must not carry credentials"],
      [
        ["--url", "https://a.example/", "--description", "d".repeat(501)],
        "--description: the description is over 500 characters",
      ],
      [
        ["--url", "https://a.example/", "--mime-type", "json"],
        "--mime-type: the MIME type must be type/subtype",
      ],
      [[], "--url is required"],
    ] as const) {
      const result = await run(["add", ...args]);
      expect(result.code, message).toBe(2);
      expect(result.stdout).toBe("");
      expect(result.stderr).toContain(`x402-resources: ${message}`);
    }
    expect((await run(["frobnicate"])).code).toBe(2);
    const [count] = await queryRows<{ n: number }>(
      testDb.handle.db,
      sql`select count(*)::int as n from x402_resources`,
    );
    expect(count!.n).toBe(0);
  });

  it(`refuses a registration past ${MAX_REGISTERED_RESOURCES} (exit 1), settled resources not counted; a registered one may still be updated`, async () => {
    await testDb.handle.db.execute(sql`insert into x402_resources (url, source)
      select 'https://full.example/' || n, 'operator' from generate_series(1, ${MAX_REGISTERED_RESOURCES}) n`);
    await testDb.handle.db.execute(
      sql`insert into x402_resources (url, source) values ('https://paid.example/', 'settled')`,
    );
    const refused = await run(["add", "--url", "https://one-more.example/"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      `x402-resources: the catalogue holds ${MAX_REGISTERED_RESOURCES} registered resources already: remove one first\n`,
    );
    expect(
      (await run(["add", "--url", "https://full.example/7", "--description", "still editable"])).code,
    ).toBe(0);
    expect((await run(["remove", "--url", "https://full.example/1"])).code).toBe(0);
    expect((await run(["add", "--url", "https://one-more.example/"])).code).toBe(0);
  });
});
