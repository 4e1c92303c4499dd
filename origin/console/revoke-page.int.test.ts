import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { sql } from "drizzle-orm";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HEADER_EDGE_SECRET, HEADER_REGISTRATION, HEADER_REGISTRATION_IP } from "../../shared/constants.ts";
import { launchBrowser } from "../../testing/browser.ts";
import { recordPageProblems, signInToConsole } from "../../testing/console-browser.ts";
import { consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { send } from "../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import { queryRows } from "../db/client.ts";
import { updateRegistrationPolicy } from "../registration/policy-repository.ts";

// Revoking an agent from its page in a real Chromium against the real origin (real Postgres), on a
// desktop: the page asks first, naming the agent, saying it cannot be undone and taking the
// reason; once confirmed the agent's next request is 401, the audit has the revocation (source
// console), and the page says it is revoked and offers neither enable nor revoke. axe-core finds no
// serious or critical violation with the confirmation open.

const EDGE_SECRET = randomBytes(32).toString("hex");
const AXE = readFileSync(path.resolve("node_modules/axe-core/axe.min.js"), "utf8");
const secrets = consoleSecrets();

describe("revoking an agent from the console page (real Chromium)", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let browser: Browser;
  let context: BrowserContext;
  /** For axe-core only: its script is injected inline, which the page's CSP rightly refuses. */
  let axeContext: BrowserContext;
  let agent: { token: string; agent_id: string };

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 15);
    await updateRegistrationPolicy(testDb.handle.db, { changes: { paused: false }, reason: "page test" });
    origin = await startTestOrigin({
      database: testDb.handle,
      env: {
        ...secrets.env,
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
        AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
      },
    });
    const registered = await send(`${origin.base}/agent/v1/register`, {
      method: "POST",
      headers: {
        [HEADER_REGISTRATION]: "1",
        [HEADER_EDGE_SECRET]: EDGE_SECRET,
        [HEADER_REGISTRATION_IP]: "81.6.0.1",
      },
      body: "{}",
    });
    expect(registered.status, JSON.stringify(registered.body)).toBe(201);
    agent = registered.body as typeof agent;
    browser = await launchBrowser();
    // The packaged Chromium is one process, which ends when a context closes: both stay open.
    context = await browser.newContext();
    await context.newPage();
    axeContext = await browser.newContext({ bypassCSP: true });
    await axeContext.newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await origin?.close();
    await testDb?.drop();
  });

  const agentStatus = async (): Promise<number> =>
    (await send(`${origin.base}/agent/v1/network`, { headers: { authorization: `Bearer ${agent.token}` } }))
      .status;
  const openAgent = async (page: Page): Promise<void> => {
    await page.setViewportSize({ width: 1280, height: 800 });
    await signInToConsole(page, `${origin.base}/admin/agents#/agents/${agent.agent_id}`, {
      admin: secrets.adminToken,
      change: secrets.changeToken,
    });
    await page.locator("#agent-identity").waitFor();
  };

  it("axe-core finds no serious or critical violation with the confirmation open", async () => {
    const page = await axeContext.newPage();
    await openAgent(page);
    await page.click("#agent-revoke");
    await page.locator("#agent-revoke-dialog").waitFor({ state: "visible" });
    await page.addScriptTag({ content: AXE });
    const violations =
      (await page.evaluate(`axe.run(document, { resultTypes: ["violations"] }).then((result) =>
      result.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => v.id + ": " + v.nodes.map((n) => n.target.join(" ")).join(", ")))`)) as string[];
    expect(violations).toEqual([]);
    // Cancelled: nothing was sent.
    await page.click("#agent-revoke-cancel");
    expect(await page.locator("#agent-revoke-dialog").isVisible()).toBe(false);
    expect(await agentStatus()).toBe(200);
    await page.close();
  });

  it("asks first, naming the agent; once confirmed the agent is refused and its page says revoked", async () => {
    const page = await context.newPage();
    const problems = recordPageProblems(page);
    await openAgent(page);
    expect(await agentStatus()).toBe(200);

    await page.click("#agent-revoke");
    const dialog = page.locator("#agent-revoke-dialog");
    await dialog.waitFor({ state: "visible" });
    const text = await page.textContent("#agent-revoke-text");
    expect(text).toContain(agent.agent_id);
    expect(text).toContain("cannot be undone");
    // The reason is required: an empty one does not close the dialog or send anything.
    await page.click("#agent-revoke-confirm");
    expect(await dialog.isVisible()).toBe(true);
    await page.fill("#agent-revoke-reason", "token leaked in a log");
    await page.click("#agent-revoke-confirm");

    const message = page.locator("#agent-change-message");
    await message.filter({ hasText: "Revoked: its token is refused" }).waitFor();
    expect(await agentStatus()).toBe(401);
    expect(await page.textContent("#agent-identity")).toContain("revoked");
    // Neither enable nor revoke is offered any more.
    expect(await page.locator("#agent-change-submit").isVisible()).toBe(false);
    expect(await page.locator("#agent-revoke").isVisible()).toBe(false);
    const recorded = await queryRows(
      testDb.handle.db,
      sql`select change, reason, source from identity_changes where agent_id = ${agent.agent_id}`,
    );
    expect(recorded).toEqual([{ change: "revoke", reason: "token leaked in a log", source: "console" }]);

    // Opened again, the page says it is revoked, beside the controls it no longer offers.
    await page.reload();
    await openAgent(page);
    expect(await page.textContent("#agent-change-message")).toContain("Revoked:");
    expect(await page.textContent("#agent-change-message")).toContain("cannot be undone");
    expect(problems).toEqual([]);
    await page.close();
  });
});
