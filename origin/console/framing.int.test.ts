import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser } from "../../testing/browser.ts";
import { consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { type LoopbackServer, startLoopbackServer } from "../../testing/loopback-server.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";

// A page of another origin frames the console, in a real headless Chromium against the real origin:
// framed, the console would take the operator's tokens and their passkey's signatures on a page
// whose surroundings (what is said beside it, what lies over it) the framing page chooses. The
// console's answer forbids it twice (CSP frame-ancestors 'none', X-Frame-Options DENY): the frame
// stays Chromium's error page, with no console and no sign-in form in it.

const secrets = consoleSecrets();

describe("the console in another origin's frame (real Chromium)", { timeout: 120_000 }, () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let framing: LoopbackServer;
  let browser: Browser;
  let context: BrowserContext;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    origin = await startTestOrigin({ database: testDb.handle, env: { ...secrets.env } });
    const consoleUrl = `${origin.base}/admin/agents`;
    // Another origin (another port): its page frames the console and says when the frame loaded.
    framing = await startLoopbackServer(async (_request, response) => {
      response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      response.end(
        `<!doctype html><title>elsewhere</title>
         <iframe id="console" src="${consoleUrl}" onload="document.title = 'framed'"></iframe>`,
      );
    });
    browser = await launchBrowser();
    // The packaged Chromium runs as a single process, which ends when a context closes.
    context = await browser.newContext();
    await context.newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await framing?.close();
    await origin?.close();
    await testDb?.drop();
  });

  it("refuses to be framed by a page of another origin: no console and no sign-in form inside the frame", async () => {
    const page = await context.newPage();
    try {
      const consoleAnswer = page.waitForResponse((response) => response.url().endsWith("/admin/agents"));
      await page.goto(framing.url);
      // The console's own answer arrived, and the frame finished loading whatever it was let show.
      expect((await consoleAnswer).status()).toBe(200);
      await page.waitForFunction("document.title === 'framed'");
      const frame = page.frames().find((each) => each !== page.mainFrame());
      expect(frame, "the framing page has its frame").toBeDefined();
      expect({
        url: frame!.url(),
        signInForms: await frame!.locator("#token-form").count(),
        passkeyButtons: await frame!.locator("#sign-in-passkey").count(),
      }).toEqual({ url: "chrome-error://chromewebdata/", signInForms: 0, passkeyButtons: 0 });
    } finally {
      await page.close();
    }
  });
});
