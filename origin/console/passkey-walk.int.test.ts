import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import type { StackAgent } from "../../testing/agent-factory.ts";
import { launchBrowser } from "../../testing/browser.ts";
import {
  addPlatformAuthenticator,
  recordPageProblems,
  signInToConsole,
} from "../../testing/console-browser.ts";
import { consoleSecrets } from "../../testing/console-client.ts";
import { freePort } from "../../testing/free-port.ts";
import { send } from "../../testing/http.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import { runTool } from "../../testing/run-tool.ts";
import { useMoneyStack, useStackOrigin } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";

// The passkey part of an operator's day, in a real Chromium against a whole real stack (origin,
// enclave, devnet, Postgres), on a desktop and on a phone. The browser's authenticator is a WebAuthn
// virtual authenticator of the DevTools protocol (a platform one, with user verification), so the
// page runs the real ceremony: an operator registers a passkey on the passkeys page; the policy
// authority's holder runs the enroll line the page shows (the real `npm run enclave-policy`); on the
// approvals page the operator reads what the approval signs and approves a held transfer with the
// passkey, which the enclave verifies: the transfer is then signed and confirmed once. axe-core
// finds no serious or critical violation on either page. Screenshots go to .test-artifacts/console/.

const secrets = consoleSecrets();
const ARTIFACTS = path.resolve(".test-artifacts/console");
const AXE = readFileSync(path.resolve("node_modules/axe-core/axe.min.js"), "utf8");
const VIEWPORTS = [
  { name: "desktop", width: 1280, height: 800, operator: "Alice Martin" },
  { name: "phone", width: 390, height: 844, operator: "Bashir Okafor" },
] as const;
const HELD_ABOVE_UNITS = "2000000";
const AMOUNT_UNITS = "3000000";

describe("passkeys in the console: register, enroll, approve a held transfer (real stack, real Chromium)", {
  timeout: 300_000,
}, () => {
  const stack = useMoneyStack({ env: secrets.env, inProcessOrigin: false }, { timeoutMs: 240_000 });
  let browser: Browser;
  let context: BrowserContext;
  /** For axe-core only: its script is injected inline, which the page's CSP rightly refuses. */
  let axeContext: BrowserContext;
  let keyDir: string | undefined;
  let policyKeyFile: string;
  // A browser takes no IP address as a relying party: the page is opened at localhost, on a port
  // chosen before the origin starts, so that its CONSOLE_ORIGIN names it.
  let port: number;

  beforeAll(async () => {
    port = await freePort();
    keyDir = await mkdtemp(path.join(tmpdir(), "passkey-walk-"));
    policyKeyFile = path.join(keyDir, "policy-authority.key");
    await writeFile(policyKeyFile, `${Buffer.from(stack.enclave.policySecret).toString("hex")}\n`, {
      mode: 0o600,
    });
    browser = await launchBrowser();
    // The packaged Chromium is one process, which ends when a context closes: both stay open.
    context = await browser.newContext();
    await context.newPage();
    axeContext = await browser.newContext({ bypassCSP: true });
    await axeContext.newPage();
    await mkdir(ARTIFACTS, { recursive: true });
  }, 60_000);
  const origin = useStackOrigin("console origin on localhost", stack, () => ({
    port,
    env: { CONSOLE_RP_ID: "localhost", CONSOLE_ORIGIN: `http://localhost:${port}` },
  }));
  afterAll(async () => {
    await browser?.close();
    if (keyDir) await rm(keyDir, { recursive: true, force: true });
  });

  const consoleUrl = (hash = "") =>
    `http://localhost:${port}${new URL(origin.base).pathname}/admin/agents${hash}`;
  const signIn = (page: Page, hash: string): Promise<void> =>
    signInToConsole(page, consoleUrl(hash), { admin: secrets.adminToken, change: secrets.changeToken });
  const open = async (page: Page, name: string): Promise<void> => {
    await page.click(`#nav a[data-page="${name}"]`);
    await page.locator(`main section[data-page="${name}"]`).waitFor();
    await page.waitForLoadState("networkidle");
  };

  /** An agent whose own policy holds every transfer above 2 USDC, and one such transfer, held. */
  const heldTransfer = async (): Promise<{ agent: StackAgent; actionId: string; to: string }> => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    const patched = await send(`${origin.base}/agent/v1/policy`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${agent.token}` },
      body: JSON.stringify({ approval_above_units: HELD_ABOVE_UNITS }),
    });
    expect(patched.status).toBe(200);
    const to = newAccount().address.toLowerCase();
    const calls = agentCalls(origin.base, agent.token);
    const held = await calls.transfer({ idempotency_key: newKey(), to, amount: AMOUNT_UNITS });
    expect(held.status).toBe(202);
    const actionId = (held.body as ActionView).action_id;
    await expect.poll(async () => ((await calls.action(actionId)).body as ActionView).status).toBe("held");
    return { agent, actionId, to };
  };

  for (const viewport of VIEWPORTS) {
    it(`on a ${viewport.name}: registers a passkey in the page, the policy authority enrolls it with the line the page shows, and a held transfer approved with it in the page is signed and confirmed once`, async () => {
      const db = stack.db.handle.db;
      const page = await context.newPage();
      await page.setViewportSize(viewport);
      const problems = recordPageProblems(page);
      const { cdp, authenticatorId } = await addPlatformAuthenticator(context, page);

      // Register: the browser's ceremony, the origin's verification; pending.
      await signIn(page, "#/passkeys");
      await page.locator('main section[data-page="passkeys"]').waitFor();
      await page.fill("#passkey-operator", viewport.operator);
      await page.click("#passkey-register");
      await expect.poll(() => page.textContent("#passkey-message")).toContain("pending");
      const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
      expect(credentials).toHaveLength(1);
      const credentialId = Buffer.from(credentials[0]!.credentialId, "base64").toString("base64url");
      const [registered] = await queryRows<{ key_id: string; enrolled_at: Date | null }>(
        db,
        sql`select key_id, enrolled_at from operator_passkeys where credential_id = ${credentialId}
              and operator = ${viewport.operator}`,
      );
      expect(registered).toMatchObject({ enrolled_at: null });
      const keyId = registered!.key_id;
      const fingerprint = keyId.replace(/^pk-/, "");
      const listed = page.locator("#passkey-list tr", { hasText: keyId });
      expect(await listed.locator("td").allTextContents()).toEqual([
        viewport.operator,
        keyId,
        fingerprint,
        "pending",
        "localhost",
        `http://localhost:${port}`,
      ]);
      const line = (await page.textContent(`code[data-enroll="${keyId}"]`))!;
      expect(line).toBe(`npm run enclave-policy -- enroll-passkey ${keyId} --policy-key FILE`);
      await page.screenshot({ path: path.join(ARTIFACTS, `passkeys-${viewport.name}.png`), fullPage: true });

      // Enroll: the policy authority's holder runs that line, FILE being the key file.
      const args = line
        .replace(/^npm run enclave-policy -- /, "")
        .split(" ")
        .map((word) => (word === "FILE" ? policyKeyFile : word));
      const enrolled = await runTool("ops/enclave-policy.ts", args, { env: stack.processEnv() });
      expect(enrolled.code, enrolled.stderr).toBe(0);
      expect(enrolled.stdout).toContain(`operator ${viewport.operator}`);
      expect(enrolled.stdout).toContain(`key fingerprint ${fingerprint}`);
      await page.click("#refresh");
      await expect.poll(() => listed.locator("td").nth(3).textContent()).toBe("enrolled");
      expect(await page.locator(`code[data-enroll="${keyId}"]`).count()).toBe(0);

      // Approve: the held transfer, what the passkey signs, the button, the answer beside it.
      const { agent, actionId, to } = await heldTransfer();
      const [hold] = await queryRows<{ ends: number }>(
        db,
        sql`select floor(extract(epoch from hold_expires_at))::int as ends from agent_actions where action_id = ${actionId}`,
      );
      await open(page, "approvals");
      // The newest enrolled passkey is the one offered first: this operator's.
      await expect.poll(() => page.inputValue("#approval-passkey")).toBe(keyId);
      const signs = (key: string) => page.locator(`#signs-${actionId} dd[data-key="${key}"]`);
      await expect.poll(() => signs("challenge").count()).toBe(1);
      expect(await signs("payee").textContent()).toBe(to);
      expect(await signs("amount (units)").textContent()).toBe(AMOUNT_UNITS);
      expect(await signs("approval lasts until").textContent()).toContain(`(unix ${hold!.ends})`);
      expect(await signs("signed by").textContent()).toBe(`${viewport.operator}'s passkey ${keyId}`);
      await page.screenshot({ path: path.join(ARTIFACTS, `approvals-${viewport.name}.png`), fullPage: true });
      await page.click(`#approve-${actionId}`);
      await expect
        .poll(() => page.textContent(`#approve-message-${actionId}`))
        .toBe(
          `Approved by ${viewport.operator} with passkey ${keyId}: the enclave signs it once. It leaves this list at the next refresh.`,
        );

      // Signed and confirmed once: the action's state, one outgoing row, one transaction on the
      // chain from the agent's wallet, the amount received once; the audit names who approved.
      const done = await agentCalls(origin.base, agent.token).settled(actionId);
      expect(done.status).toBe("confirmed");
      const [outgoing] = await queryRows<{ n: number }>(
        db,
        sql`select count(*)::int as n from outgoing_transactions where sender = ${agent.wallet.toLowerCase()}`,
      );
      expect(outgoing!.n).toBe(1);
      const chain = publicClientFor(stack.devnet.url);
      expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(1);
      expect((await chain.getBalance({ address: to as `0x${string}` })) / WEI_PER_UNIT).toBe(
        BigInt(AMOUNT_UNITS),
      );
      const audit = await queryRows<{ operator: string; key_id: string }>(
        db,
        sql`select operator, key_id from passkey_approvals where subject = ${actionId}`,
      );
      expect(audit).toEqual([{ operator: viewport.operator, key_id: keyId }]);

      // Neither page scrolls sideways; the page holds nothing of its own; the browser reported nothing.
      for (const name of ["passkeys", "approvals"]) {
        await open(page, name);
        const widths = (await page.evaluate(
          "({ page: document.documentElement.scrollWidth, viewport: window.innerWidth })",
        )) as { page: number; viewport: number };
        expect(widths.page, name).toBeLessThanOrEqual(widths.viewport);
      }
      const kept = await page.evaluate(`(async () => ({
        local: localStorage.length,
        session: sessionStorage.length,
        cookie: document.cookie,
        databases: (await indexedDB.databases()).length,
      }))()`);
      expect(kept).toEqual({ local: 0, session: 0, cookie: "", databases: 0 });
      expect(problems).toEqual([]);
      await cdp.send("WebAuthn.removeVirtualAuthenticator", { authenticatorId });
      await cdp.detach();
      await page.close();
    });
  }

  it("on a desktop: revokes a passkey in the page with a reason: listed revoked, offered for no approval or revoke, refused by the enclave, audited", async () => {
    const db = stack.db.handle.db;
    const operator = VIEWPORTS[0].operator;
    const [row] = await queryRows<{ key_id: string }>(
      db,
      sql`select key_id from operator_passkeys where operator = ${operator} and enrolled_at is not null`,
    );
    const keyId = row!.key_id;
    const page = await context.newPage();
    await page.setViewportSize(VIEWPORTS[0]);
    const problems = recordPageProblems(page);
    await signIn(page, "#/passkeys");
    await page.locator("#passkey-list table").waitFor();
    await page.selectOption("#passkey-revoke-key", keyId);
    await page.fill("#passkey-revoke-reason", "laptop lost on a train");
    await page.click("#passkey-revoke");
    await expect
      .poll(() => page.textContent("#passkey-revoke-message"))
      .toBe(`Revoked ${keyId} of ${operator}: it approves nothing and signs no one in from now on.`);
    const listed = page.locator("#passkey-list tr", { hasText: keyId });
    expect(await listed.locator("td").nth(3).textContent()).toMatch(
      /^revoked \S+ \(laptop lost on a train\)$/,
    );
    const options = async (select: string) =>
      page
        .locator(`${select} option`)
        .evaluateAll((each) => each.map((option) => option.getAttribute("value")));
    expect(await options("#passkey-revoke-key")).not.toContain(keyId);
    await open(page, "approvals");
    expect(await options("#approval-passkey")).not.toContain(keyId);
    const sealed = await stack.signer.getPolicy();
    if (!sealed.ok) throw new Error("get_policy");
    expect(sealed.value.operatorPasskeys.map((each) => each.keyId)).not.toContain(keyId);
    const [revoked] = await queryRows<{ revoked_reason: string; revoked_source: string }>(
      db,
      sql`select revoked_reason, revoked_source from operator_passkeys where key_id = ${keyId}`,
    );
    expect(revoked).toEqual({ revoked_reason: "laptop lost on a train", revoked_source: "console" });
    expect(problems).toEqual([]);
    await page.close();
  });

  for (const viewport of VIEWPORTS) {
    it(`on a ${viewport.name}: axe-core finds no serious or critical violation on the passkeys and approvals pages`, async () => {
      // After the walks above, which enrolled a passkey: a held transfer, so that the approvals
      // page shows one with what its approval signs.
      const { actionId } = await heldTransfer();
      const page = await axeContext.newPage();
      await page.setViewportSize(viewport);
      const serious = async (where: string): Promise<string[]> => {
        await page.addScriptTag({ content: AXE });
        const found =
          (await page.evaluate(`axe.run(document, { resultTypes: ["violations"] }).then((result) =>
          result.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
            .map((v) => v.id + ": " + v.nodes.map((n) => n.target.join(" ")).join(", ")))`)) as string[];
        return found.map((line) => `${where}: ${line}`);
      };
      await signIn(page, "#/passkeys");
      await page.locator("#passkey-list table").waitFor();
      const violations = await serious("passkeys");
      await open(page, "approvals");
      await page.locator(`#signs-${actionId} dd[data-key="challenge"]`).waitFor();
      violations.push(...(await serious("approvals")));
      expect(violations).toEqual([]);
      await page.close();
    });
  }
});
