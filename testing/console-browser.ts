/**
 * The console in a real browser (browser.ts), as an operator uses it: the page opened and the
 * tokens typed into its sign-in form, which the page keeps in its script's memory only.
 */
import type { Page } from "playwright-core";

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
