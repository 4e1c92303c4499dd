import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows } from "../origin/db/client.ts";
import { parseBearerHeader } from "../shared/agent-token.ts";
import { createTestDatabase, type TestDatabase, urlThrough } from "../testing/database.ts";
import { type CommitHold, holdCommitsInserting } from "../testing/held-commit.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { provisionedIdentity, seedFreeKeys } from "../testing/seed.ts";
import { startTcpProxy, type TcpProxy } from "../testing/tcp-proxy.ts";

// `npm run agents -- create` and `rotate-token` whose transaction commits while the tool's
// connection to the database is lost: the commit reached Postgres, its answer never reached the
// tool, and the token it made (only its hash is stored) is shown nowhere else. The real tool as a
// process, real Postgres behind a TCP proxy the test cuts.
//
// The one thing made for the test: the COMMIT of a transaction that wrote a token waits for a lock
// the test holds (testing/held-commit.ts), so the link is cut while that commit is in flight.

describe("npm run agents, when the database link is lost while its change commits", () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let proxiedUrl: string;
  let commits: CommitHold;
  const db = () => testDb.handle.db;
  const run = (...args: string[]): Promise<ToolRun> =>
    runTool("ops/agents.ts", args, { env: { DATABASE_URL: proxiedUrl, LOG_LEVEL: "silent" } });
  const identities = async (): Promise<{ agent_id: string; assigned_wallet: string }[]> =>
    queryRows(db(), sql`select agent_id, assigned_wallet from agent_identities order by created_at`);
  /** The agent whose token this is, if it is stored (the token works). */
  const ownerOf = async (token: string): Promise<string | undefined> => {
    const tokenId = parseBearerHeader(`Bearer ${token}`)?.tokenId ?? "";
    const [row] = await queryRows<{ agent_id: string }>(
      db(),
      sql`select agent_id from agent_tokens where token_id = ${tokenId}`,
    );
    return row?.agent_id;
  };

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 10);
    commits = await holdCommitsInserting(db(), "agent_tokens", 770_078);
    proxy = await startTcpProxy(testDb.url);
    proxiedUrl = urlThrough(proxy, testDb.url);
  });
  afterAll(async () => {
    await proxy?.close();
    await testDb?.drop();
  });

  /** Runs the tool once the test holds the commits of token writes; resolves once its commit waits. */
  const runUntilItCommits = (...args: string[]) =>
    commits.whileCommitting("the tool's commit", () => run(...args));

  it("create prints the token of the identity its commit made, rather than an error for an identity nobody holds", async () => {
    const before = (await identities()).length;
    const { release, pending } = await runUntilItCommits("create", "--capabilities", "read,transfer");
    // The link drops while the commit is in Postgres's hands; the tool reaches it again at once.
    proxy.cut("reset");
    proxy.restore();
    await release();
    const created = await pending;
    await expect.poll(async () => (await identities()).length, { timeout: 10_000 }).toBe(before + 1);
    const made = (await identities()).at(-1)!;
    // It exited 3 with the lost link's error: the identity and its key were taken, by a token
    // nobody was ever shown.
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    const body = JSON.parse(created.stdout) as { token: string; agent_id: string; assigned_wallet: string };
    expect(body).toMatchObject({ agent_id: made.agent_id, assigned_wallet: made.assigned_wallet });
    expect(await ownerOf(body.token)).toBe(made.agent_id);
  });

  it("rotate-token prints the new token its commit stored, rather than an error while the old token is gone", async () => {
    const identity = await provisionedIdentity(db(), { capabilities: ["read"], origin: "operator" });
    const { release, pending } = await runUntilItCommits("rotate-token", "--agent", identity.agentId);
    proxy.cut("reset");
    proxy.restore();
    await release();
    const rotated = await pending;
    await expect.poll(async () => ownerOf(identity.token), { timeout: 10_000 }).toBeUndefined();
    expect(rotated.code).toBe(0);
    const body = JSON.parse(rotated.stdout) as { token: string; agent_id: string };
    expect(body.agent_id).toBe(identity.agentId);
    expect(await ownerOf(body.token)).toBe(identity.agentId);
    expect(rotated.stderr).toContain("has a new token");
  });

  it("create, when whether it committed cannot be learnt, names the identity and how to find out, and no token", async () => {
    const before = (await identities()).length;
    const { release, pending } = await runUntilItCommits("create", "--capabilities", "read");
    // The database stays out of reach: the tool cannot look.
    proxy.cut("reset");
    const created = await pending;
    proxy.restore();
    await release();
    await expect.poll(async () => (await identities()).length, { timeout: 10_000 }).toBe(before + 1);
    const made = (await identities()).at(-1)!;
    expect(created.code).toBe(3);
    expect(created.stdout).toBe("");
    expect(created.stderr).not.toMatch(/agt_/);
    expect(created.stderr).toContain(`agents: error: the identity ${made.agent_id}`);
    expect(created.stderr).toContain("may have been made");
    expect(created.stderr).toContain(`npm run agents -- rotate-token --agent ${made.agent_id}`);
    // What it says to do works: the identity it names gets a token that works.
    const rotated = await run("rotate-token", "--agent", made.agent_id);
    expect(rotated.code).toBe(0);
    expect(await ownerOf((JSON.parse(rotated.stdout) as { token: string }).token)).toBe(made.agent_id);
  });

  it("rotate-token, when whether it committed cannot be learnt, says to run it again, and no token", async () => {
    const identity = await provisionedIdentity(db(), { capabilities: ["read"], origin: "operator" });
    const { release, pending } = await runUntilItCommits("rotate-token", "--agent", identity.agentId);
    proxy.cut("reset");
    const rotated = await pending;
    proxy.restore();
    await release();
    expect(rotated.code).toBe(3);
    expect(rotated.stdout).toBe("");
    expect(rotated.stderr).not.toMatch(/agt_/);
    expect(rotated.stderr).toContain(
      `agents: error: the token of ${identity.agentId} may have been replaced`,
    );
    expect(rotated.stderr).toContain(`npm run agents -- rotate-token --agent ${identity.agentId}`);
  });

  it("create whose commit did not go through says so, and nothing is made", async () => {
    const before = await identities();
    const { release, pending } = await runUntilItCommits("create", "--capabilities", "read");
    // The tool's session ends in the middle of its commit: Postgres rolls it back.
    await commits.endWaitingCommit();
    await release();
    const created = await pending;
    expect(created.code).toBe(3);
    expect(created.stdout).toBe("");
    expect(await identities()).toEqual(before);
  });
});
