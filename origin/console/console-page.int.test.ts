import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
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
import { recordSecret } from "../../testing/secret-sink.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../../testing/webhook-receiver.ts";
import { queryRows } from "../db/client.ts";
import { updateRegistrationPolicy } from "../registration/policy-repository.ts";
import { ensureWebhookSigningKeyFile } from "../webhooks/signing.ts";

// The operator console page in a real headless Chromium against the real origin (real Postgres):
// an operator types the tokens, reads the counters and identities, changes a setting and sees it
// audited with its channel, disables an agent (its next request is 401) and enables it again (200),
// each confirmation beside the form that caused it; adds a webhook endpoint, sees its delivery and
// replays it (the receiver gets it again under the same webhook-id); read-only mode and a wrong
// change token are said as what they are; on a phone, wide tables scroll inside their own box.

const EDGE_SECRET = randomBytes(32).toString("hex");
const secrets = consoleSecrets();
const SCREENSHOT = path.resolve(".test-artifacts/console.png");
const PHONE_SCREENSHOT = path.resolve(".test-artifacts/console-phone.png");

describe("the operator console page in a browser", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let browser: Browser;
  let context: BrowserContext;
  let agent: { token: string; agent_id: string; assigned_wallet: string };
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    const keyFile = path.join(await mkdtemp(path.join(tmpdir(), "console-webhooks-")), "webhook-signing.key");
    await ensureWebhookSigningKeyFile(keyFile);
    receiver = await startWebhookReceiver();
    await seedFreeKeys(testDb.handle.db, 15);
    await updateRegistrationPolicy(testDb.handle.db, { changes: { paused: false }, reason: "page test" });
    origin = await startTestOrigin({
      database: testDb.handle,
      env: {
        ...secrets.env,
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
        AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
        // The receiver is on loopback: this test's node allows it, as the local stack does.
        AGENT_WEBHOOKS_ALLOW_PRIVATE: "true",
        AGENT_WEBHOOKS_SIGNING_KEY_FILE: keyFile,
      },
      workers: ["money", "webhooks"],
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
    // The packaged Chromium runs as a single process, which ends when a context closes: every
    // test opens its pages in this one context, where one blank page stays open.
    context = await browser.newContext();
    await context.newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await receiver?.close();
    await origin?.close();
    await testDb?.drop();
  });

  const agentStatus = async (): Promise<number> =>
    (await send(`${origin.base}/agent/v1/network`, { headers: { authorization: `Bearer ${agent.token}` } }))
      .status;
  const cell = (page: Page, section: string, key: string) =>
    page.locator(`#${section} dd[data-key="${key}"]`);
  /** Whether the element lies wholly inside the visible part of the page. */
  const inViewport = (page: Page, selector: string): Promise<boolean> =>
    page.evaluate(
      `(() => { const r = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect();
        return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight + 1; })()`,
    ) as Promise<boolean>;
  const signIn = (page: Page, tokens: { admin: string; change: string }): Promise<void> =>
    signInToConsole(page, `${origin.base}/admin/agents`, tokens);
  /** Opens a page of the console by its link in the navigation. */
  const open = async (page: Page, name: string): Promise<void> => {
    await page.click(`#nav a[data-page="${name}"]`);
    await page.locator(`main section[data-page="${name}"]`).waitFor();
  };
  const settingChanges = async (): Promise<number> =>
    (
      await queryRows<{ n: number }>(
        testDb.handle.db,
        sql`select count(*)::int as n from registration_policy_changes`,
      )
    )[0]!.n;

  it("reads, changes a setting with a reason, and disables and enables an agent", async () => {
    const page = await context.newPage();
    const problems = recordPageProblems(page);
    const pageRequests: string[] = [];
    page.on("request", (request) => pageRequests.push(request.url()));

    await signIn(page, { admin: secrets.adminToken, change: secrets.changeToken });

    // The counters and the identity, as the API has them.
    await expect.poll(() => cell(page, "counters", "issued in total").textContent()).toBe("1");
    expect(await cell(page, "key-stock", "free verified keys").textContent()).toBe("14");
    const row = page.locator("#identities tr", { hasText: agent.agent_id });
    expect(await row.textContent()).toContain(agent.assigned_wallet);
    expect(await row.textContent()).toContain("enabled");
    // The seeded keys' batch has no restore drill yet: the page says so, with the command.
    expect(await page.textContent("#batches")).toContain(
      "restore drill: 0 backed-up batch(es) drilled, 1 not drilled (npm run restore-drill -- --pending)",
    );
    // The tokens are in the script's memory only: not in the fields, storage, cookies or address.
    expect(await page.inputValue("#admin-token")).toBe("");
    // (A string, evaluated in the page: this file is compiled without the DOM's types.)
    const kept = await page.evaluate(
      "({ local: localStorage.length, session: sessionStorage.length, cookie: document.cookie, href: location.href })",
    );
    expect(kept).toEqual({ local: 0, session: 0, cookie: "", href: `${origin.base}/admin/agents` });

    // A setting changed with a reason; its before and after appear in the audit.
    await open(page, "registration");
    await page.selectOption("#setting-name", "per_ip_daily");
    await page.fill("#setting-value", "5");
    await page.fill("#setting-reason", "more room for the browser test");
    await page.click("#settings-form button[type=submit]");
    // The confirmation is said beside the form that caused it, where the operator is looking.
    await expect.poll(() => page.textContent("#settings-form .form-message")).toBe("per_ip_daily: 3 → 5");
    expect(await inViewport(page, "#settings-message")).toBe(true);
    const audited = page.locator("#audit tr", { hasText: "more room for the browser test" });
    expect(await audited.locator("td").allTextContents()).toEqual([
      expect.any(String),
      "registration_setting",
      "per_ip_daily",
      "set",
      "3",
      "5",
      "more room for the browser test",
      "console",
      // Made with the shared tokens: the audit names no one.
      "admin token",
    ]);

    // Disable: the agent's next request is refused; enable: it works again.
    expect(await agentStatus()).toBe(200);
    await page.click(`#identities button[data-agent="${agent.agent_id}"][data-action="disable"]`);
    await page.fill("#identity-reason", "suspicious traffic");
    await page.click("#identity-form button[type=submit]");
    await expect
      .poll(() => page.textContent("#identity-form .form-message"))
      .toBe(`${agent.agent_id}: enabled → disabled`);
    expect(await inViewport(page, "#identity-message")).toBe(true);
    expect(await agentStatus()).toBe(401);
    expect(await row.textContent()).toContain("disabled (operator: suspicious traffic)");

    await page.click(`#identities button[data-agent="${agent.agent_id}"][data-action="enable"]`);
    await page.fill("#identity-reason", "false alarm");
    await page.click("#identity-form button[type=submit]");
    await expect
      .poll(() => page.textContent("#identity-form .form-message"))
      .toBe(`${agent.agent_id}: disabled → enabled`);
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

  it("offers no enable for a revoked agent, and an enable typed in for one says it stays revoked", async () => {
    const registered = await send(`${origin.base}/agent/v1/register`, {
      method: "POST",
      headers: {
        [HEADER_REGISTRATION]: "1",
        [HEADER_EDGE_SECRET]: EDGE_SECRET,
        [HEADER_REGISTRATION_IP]: "81.5.0.2",
      },
      body: "{}",
    });
    expect(registered.status).toBe(201);
    const revoked = registered.body as typeof agent;
    // Disabled, then revoked for good, through the console API.
    for (const action of ["disable", "revoke"]) {
      const changed = await send(`${origin.base}/admin/agents/registration/identity`, {
        method: "POST",
        headers: {
          "x-admin-api-token": secrets.adminToken,
          "x-registration-admin-token": secrets.changeToken,
        },
        body: JSON.stringify({ agent_id: revoked.agent_id, action, reason: "leaked token" }),
      });
      expect(changed.status).toBe(200);
    }
    const page = await context.newPage();
    await signIn(page, { admin: secrets.adminToken, change: secrets.changeToken });
    await open(page, "registration");
    const row = page.locator("#identities tr", { hasText: revoked.agent_id });
    await expect.poll(() => row.textContent()).toContain("revoked");
    expect(await row.locator("button").count()).toBe(0);

    await page.fill("#identity-agent", revoked.agent_id);
    await page.selectOption("#identity-action", "enable");
    await page.fill("#identity-reason", "typed in by hand");
    await page.click("#identity-form button[type=submit]");
    await expect
      .poll(() => page.textContent("#identity-form .form-message"))
      .toBe(`${revoked.agent_id}: disabled → enabled, but it stays revoked: its token is refused for good.`);
    const refused = await send(`${origin.base}/agent/v1/network`, {
      headers: { authorization: `Bearer ${revoked.token}` },
    });
    expect(refused.status).toBe(401);
    await page.close();
  });

  it("adds a webhook endpoint (its secret shown once), shows its delivery, Replay sends it again under the same webhook-id, and Rotate secret gives it a new one, shown once, the next delivery's only v1", async () => {
    const page = await context.newPage();
    const problems: string[] = [];
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    await signIn(page, { admin: secrets.adminToken, change: secrets.changeToken });
    await receiver.loadKeys(`${origin.base}/.well-known/webhooks/keys`);
    await open(page, "webhooks");

    const url = `${receiver.url}/console-hook`;
    await page.fill("#webhook-url", url);
    await page.check('#webhook-events input[value="action.confirmed"]');
    await page.fill("#webhook-add-reason", "the browser test's receiver");
    await page.click("#webhook-add-form button[type=submit]");
    await expect
      .poll(() => page.textContent("#webhook-add-message"))
      .toMatch(/^Endpoint [0-9a-f-]{36} added\./);
    const secret = (await page.textContent("#webhook-secret"))!;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    receiver.secret = secret;
    const endpoint = page.locator(".webhook-endpoint", { hasText: url });
    const endpointId = (await endpoint.getAttribute("data-endpoint"))!;
    expect(await endpoint.textContent()).toContain("enabled");
    // The list never shows the secret.
    const listed = await send(`${origin.base}/admin/agents/webhooks`, {
      headers: { "x-admin-api-token": secrets.adminToken },
    });
    expect(JSON.stringify(listed.body)).not.toContain(secret);

    // An event the endpoint subscribes to, written as the triggers write it.
    const [event] = await queryRows<{ id: string }>(
      testDb.handle.db,
      sql`insert into events (agent_id, type, data) values (null, 'action.confirmed', '{"marker":"console"}')
          returning id::text as id`,
    );
    await expect.poll(() => receiver.received.length, { timeout: 15_000 }).toBe(1);
    const first = receiver.received[0]!;
    expect(first).toMatchObject({ v1: true, v1a: true, path: "/console-hook" });
    expect(first.body.data.event_id).toBe(event!.id);

    // The delivery appears under its endpoint, delivered, with its webhook-id.
    await expect
      .poll(
        async () => {
          await page.click("#refresh");
          return endpoint.locator("tr", { hasText: first.webhookId }).textContent();
        },
        { timeout: 10_000 },
      )
      .toContain("delivered");
    // The endpoint's own row: its state and its pending deliveries (none left).
    const endpointCells = await endpoint.locator("table").first().locator("tbody td").allTextContents();
    expect(endpointCells.slice(3, 5)).toEqual(["enabled", "0"]);
    const row = endpoint.locator("tr", { hasText: first.webhookId });
    const cells = await row.locator("td").allTextContents();
    expect(cells.slice(0, 6)).toEqual([
      first.webhookId,
      event!.id,
      "action.confirmed",
      "delivered",
      "1",
      "204",
    ]);

    // Replay: the button prepares the form, the operator gives a reason and applies it.
    await row.locator('button[data-action="replay"]').click();
    expect(await page.inputValue("#webhook-endpoint")).toBe(endpointId);
    expect(await page.inputValue("#webhook-event")).toBe(event!.id);
    await page.fill("#webhook-change-reason", "the receiver lost it");
    await page.click("#webhook-change-form button[type=submit]");
    await expect
      .poll(() => page.textContent("#webhook-change-message"))
      .toBe(`${endpointId}: 1 deliveries queued (event ${event!.id}).`);
    await expect.poll(() => receiver.received.length, { timeout: 15_000 }).toBe(2);
    const again = receiver.received[1]!;
    expect(again.webhookId).toBe(first.webhookId);
    expect(again.body.data.event_id).toBe(event!.id);
    expect(again).toMatchObject({ v1: true, v1a: true });

    // Rotate the secret, with no overlap (as for one that leaked): the endpoint's button prepares
    // the form, the new secret is shown once, and the next delivery verifies with it alone.
    await endpoint.locator('button[data-action="rotate-secret"]').click();
    expect(await page.inputValue("#webhook-endpoint")).toBe(endpointId);
    expect(await page.inputValue("#webhook-action")).toBe("rotate-secret");
    await page.fill("#webhook-overlap", "0");
    await page.fill("#webhook-change-reason", "the secret leaked");
    await page.click("#webhook-change-form button[type=submit]");
    await expect
      .poll(() => page.textContent("#webhook-change-message"))
      .toMatch(new RegExp(`^${endpointId}: a new secret, below, shown once`));
    const rotated = (await page.textContent("#webhook-rotated-secret"))!;
    recordSecret(rotated);
    expect(rotated).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(rotated).not.toBe(secret);
    receiver.secret = rotated;
    await row.locator('button[data-action="replay"]').click();
    await page.fill("#webhook-change-reason", "after the rotation");
    await page.click("#webhook-change-form button[type=submit]");
    await expect.poll(() => receiver.received.length, { timeout: 15_000 }).toBe(3);
    const rotatedDelivery = receiver.received[2]!;
    expect(rotatedDelivery).toMatchObject({ v1: true, v1a: true });
    expect(
      rotatedDelivery.headers["webhook-signature"].split(" ").filter((each) => each.startsWith("v1,")),
    ).toHaveLength(1);
    // The page keeps the secret only until the next change.
    expect(await page.isHidden("#webhook-rotated-secret")).toBe(true);
    expect(
      JSON.stringify(
        (
          await send(`${origin.base}/admin/agents/webhooks`, {
            headers: { "x-admin-api-token": secrets.adminToken },
          })
        ).body,
      ),
    ).not.toContain(rotated);

    // Every change is in the audit, through the console, with its reason.
    for (const [reason, change] of [
      ["the browser test's receiver", "add"],
      ["the receiver lost it", "replay"],
      ["the secret leaked", "rotate_secret"],
    ]) {
      const audited = page.locator("#audit tr", { hasText: reason });
      const auditCells = await audited.locator("td").allTextContents();
      expect(auditCells.slice(1, 4)).toEqual(["webhook_endpoint", endpointId, change]);
      expect(auditCells[7]).toBe("console");
    }
    expect(problems).toEqual([]);
    await page.close();
  });

  it("opened with the read token only, says it is read only beside each change form and sends no change", async () => {
    const page = await context.newPage();
    const posts: string[] = [];
    page.on("request", (request) => {
      if (request.method() === "POST") posts.push(request.url());
    });
    await signIn(page, { admin: secrets.adminToken, change: "" });
    const before = await settingChanges();
    await open(page, "registration");
    for (const form of ["settings", "identity", "webhook-add", "webhook-change"]) {
      const note = await page.textContent(`#${form}-message`);
      expect(note, form).toContain("Read only: the console was opened without the registration admin token");
      expect(await page.isDisabled(`#${form}-form button[type=submit]`), form).toBe(true);
    }
    expect(await page.isDisabled(`#identities button[data-agent="${agent.agent_id}"]`)).toBe(true);
    // The agent's own page says it beside its button too, which cannot be pressed.
    await page.click(`#identities a[href="#/agents/${agent.agent_id}"]`);
    await page.locator("#agent-identity").waitFor();
    expect(await page.textContent("#agent-change-message")).toContain(
      "Read only: the console was opened without the registration admin token",
    );
    expect(await page.isDisabled("#agent-change-submit")).toBe(true);
    expect(await page.isDisabled("#agent-revoke")).toBe(true);
    // The passkeys page cannot register one; the approvals page shows a held action (payee and
    // amount from its row) and says why its button cannot be pressed.
    await open(page, "passkeys");
    expect(await page.textContent("#passkey-message")).toContain(
      "Read only: the console was opened without the registration admin token",
    );
    expect(await page.isDisabled("#passkey-register")).toBe(true);
    const [held] = await queryRows<{ action_id: string }>(
      testDb.handle.db,
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, status, amount_units,
            to_address, hold_rule, hold_expires_at)
          values (${agent.agent_id}, 'transfer', 'read-only-held', 'h', 'held', 3000000,
            '0x00000000000000000000000000000000000000b1', 'approval_above_units', now() + interval '1 hour')
          returning action_id`,
    );
    await open(page, "approvals");
    await page.locator(`#approve-${held!.action_id}`).waitFor();
    expect(await page.isDisabled(`#approve-${held!.action_id}`)).toBe(true);
    expect(await page.textContent(`#approve-message-${held!.action_id}`)).toContain(
      "Read only: the console was opened without the registration admin token",
    );
    expect(await page.textContent(`#signs-${held!.action_id} dd[data-key="payee"]`)).toBe(
      "0x00000000000000000000000000000000000000b1",
    );
    expect(await page.textContent("#approvals-message")).toContain("Read only");
    await open(page, "registration");
    // Enter in a field cannot send it either (the form's only submit button is disabled).
    await page.selectOption("#setting-name", "per_ip_daily");
    await page.fill("#setting-value", "7");
    await page.fill("#setting-reason", "read-only attempt");
    await page.press("#setting-reason", "Enter");
    await page.waitForTimeout(300);
    expect(posts).toEqual([]);
    expect(await settingChanges()).toBe(before);
    expect(await page.textContent("body")).not.toContain("Authentication failed");
    await page.close();
  });

  it("a wrong registration admin token is told as that token refused, beside the form, and changes nothing", async () => {
    const page = await context.newPage();
    await signIn(page, { admin: secrets.adminToken, change: "x".repeat(64) });
    await open(page, "registration");
    const before = await settingChanges();
    await page.selectOption("#setting-name", "per_ip_daily");
    await page.fill("#setting-value", "8");
    await page.fill("#setting-reason", "wrong change token");
    await page.click("#settings-form button[type=submit]");
    await expect
      .poll(() => page.textContent("#settings-message"))
      .toBe(
        "The registration admin token was refused: nothing changed. Forget the tokens and open the console again with the right one.",
      );
    // The read token was right: the console stays open.
    expect(await page.isVisible("#console")).toBe(true);
    expect(await settingChanges()).toBe(before);
    await page.close();
  });

  it("on a phone the page never scrolls sideways: each wide table scrolls inside its own box", async () => {
    const page = await context.newPage();
    await page.setViewportSize({ width: 390, height: 844 });
    await signIn(page, { admin: secrets.adminToken, change: secrets.changeToken });
    await open(page, "registration");
    await page.locator("#identities table").waitFor();
    const widths = (await page.evaluate(`(() => ({
      page: document.documentElement.scrollWidth,
      viewport: window.innerWidth,
      boxes: [...document.querySelectorAll(".table-scroll")].map((box) => ({
        id: box.parentElement.id,
        client: box.clientWidth,
        scroll: box.scrollWidth,
        right: box.getBoundingClientRect().right,
      })),
    }))()`)) as {
      page: number;
      viewport: number;
      boxes: { id: string; client: number; scroll: number; right: number }[];
    };
    expect(widths.page).toBeLessThanOrEqual(widths.viewport);
    // Every table lies in a box within the screen, and the identities table (wallets and ids) is
    // wider than a phone: it scrolls inside its box.
    expect(widths.boxes.length).toBeGreaterThan(5);
    for (const box of widths.boxes) expect(box.right, box.id).toBeLessThanOrEqual(widths.viewport);
    const identities = widths.boxes.find((box) => box.id === "identities")!;
    expect(identities.scroll).toBeGreaterThan(identities.client);
    await mkdir(path.dirname(PHONE_SCREENSHOT), { recursive: true });
    await page.screenshot({ path: PHONE_SCREENSHOT, fullPage: true });
    await page.close();
  });

  it("shows every agent once when Older agents is clicked twice before the next page has come", async () => {
    // More agents than a page holds (50): seeded as an operator's, a second of a minute apart.
    await testDb.handle.db.execute(sql`
      insert into agent_identities (assigned_wallet, agent_transfer_key_ref, capabilities, origin, created_at)
      select '0x' || lpad(to_hex(g), 40, 'e'), lpad(to_hex(g), 64, 'e'), array['read'], 'operator',
             now() - make_interval(secs => g)
      from generate_series(1, 60) g`);
    const [{ n: agents }] = (await queryRows<{ n: number }>(
      testDb.handle.db,
      sql`select count(*)::int as n from agent_identities`,
    )) as [{ n: number }];
    const page = await context.newPage();
    await signIn(page, { admin: secrets.adminToken, change: secrets.changeToken });
    const older = { sent: 0, answered: 0 };
    const isOlder = (url: string) => url.includes("/identities?") && url.includes("cursor=");
    page.on("request", (request) => {
      if (isOlder(request.url())) older.sent++;
    });
    page.on("requestfinished", (request) => {
      if (isOlder(request.url())) older.answered++;
    });
    await open(page, "agents");
    const rows = page.locator("#agent-list tbody tr");
    await expect.poll(() => rows.count()).toBe(50);
    await page.locator("#agent-list-more").waitFor();
    // Two clicks in one go, as an impatient double-click sends them.
    await page.evaluate(
      "(() => { const more = document.getElementById('agent-list-more'); more.click(); more.click(); })()",
    );
    await page.locator("#agent-list-more").waitFor({ state: "hidden" });
    // Every page asked for has been answered and drawn: the list is every agent, once.
    await expect.poll(() => older.answered > 0 && older.answered === older.sent).toBe(true);
    await expect.poll(() => rows.count()).toBeGreaterThan(50);
    const shown = await rows.locator("td:first-child").allTextContents();
    expect(new Set(shown).size).toBe(shown.length);
    expect(shown).toHaveLength(agents);
    await page.close();
  });

  it("shows every held action once when Older held actions is clicked twice before the next page has come", async () => {
    // More held transfers than the approvals page shows at once (20), written as the gateway holds one.
    await testDb.handle.db.execute(sql`
      insert into agent_actions (agent_id, kind, idempotency_key, request_hash, status, amount_units, to_address,
                                 hold_rule, created_at)
      select ${agent.agent_id}, 'transfer', 'held-' || g, 'h', 'held', 3000000,
             '0x00000000000000000000000000000000000000b1', 'per_transfer', now() - make_interval(secs => g)
      from generate_series(1, 25) g`);
    const [{ n: held }] = (await queryRows<{ n: number }>(
      testDb.handle.db,
      sql`select count(*)::int as n from agent_actions where status = 'held'`,
    )) as [{ n: number }];
    const page = await context.newPage();
    const older = { sent: 0, answered: 0 };
    const isOlder = (url: string) => url.includes("/actions?status=held") && url.includes("cursor=");
    page.on("request", (request) => {
      if (isOlder(request.url())) older.sent++;
    });
    page.on("requestfinished", (request) => {
      if (isOlder(request.url())) older.answered++;
    });
    await signIn(page, { admin: secrets.adminToken, change: secrets.changeToken });
    await open(page, "approvals");
    const cards = page.locator("#held-list button[id^='approve-']");
    await expect.poll(() => cards.count()).toBe(20);
    await page.locator("#held-list-more").waitFor();
    await page.evaluate(
      "(() => { const more = document.getElementById('held-list-more'); more.click(); more.click(); })()",
    );
    await page.locator("#held-list-more").waitFor({ state: "hidden" });
    await expect.poll(() => older.answered > 0 && older.answered === older.sent).toBe(true);
    await expect.poll(() => cards.count()).toBeGreaterThan(20);
    const shown = await cards.evaluateAll((buttons) => buttons.map((button) => button.id));
    expect(new Set(shown).size).toBe(shown.length);
    expect(shown).toHaveLength(held);
    await page.close();
  });

  it("shows the agent the address names when the page of one opened before answers after it", async () => {
    // A second agent, seeded as an operator's; the first's page answers slowly.
    const [other] = await queryRows<{ agent_id: string }>(
      testDb.handle.db,
      sql`insert into agent_identities (assigned_wallet, agent_transfer_key_ref, capabilities, origin)
          values (${`0x${"d7".repeat(20)}`}, ${"d7".repeat(32)}, array['read'], 'operator')
          returning agent_id::text as agent_id`,
    );
    const page = await context.newPage();
    await signIn(page, { admin: secrets.adminToken, change: secrets.changeToken });
    // Stands for a slow answer (the chain's balance read, a loaded node): held 1.5 s in the browser.
    const slow = `/admin/agents/identities/${agent.agent_id}`;
    await page.route(
      (url) => url.pathname.endsWith(slow),
      async (route) => {
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        await route.continue();
      },
    );
    const slowAnswered = page.waitForEvent("requestfinished", (request) => request.url().endsWith(slow));
    // The first agent's page, then, before it has answered, the second's.
    await page.evaluate(`location.hash = "#/agents/${agent.agent_id}"`);
    await page.evaluate(`location.hash = "#/agents/${other!.agent_id}"`);
    await expect.poll(() => page.textContent("#agent-title")).toBe(`Agent ${other!.agent_id}`);
    await slowAnswered;
    // Time for a late answer to be drawn, were it drawn.
    await page.waitForTimeout(500);
    expect(await page.textContent("#agent-title")).toBe(`Agent ${other!.agent_id}`);
    expect(await cell(page, "agent-identity", "wallet").textContent()).toBe(`0x${"d7".repeat(20)}`);
    // What its Disable would act on.
    expect(await page.getAttribute("#agent-change-form", "data-agent")).toBe(other!.agent_id);
    await page.close();
  });
});
