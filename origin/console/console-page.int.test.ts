import { randomBytes } from "node:crypto";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser } from "../../scripts/test/browser.ts";
import { consoleSecrets } from "../../scripts/test/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../scripts/test/database.ts";
import { send } from "../../scripts/test/http.ts";
import { startTestOrigin, type TestOrigin } from "../../scripts/test/origin.ts";
import { seedFreeKeys } from "../../scripts/test/seed.ts";
import { HEADER_EDGE_SECRET, HEADER_REGISTRATION, HEADER_REGISTRATION_IP } from "../../shared/constants.ts";
import { updateRegistrationPolicy } from "../registration/policy-repository.ts";

// The operator console page in a real headless Chromium against the real origin (real Postgres):
// an operator types the tokens, reads the counters and identities, changes a setting and sees it
// audited, disables an agent (its next request is 401) and enables it again (200).

const EDGE_SECRET = randomBytes(32).toString("hex");
const secrets = consoleSecrets();
const SCREENSHOT = path.resolve(".test-artifacts/console.png");

describe("the operator console page in a browser", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let browser: Browser;
  let agent: { token: string; agent_id: string; assigned_wallet: string };

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
        [HEADER_REGISTRATION_IP]: "81.5.0.1",
      },
      body: "{}",
    });
    expect(registered.status).toBe(201);
    agent = registered.body as typeof agent;
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await origin?.close();
    await testDb?.drop();
  });

  const agentStatus = async (): Promise<number> =>
    (await send(`${origin.base}/agent/v1/network`, { headers: { authorization: `Bearer ${agent.token}` } }))
      .status;
  const cell = (page: Page, section: string, key: string) =>
    page.locator(`#${section} dd[data-key="${key}"]`);

  it("reads, changes a setting with a reason, and disables and enables an agent", async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      if (message.type() === "error") problems.push(`console: ${message.text()}`);
    });
    const pageRequests: string[] = [];
    page.on("request", (request) => pageRequests.push(request.url()));

    await page.goto(`${origin.base}/admin/agents`);
    await page.fill("#admin-token", secrets.adminToken);
    await page.fill("#change-token", secrets.changeToken);
    await page.click("#token-form button[type=submit]");
    await page.locator("#console").waitFor({ state: "visible" });

    // The counters and the identity, as the API has them.
    await expect.poll(() => cell(page, "counters", "issued in total").textContent()).toBe("1");
    expect(await cell(page, "key-stock", "free verified keys").textContent()).toBe("14");
    const row = page.locator("#identities tr", { hasText: agent.agent_id });
    expect(await row.textContent()).toContain(agent.assigned_wallet);
    expect(await row.textContent()).toContain("enabled");
    // The tokens are in the script's memory only: not in the fields, storage, cookies or address.
    expect(await page.inputValue("#admin-token")).toBe("");
    // (A string, evaluated in the page: this file is compiled without the DOM's types.)
    const kept = await page.evaluate(
      "({ local: localStorage.length, session: sessionStorage.length, cookie: document.cookie, href: location.href })",
    );
    expect(kept).toEqual({ local: 0, session: 0, cookie: "", href: `${origin.base}/admin/agents` });

    // A setting changed with a reason; its before and after appear in the audit.
    await page.selectOption("#setting-name", "per_ip_daily");
    await page.fill("#setting-value", "5");
    await page.fill("#setting-reason", "more room for the browser test");
    await page.click("#settings-form button[type=submit]");
    await expect.poll(() => page.textContent("#message")).toBe("per_ip_daily: 3 → 5");
    const audited = page.locator("#audit tr", { hasText: "more room for the browser test" });
    expect(await audited.locator("td").allTextContents()).toEqual([
      expect.any(String),
      "registration_setting",
      "per_ip_daily",
      "set",
      "3",
      "5",
      "more room for the browser test",
      "—",
    ]);

    // Disable: the agent's next request is refused; enable: it works again.
    expect(await agentStatus()).toBe(200);
    await page.click(`#identities button[data-agent="${agent.agent_id}"][data-action="disable"]`);
    await page.fill("#identity-reason", "suspicious traffic");
    await page.click("#identity-form button[type=submit]");
    await expect.poll(() => page.textContent("#message")).toBe(`${agent.agent_id}: enabled → disabled`);
    expect(await agentStatus()).toBe(401);
    expect(await row.textContent()).toContain("disabled (operator: suspicious traffic)");

    await page.click(`#identities button[data-agent="${agent.agent_id}"][data-action="enable"]`);
    await page.fill("#identity-reason", "false alarm");
    await page.click("#identity-form button[type=submit]");
    await expect.poll(() => page.textContent("#message")).toBe(`${agent.agent_id}: disabled → enabled`);
    expect(await agentStatus()).toBe(200);
    expect(await page.locator("#audit tr", { hasText: "false alarm" }).textContent()).toContain("console");

    await mkdir(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    process.stdout.write(`console screenshot: ${SCREENSHOT}\n`);

    // Nothing was refused by the CSP or failed in the script; nothing was fetched elsewhere.
    expect(problems).toEqual([]);
    expect(pageRequests.every((url) => url.startsWith(`${origin.url}/`))).toBe(true);
    await page.close();
  });
});
