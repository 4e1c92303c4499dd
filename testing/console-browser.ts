/**
 * The console in a real browser (browser.ts), as an operator uses it: the page opened and the
 * tokens typed into its sign-in form, which the page keeps in its script's memory only.
 */
import type { Browser, BrowserContext, CDPSession, Page } from "playwright-core";
import { afterAll, beforeAll } from "vitest";
import { launchBrowser } from "./browser.ts";

/**
 * What an origin needs for its console's passkeys to work in the browser at `port` of localhost (a
 * browser takes no IP address as a relying party): the port chosen before the origin starts.
 */
export function consoleAtLocalhost(port: number): { CONSOLE_RP_ID: string; CONSOLE_ORIGIN: string } {
  return { CONSOLE_RP_ID: "localhost", CONSOLE_ORIGIN: `http://localhost:${port}` };
}

/**
 * The packaged Chromium with one context, open for the describe block it is called in (vitest
 * hooks). Chromium is one process, which ends when a context closes: the context keeps a page open.
 */
export function useBrowserContext(): { readonly browser: Browser; readonly context: BrowserContext } {
  let browser: Browser | undefined;
  let context: BrowserContext | undefined;
  beforeAll(async () => {
    browser = await launchBrowser();
    context = await browser.newContext();
    await context.newPage();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });
  return {
    get browser() {
      if (!browser) throw new Error("the browser starts in beforeAll");
      return browser;
    },
    get context() {
      if (!context) throw new Error("the browser starts in beforeAll");
      return context;
    },
  };
}

/**
 * Opens the console at `url` (its address, with a page's hash if any) and signs in with the read
 * token and, when given, the change token; resolves once the console shows.
 */
export async function signInToConsole(
  page: Page,
  url: string,
  tokens: { admin: string; change?: string },
): Promise<void> {
  await page.goto(url);
  await page.fill("#admin-token", tokens.admin);
  if (tokens.change !== undefined) await page.fill("#change-token", tokens.change);
  await page.click("#token-form button[type=submit]");
  await page.locator("#console").waitFor({ state: "visible" });
}

/**
 * What the page reports going wrong, as it happens: uncaught errors and every error it logs (a
 * script or style the CSP refused is logged as one). A walk ends by expecting the list empty.
 */
export function recordPageProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console: ${message.text()}`);
  });
  return problems;
}

/**
 * The device's own authenticator, with user verification (a fingerprint, a PIN), as the DevTools
 * protocol emulates one for `page`.
 */
export async function addPlatformAuthenticator(
  context: BrowserContext,
  page: Page,
): Promise<{ cdp: CDPSession; authenticatorId: string }> {
  const cdp = await context.newCDPSession(page);
  await cdp.send("WebAuthn.enable", { enableUI: false });
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
    },
  });
  return { cdp, authenticatorId };
}
