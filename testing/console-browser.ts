/**
 * The console in a real browser (browser.ts), as an operator uses it: the page opened and the
 * tokens typed into its sign-in form, which the page keeps in its script's memory only.
 */
import type { BrowserContext, CDPSession, Page } from "playwright-core";

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
