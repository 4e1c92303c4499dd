import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addPlatformAuthenticator,
  consoleAtLocalhost,
  recordPageProblems,
  signInToConsole,
  useBrowserContext,
} from "../../testing/console-browser.ts";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { freePort } from "../../testing/free-port.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { SoftwarePasskey } from "../../testing/software-passkey.ts";
import { queryRows } from "../db/client.ts";
import { markEnrolled } from "../passkeys/store.ts";

// Which passkey the approvals page offers to sign with, in a real Chromium against the real origin
// (real Postgres), with a WebAuthn virtual authenticator holding one operator's passkey. Listed
// newest first, the enrolled passkeys may begin with another operator's, which this device does not
// hold: an operator signed in with their own passkey is offered theirs, and one they choose stays
// chosen. Enrollment is the enclave's business (passkey-walk.int.test.ts runs it); here the
// passkeys are marked enrolled as the enroll tool marks them, since the page reads only that mark.

const secrets = consoleSecrets();
const SIGNED_IN = "Bruno Costa";
const OTHER = "Alice Martin";

describe("the passkey the approvals page offers to sign with (real Chromium)", { timeout: 120_000 }, () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let port: number;
  const chromium = useBrowserContext();

  beforeAll(async () => {
    port = await freePort();
    testDb = await createTestDatabase();
    origin = await startTestOrigin({
      database: testDb.handle,
      port,
      env: { ...secrets.env, ...consoleAtLocalhost(port) },
    });
  }, 60_000);
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });

  const consoleUrl = (hash = "") =>
    `http://localhost:${port}${new URL(origin.base).pathname}/admin/agents${hash}`;

  it("signed in with their passkey, an operator is offered their own to approve with, not the newest enrolled one of another operator; one they choose stays chosen", async () => {
    const db = testDb.handle.db;
    const page = await chromium.context.newPage();
    const problems = recordPageProblems(page);
    const { cdp, authenticatorId } = await addPlatformAuthenticator(chromium.context, page);

    // Bruno registers a passkey of this device in the page.
    await signInToConsole(page, consoleUrl("#/passkeys"), {
      admin: secrets.adminToken,
      change: secrets.changeToken,
    });
    await page.locator('main section[data-page="passkeys"]').waitFor();
    await page.fill("#passkey-operator", SIGNED_IN);
    await page.click("#passkey-register");
    await expect.poll(() => page.textContent("#passkey-message")).toContain("pending");
    // Alice registers hers later, on her own device: the newest, listed first.
    const alice = new SoftwarePasskey("localhost", `http://localhost:${port}`);
    const tokens = consoleCalls(origin.base, { admin: secrets.adminToken, change: secrets.changeToken });
    const creation = await tokens.post("/passkeys/registration/options", { operator: OTHER });
    const challenge = (creation.body as { options: { challenge: string } }).options.challenge;
    const registered = await tokens.post("/passkeys/registration", {
      operator: OTHER,
      response: alice.registrationResponse(challenge),
    });
    expect(registered.status).toBe(201);
    const rows = await queryRows<{ operator: string; credential_id: string; key_id: string }>(
      db,
      sql`select operator, credential_id, key_id from operator_passkeys order by created_at desc`,
    );
    expect(rows.map((row) => row.operator)).toEqual([OTHER, SIGNED_IN]);
    for (const row of rows) await markEnrolled(db, row.credential_id);
    const keyOf = (operator: string) => rows.find((row) => row.operator === operator)!.key_id;

    // Bruno signs in with his passkey and opens the approvals page.
    await page.click("#forget");
    await page.locator("#login").waitFor({ state: "visible" });
    await page.click("#sign-in-passkey");
    await expect.poll(() => page.textContent("#signed-in-as")).toBe(`Signed in as ${SIGNED_IN}.`);
    await page.click('#nav a[data-page="approvals"]');
    await page.locator('main section[data-page="approvals"]').waitFor();
    await expect
      .poll(() => page.locator("#approval-passkey option").allTextContents())
      .toEqual([`${OTHER} (${keyOf(OTHER)})`, `${SIGNED_IN} (${keyOf(SIGNED_IN)})`]);
    expect(await page.inputValue("#approval-passkey")).toBe(keyOf(SIGNED_IN));

    // Another passkey chosen by hand stays chosen when the page is opened again.
    await page.selectOption("#approval-passkey", keyOf(OTHER));
    await page.click('#nav a[data-page="overview"]');
    await page.click('#nav a[data-page="approvals"]');
    await page.waitForLoadState("networkidle");
    expect(await page.inputValue("#approval-passkey")).toBe(keyOf(OTHER));
    expect(problems).toEqual([]);
    await cdp.send("WebAuthn.removeVirtualAuthenticator", { authenticatorId });
    await cdp.detach();
    await page.close();
  });
});
