import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { sql } from "drizzle-orm";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../../devnet/testing.ts";
import type { StackAgent } from "../../testing/agent-factory.ts";
import { launchBrowser } from "../../testing/browser.ts";
import { recordPageProblems, signInToConsole } from "../../testing/console-browser.ts";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { send } from "../../testing/http.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { envelope, fundedPayer, pay, paymentHeader } from "../../testing/x402-payer.ts";
import { queryRows } from "../db/client.ts";

// An operator's day in the console, in a real Chromium against a whole real stack (origin,
// enclave, devnet, Postgres), on a desktop and on a phone: find an agent by its wallet, read why its
// last transfer was refused (the rule and what remained, as the gateway refused it for real), disable
// it there (its next request is 401), find a settlement by its transaction hash (a real x402
// payment, settled on chain), go back with the browser's button. Afterwards the page holds nothing
// of its own and the browser reported no CSP violation. axe-core finds no serious or critical
// violation on any page, on either viewport. Each page's screenshot goes to .test-artifacts/console/.

const secrets = consoleSecrets();
const ARTIFACTS = path.resolve(".test-artifacts/console");
const AXE = readFileSync(path.resolve("node_modules/axe-core/axe.min.js"), "utf8");
const VIEWPORTS = [
  { name: "desktop", width: 1280, height: 800 },
  { name: "phone", width: 390, height: 844 },
] as const;
const BESIDE = { concurrent: true } as const;
const PAGES = ["overview", "agents", "actions", "settlements", "registration", "keys", "audit", "webhooks"];

describe("an operator's day in the console (real stack, real Chromium)", { timeout: 300_000 }, () => {
  const stack = useMoneyStack(
    { x402: { amountUnits: 10_000n, payTo: "enclave-payee" }, env: secrets.env },
    { timeoutMs: 240_000 },
  );
  let browser: Browser;
  let context: BrowserContext;
  /** For axe-core only: its script is injected inline, which the page's CSP rightly refuses. */
  let axeContext: BrowserContext;
  let agent: StackAgent;
  let refusal: { code: string; rule: string; remaining: string; message: string };
  let settlement: { id: string; tx_hash: string };

  beforeAll(async () => {
    agent = await stack.newAgent({ units: 20_000_000n });
    const headers = { authorization: `Bearer ${agent.token}`, "content-type": "application/json" };
    // The agent's own policy: 3 USDC a day. One transfer of 1 USDC, then one of 2.5 USDC, refused.
    const patched = await send(`${stack.origin.base}/agent/v1/policy`, {
      method: "PATCH",
      headers,
      body: JSON.stringify({ transfers: { daily_units: "3000000" } }),
    });
    expect(patched.status).toBe(200);
    const to = newAccount().address;
    const transfer = (amount: string, key: string) =>
      send(`${stack.origin.base}/agent/v1/transfers`, {
        method: "POST",
        headers,
        body: JSON.stringify({ idempotency_key: key, to, amount }),
      });
    expect([200, 202]).toContain((await transfer("1000000", "walk-first")).status);
    const refused = await transfer("2500000", "walk-refused");
    expect(refused.status).toBe(403);
    refusal = (refused.body as { error: typeof refusal }).error;
    expect(refusal).toMatchObject({ code: "policy_denied", rule: "transfers.daily_units" });

    // A real x402 payment to the demo, settled on chain.
    const demo = `${stack.origin.base}/x402/demo`;
    const payer = await fundedPayer(stack.devnet.url);
    const paid = await pay(demo, paymentHeader(await envelope(demo, payer)));
    expect(paid.status, JSON.stringify(paid.body)).toBe(200);
    [settlement] = (await queryRows<{ id: string; tx_hash: string }>(
      stack.db.handle.db,
      sql`select id::text, tx_hash from x402_settlements where payer = ${payer.address.toLowerCase()} and status = 'settled'`,
    )) as [{ id: string; tx_hash: string }];
    expect(settlement.tx_hash).toMatch(/^0x[0-9a-f]{64}$/);

    browser = await launchBrowser();
    // The packaged Chromium is one process, which ends when a context closes: both stay open.
    context = await browser.newContext();
    await context.newPage();
    axeContext = await browser.newContext({ bypassCSP: true });
    await axeContext.newPage();
    await mkdir(ARTIFACTS, { recursive: true });
  }, 240_000);
  afterAll(async () => {
    await browser?.close();
  });

  const agentStatus = async (): Promise<number> =>
    (
      await send(`${stack.origin.base}/agent/v1/network`, {
        headers: { authorization: `Bearer ${agent.token}` },
      })
    ).status;

  const signIn = (page: Page, hash = ""): Promise<void> =>
    signInToConsole(page, `${stack.origin.base}/admin/agents${hash}`, {
      admin: secrets.adminToken,
      change: secrets.changeToken,
    });
  const shown = (page: Page, name: string) => page.locator(`main section[data-page="${name}"]`).waitFor();

  // The walks go in turn (each enables the one agent, disables it, and counts the audit's disables
  // so far). axe-core's reads run beside them, in turn with each other (both at once beside a walk
  // load the one Chromium past what it gains), on pages of their own in the other context: they
  // change nothing, and assert nothing of the agent's state or the audit.
  describe("walks", BESIDE, () => {
    for (const viewport of VIEWPORTS) {
      it.sequential(`on a ${viewport.name}: finds the agent by wallet, reads its refusal, disables it, finds the settlement by hash`, async ({
        expect,
      }) => {
        // The agent starts enabled on each viewport (the desktop's walk disabled it).
        await consoleCalls(stack.origin.base, {
          admin: secrets.adminToken,
          change: secrets.changeToken,
        }).post("/registration/identity", {
          agent_id: agent.agentId,
          action: "enable",
          reason: "the walk starts again",
        });
        expect(await agentStatus()).toBe(200);
        const page = await context.newPage();
        await page.setViewportSize(viewport);
        const problems = recordPageProblems(page);
        await signIn(page);

        // Find the agent by its wallet: the search lands on its page.
        await page.fill("#search", agent.wallet);
        await page.click("#search-form button[type=submit]");
        await page.waitForURL(`**/admin/agents#/agents/${agent.agentId}`);
        await shown(page, "agent");
        await expect.poll(() => page.textContent("#agent-identity")).toContain(agent.wallet.toLowerCase());
        expect(await page.textContent('#agent-identity dd[data-key="key batch"]')).toContain("drilled");
        // Why its last transfer was refused: the rule and what remained, as the gateway said.
        const why = (await page.textContent("#agent-last-refusal"))!;
        expect(why).toContain("transfer of 2500000 units");
        expect(why).toContain("policy_denied, rule transfers.daily_units");
        expect(why).toContain(`(${refusal.remaining} remaining)`);
        expect(
          await page.locator("#agent-detail tr", { hasText: "transfers.daily_units" }).textContent(),
        ).toContain("3000000");
        await page.screenshot({ path: path.join(ARTIFACTS, `agent-${viewport.name}.png`), fullPage: true });

        // Disable it, there: the confirmation beside the button; its next request is refused.
        await page.fill("#agent-change-reason", "refused transfers, looking into it");
        await page.click("#agent-change-submit");
        await expect
          .poll(() => page.textContent("#agent-change-message"))
          .toBe("Disabled: applies at the agent's next request.");
        expect(await page.textContent("#agent-identity")).toContain(
          "disabled (operator: refused transfers, looking into it)",
        );
        expect(await agentStatus()).toBe(401);

        // Find the settlement by its transaction hash.
        await page.fill("#search", settlement.tx_hash);
        await page.click("#search-form button[type=submit]");
        await page.waitForURL(`**/admin/agents#/settlements/${settlement.id}`);
        await expect.poll(() => page.textContent("#settlement-fields")).toContain(settlement.tx_hash);
        expect(await page.textContent('#settlement-fields dd[data-key="state"]')).toBe("settled");
        // The back button returns to the agent's page.
        await page.goBack();
        await page.waitForURL(`**/admin/agents#/agents/${agent.agentId}`);
        await shown(page, "agent");

        // No page scrolls sideways on this viewport; each is captured.
        for (const name of PAGES) {
          await page.click(`#nav a[data-page="${name}"]`);
          await shown(page, name);
          await page.waitForLoadState("networkidle");
          const widths = (await page.evaluate(
            "({ page: document.documentElement.scrollWidth, viewport: window.innerWidth })",
          )) as { page: number; viewport: number };
          expect(widths.page, name).toBeLessThanOrEqual(widths.viewport);
          // Opened after the disable, the audit lists it: each page reads its data when it opens.
          if (name === "audit") {
            expect(
              await page.locator("#audit tr", { hasText: "refused transfers, looking into it" }).count(),
            ).toBe(viewport.name === "desktop" ? 1 : 2);
          }
          if (viewport.name === "desktop" || name === "overview") {
            await page.screenshot({
              path: path.join(ARTIFACTS, `${name}-${viewport.name}.png`),
              fullPage: true,
            });
          }
        }

        // The page holds nothing of its own, and the browser reported nothing.
        const kept = await page.evaluate(`(async () => ({
          local: localStorage.length,
          session: sessionStorage.length,
          cookie: document.cookie,
          databases: (await indexedDB.databases()).length,
        }))()`);
        expect(kept).toEqual({ local: 0, session: 0, cookie: "", databases: 0 });
        expect(await context.cookies()).toEqual([]);
        expect(problems).toEqual([]);
        await page.close();
      });
    }
  });

  describe("axe-core", BESIDE, () => {
    for (const viewport of VIEWPORTS) {
      it.sequential(`on a ${viewport.name}: axe-core finds no serious or critical violation on any page`, async ({
        expect,
      }) => {
        const page = await axeContext.newPage();
        await page.setViewportSize(viewport);
        await page.goto(`${stack.origin.base}/admin/agents`);
        const serious = async (where: string): Promise<string[]> => {
          await page.addScriptTag({ content: AXE });
          const found =
            (await page.evaluate(`axe.run(document, { resultTypes: ["violations"] }).then((result) =>
            result.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
              .map((v) => v.id + ": " + v.nodes.map((n) => n.target.join(" ")).join(", ")))`)) as string[];
          return found.map((line) => `${where}: ${line}`);
        };
        const violations = await serious("sign-in");
        await signIn(page, `#/agents/${agent.agentId}`);
        await shown(page, "agent");
        await page.locator("#agent-identity").waitFor();
        violations.push(...(await serious("agent")));
        for (const name of PAGES) {
          await page.click(`#nav a[data-page="${name}"]`);
          await shown(page, name);
          await page.waitForLoadState("networkidle");
          violations.push(...(await serious(name)));
        }
        expect(violations).toEqual([]);
        await page.close();
      });
    }
  });
});
