import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { sql } from "drizzle-orm";
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser } from "../../testing/browser.ts";
import {
  addPlatformAuthenticator,
  recordPageProblems,
  signInToConsole,
} from "../../testing/console-browser.ts";
import { consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { freePort } from "../../testing/free-port.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { queryRows } from "../db/client.ts";
import { markEnrolled } from "../passkeys/store.ts";

// An operator signs in as themselves with a passkey, in a real Chromium against the real origin
// (real Postgres). The browser's authenticator is a WebAuthn virtual authenticator of the DevTools
// protocol (a platform one, with user verification), so the page runs the real ceremonies: the
// operator registers the passkey under the admin tokens, it is marked enrolled as the enroll tool
// marks it once the enclave sealed it (passkey-walk.int.test.ts runs that tool against the
// enclave; a sign-in reads only the mark), and then, the tokens forgotten, signs in with it alone:
// the header names them, a disable they make is named theirs in the audit page, and signing out
// leaves the page at its sign-in panel with nothing kept. axe-core finds no serious or critical
// violation on the sign-in panel. Screenshots go to .test-artifacts/console/.

const secrets = consoleSecrets();
const ARTIFACTS = path.resolve(".test-artifacts/console");
const AXE = readFileSync(path.resolve("node_modules/axe-core/axe.min.js"), "utf8");
const OPERATOR = "Chioma Adeyemi";

describe("signing in to the console with a passkey (real Chromium)", { timeout: 120_000 }, () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let browser: Browser;
  let context: BrowserContext;
  /** For axe-core only: its script is injected inline, which the page's CSP rightly refuses. */
  let axeContext: BrowserContext;
  // A browser takes no IP address as a relying party: the page is opened at localhost, on a port
  // chosen before the origin starts, so that its CONSOLE_ORIGIN names it.
  let port: number;

  beforeAll(async () => {
    port = await freePort();
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 5);
    origin = await startTestOrigin({
      database: testDb.handle,
      port,
      env: { ...secrets.env, CONSOLE_RP_ID: "localhost", CONSOLE_ORIGIN: `http://localhost:${port}` },
    });
    browser = await launchBrowser();
    // The packaged Chromium is one process, which ends when a context closes: both stay open.
    context = await browser.newContext();
    await context.newPage();
    axeContext = await browser.newContext({ bypassCSP: true });
    await axeContext.newPage();
    await mkdir(ARTIFACTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await origin?.close();
    await testDb?.drop();
  });

  const consoleUrl = (hash = "") =>
    `http://localhost:${port}${new URL(origin.base).pathname}/admin/agents${hash}`;

  it("signs in with the passkey alone, shows the name, makes a disable the audit names them for, and signs out leaving nothing kept", async () => {
    const db = testDb.handle.db;
    const provisioned = await provisionedIdentity(db, { capabilities: ["read"], origin: "operator" });
    const agentId = provisioned.agentId;
    const page = await context.newPage();
    await page.setViewportSize({ width: 1280, height: 800 });
    const problems = recordPageProblems(page);
    const { cdp, authenticatorId } = await addPlatformAuthenticator(context, page);

    // Registered under the admin tokens, then enrolled; the tokens forgotten.
    await signInToConsole(page, consoleUrl("#/passkeys"), {
      admin: secrets.adminToken,
      change: secrets.changeToken,
    });
    await page.locator('main section[data-page="passkeys"]').waitFor();
    await page.fill("#passkey-operator", OPERATOR);
    await page.click("#passkey-register");
    await expect.poll(() => page.textContent("#passkey-message")).toContain("pending");
    const [registered] = await queryRows<{ credential_id: string; key_id: string }>(
      db,
      sql`select credential_id, key_id from operator_passkeys where operator = ${OPERATOR}`,
    );
    await markEnrolled(db, registered!.credential_id);
    const keyId = registered!.key_id;
    await page.click("#forget");
    await page.locator("#login").waitFor({ state: "visible" });

    // Signed in with the passkey alone: the header names the operator.
    await page.click("#sign-in-passkey");
    await page.locator("#console").waitFor({ state: "visible" });
    await expect.poll(() => page.textContent("#signed-in-as")).toBe(`Signed in as ${OPERATOR}.`);
    expect(await page.isVisible("#sign-out")).toBe(true);
    expect(await page.textContent("#message")).toContain(`Signed in as ${OPERATOR} with passkey ${keyId}`);
    await page.screenshot({ path: path.join(ARTIFACTS, "session-signed-in.png") });

    // A disable, made in the page; the audit page names who made it.
    await page.click('#nav a[data-page="registration"]');
    await page.locator('main section[data-page="registration"]').waitFor();
    await page.fill("#identity-agent", agentId);
    await page.selectOption("#identity-action", "disable");
    await page.fill("#identity-reason", "odd traffic");
    await page.click("#identity-form button[type=submit]");
    await expect
      .poll(() => page.textContent("#identity-message"))
      .toContain(`${agentId}: enabled → disabled`);
    await page.click('#nav a[data-page="audit"]');
    const row = page.locator("#audit tr", { hasText: agentId });
    await expect.poll(() => row.count()).toBe(1);
    const cells = await row.locator("td").allTextContents();
    expect(cells.slice(1, 4)).toEqual(["identity", agentId, "disable"]);
    expect(cells.slice(-3)).toEqual(["odd traffic", "console", `${OPERATOR} (${keyId})`]);
    const [recorded] = await queryRows<{ operator: string; passkey_key_id: string }>(
      db,
      sql`select operator, passkey_key_id from identity_changes where agent_id = ${agentId}`,
    );
    expect(recorded).toEqual({ operator: OPERATOR, passkey_key_id: keyId });

    // Another passkey registered in the page while signed in: under the operator's own name,
    // which the page fills in and fixes (the origin refuses another name from a session).
    await page.click('#nav a[data-page="passkeys"]');
    await page.locator('main section[data-page="passkeys"]').waitFor();
    expect(await page.inputValue("#passkey-operator")).toBe(OPERATOR);
    expect(await page.locator("#passkey-operator").getAttribute("readonly")).not.toBeNull();
    await page.click("#passkey-register");
    await expect.poll(() => page.textContent("#passkey-message")).toContain(`for ${OPERATOR}`);
    const [second] = await queryRows<{ n: number }>(
      db,
      sql`select count(*)::int as n from operator_passkeys where operator = ${OPERATOR}`,
    );
    expect(second!.n).toBe(2);

    // Signed out: the session is ended in the database, the page is back at its sign-in panel.
    await page.click("#sign-out");
    await page.locator("#login").waitFor({ state: "visible" });
    expect(await page.isVisible("#signed-in")).toBe(false);
    const [session] = await queryRows<{ open: number }>(
      db,
      sql`select count(*)::int as open from operator_sessions where ended_at is null and key_id = ${keyId}`,
    );
    expect(session!.open).toBe(0);
    const kept = await page.evaluate(`(async () => ({
      local: localStorage.length,
      session: sessionStorage.length,
      cookie: document.cookie,
      databases: (await indexedDB.databases()).length,
    }))()`);
    expect(kept).toEqual({ local: 0, session: 0, cookie: "", databases: 0 });
    expect(await context.cookies()).toEqual([]);

    // Signed in again, and a second session of the operator's elsewhere (another browser): Sign
    // out everywhere ends both.
    await page.click("#sign-in-passkey");
    await page.locator("#console").waitFor({ state: "visible" });
    await db.execute(
      sql`insert into operator_sessions (token_hash, operator, key_id, expires_at)
          values (${"e".repeat(64)}, ${OPERATOR}, ${keyId}, now() + interval '1 hour')`,
    );
    await page.click("#sign-out-everywhere");
    await page.locator("#login").waitFor({ state: "visible" });
    expect(await page.textContent("#message")).toBe("Signed out everywhere: 2 sessions ended.");
    const [everywhere] = await queryRows<{ open: number }>(
      db,
      sql`select count(*)::int as open from operator_sessions where ended_at is null and operator = ${OPERATOR}`,
    );
    expect(everywhere!.open).toBe(0);
    expect(problems).toEqual([]);
    await cdp.send("WebAuthn.removeVirtualAuthenticator", { authenticatorId });
    await cdp.detach();
    await page.close();
  });

  it("axe-core finds no serious or critical violation on the sign-in panel", async () => {
    const page = await axeContext.newPage();
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(consoleUrl());
    await page.locator("#sign-in-passkey").waitFor();
    await page.addScriptTag({ content: AXE });
    const found = (await page.evaluate(`axe.run(document, { resultTypes: ["violations"] }).then((result) =>
      result.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => v.id + ": " + v.nodes.map((n) => n.target.join(" ")).join(", ")))`)) as string[];
    expect(found).toEqual([]);
    await page.close();
  });
});
