import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser } from "../../testing/browser.ts";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { send } from "../../testing/http.ts";
import { type LoopbackServer, startLoopbackServer } from "../../testing/loopback-server.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { ADMIN_AUTH_FAILURES } from "./admin-auth.ts";

// A page of another origin, open in the operator's browser, makes that browser send requests to
// the console, in a real headless Chromium against the real origin. It can read no answer and send
// no token, but each request it makes comes from the operator's own address: were they counted as
// failed admin authentications, two dozen image tags would lock the operator out of the console
// (429 on everything) for as long as the page stayed open. The console refuses what the browser
// marks as sent from another origin (Sec-Fetch-Site, or where that is absent an Origin not its
// own), uncounted: 403 cross_site_refused.

const secrets = consoleSecrets();
/** More than the failed authentications a client may have in a window (ADMIN_AUTH_FAILURES). */
const REQUESTS = 25;

describe("the console's API requested by a page of another origin (real Chromium)", {
  timeout: 120_000,
}, () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let elsewhere: LoopbackServer;
  let browser: Browser;
  let context: BrowserContext;
  const logLines: string[] = [];

  beforeAll(async () => {
    testDb = await createTestDatabase();
    origin = await startTestOrigin({
      database: testDb.handle,
      // The console's name on the operator's network (lan.test below): plain http, not localhost.
      env: { ...secrets.env, CONSOLE_ALLOWED_HOSTS: "lan.test" },
      onLogLine: (line) => logLines.push(line),
    });
    const api = `${origin.base}/admin/agents`;
    // Another origin (another port): image tags for a console read, and sign-ins posted as text,
    // which a page may send anywhere without asking; the title says when all were answered.
    elsewhere = await startLoopbackServer(async (request, response) => {
      response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      // The same image tags, for a console the operator opens by a name of their network.
      const lanApi = `http://lan.test:${new URL(origin.url).port}${origin.deps.config.http.basePath}/admin/agents`;
      if (request.url === "/lan") {
        response.end(
          `<!doctype html><title>elsewhere</title>
           <script>
             Promise.all(Array.from({ length: ${REQUESTS} }, (_, i) => new Promise((done) => {
               const image = new Image();
               image.onload = image.onerror = done;
               image.src = ${JSON.stringify(`${lanApi}/operations`)} + "?n=" + i;
             }))).then(() => { document.title = "sent"; });
           </script>`,
        );
        return;
      }
      response.end(
        `<!doctype html><title>elsewhere</title>
         <script>
           const images = Array.from({ length: ${REQUESTS} }, (_, i) => new Promise((done) => {
             const image = new Image();
             image.onload = image.onerror = done;
             image.src = ${JSON.stringify(`${api}/operations`)} + "?n=" + i;
           }));
           const posts = Array.from({ length: ${REQUESTS} }, () =>
             fetch(${JSON.stringify(`${api}/session`)}, {
               method: "POST", mode: "no-cors", body: JSON.stringify({ response: { id: "x" } }),
             }).catch(() => undefined));
           Promise.all([...images, ...posts]).then(() => { document.title = "sent"; });
         </script>`,
      );
    });
    browser = await launchBrowser();
    // The packaged Chromium runs as a single process, which ends when a context closes.
    context = await browser.newContext();
    await context.newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await elsewhere?.close();
    await origin?.close();
    await testDb?.drop();
  });

  it("refuses a page of another origin's requests uncounted, 403 cross_site_refused: the operator, at the same address, is not locked out", async () => {
    const page = await context.newPage();
    try {
      await page.goto(elsewhere.url);
      await page.waitForFunction("document.title === 'sent'");
    } finally {
      await page.close();
    }
    // The operator, from the same address (the browser and this test are both 127.0.0.1).
    const read = await consoleCalls(origin.base, { admin: secrets.adminToken }).get("/operations");
    expect(read.status).toBe(200);
    // What the origin answered the page's requests, by its request log (the browser hides the
    // image answers from the page, and from the test's view of it).
    const answered = logLines
      .map((line) => JSON.parse(line) as { msg?: string; method?: string; status?: number })
      .filter((line) => line.msg === "request")
      .map((line) => `${line.method} ${line.status}`);
    expect(answered.filter((each) => each === "GET 403")).toHaveLength(REQUESTS);
    expect(answered.filter((each) => each === "POST 403")).toHaveLength(REQUESTS);
    expect(answered.filter((each) => each.endsWith(" 401") || each.endsWith(" 429"))).toEqual([]);
    // The page itself, holding no data, still opens from another site's link (what the browser
    // sends on such a navigation).
    const linked = await send(`${origin.base}/admin/agents`, {
      headers: { "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document" },
    });
    expect(linked.status).toBe(200);
  });

  it("refuses uncounted what a browser without Sec-Fetch-Site sends from another page's Origin, and answers the console's own origin and non-browser clients", async () => {
    // Older Safari sends no Sec-Fetch-Site, only the sending page's Origin (Chromium, used above,
    // always sends both, so these requests are written by hand as such a browser sends them).
    const calls = consoleCalls(origin.base, { admin: secrets.adminToken });
    for (let i = 0; i < REQUESTS; i++) {
      const posted = await send(`${origin.base}/admin/agents/session`, {
        method: "POST",
        headers: { origin: "http://elsewhere.example" },
        body: JSON.stringify({ response: { id: "x" } }),
      });
      expect(posted.status).toBe(403);
      expect((posted.body as { error: { code: string } }).error.code).toBe("cross_site_refused");
    }
    const sandboxed = await calls.get("/operations", { headers: { origin: "null" } });
    expect(sandboxed.status).toBe(403);
    // The operator, at the same address, is not locked out; the console's own page (its origin
    // as the browser addressed it, or as configured) and a client sending no Origin are answered.
    expect((await calls.get("/operations")).status).toBe(200);
    const addressed = new URL(origin.url).origin;
    expect((await calls.get("/operations", { headers: { origin: addressed } })).status).toBe(200);
    const configured = origin.deps.config.console.origin;
    expect(configured).not.toBe(addressed);
    expect((await calls.get("/operations", { headers: { origin: configured } })).status).toBe(200);
  });

  // DNS rebinding: a site's page, once open, has its name point at this node, so its requests
  // reach the console as the site's own origin: on plain http the browser sends no Sec-Fetch-Site,
  // a read no Origin, and the page may set a (wrong) token header. Chromium resolves the name to
  // loopback by a resolver rule and the page's first document is served by the test in the site's
  // place: the flip of the site's DNS, which cannot be made for real here, is what those two stand
  // for. Chromium's own defence (Private Network Access: a page of a public address may not ask a
  // loopback one) is turned off, as the browsers without it (Firefox, Safari) have none.
  it("refuses uncounted requests addressed to a name that is not the console's (DNS rebinding): the operator is not locked out", async () => {
    const port = new URL(origin.url).port;
    const site = `http://rebind.test:${port}`;
    const api = `${site}${origin.deps.config.http.basePath}/admin/agents`;
    const rebound = await launchBrowser({
      extraArgs: [
        "--host-resolver-rules=MAP rebind.test 127.0.0.1",
        "--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults,LocalNetworkAccessChecks",
      ],
    });
    const before = logLines.length;
    try {
      const page = await (await rebound.newContext()).newPage();
      await page.route(`${site}/start`, (route) =>
        route.fulfill({
          contentType: "text/html; charset=utf-8",
          body: `<!doctype html><title>rebind</title>
           <script>
             const reads = Array.from({ length: ${REQUESTS} }, (_, i) =>
               fetch(${JSON.stringify(`${api}/operations`)} + "?n=" + i, {
                 headers: { "x-admin-api-token": "guess-" + i },
               }).then((r) => r.status, () => 0));
             const posts = Array.from({ length: ${REQUESTS} }, () =>
               fetch(${JSON.stringify(`${api}/session`)}, {
                 method: "POST", body: JSON.stringify({ response: { id: "x" } }),
               }).then((r) => r.status, () => 0));
             Promise.all([...reads, ...posts]).then((statuses) => { window.statuses = statuses; document.title = "sent"; });
           </script>`,
        }),
      );
      await page.goto(`${site}/start`);
      await page.waitForFunction("document.title === 'sent'");
      // The page reads its answers (to the browser it is the same origin): each refused.
      const statuses = (await page.evaluate("window.statuses")) as number[];
      expect(statuses).toEqual(Array.from({ length: 2 * REQUESTS }, () => 403));
    } finally {
      await rebound.close();
    }
    const answered = logLines
      .slice(before)
      .map((line) => JSON.parse(line) as { msg?: string; status?: number })
      .filter((line) => line.msg === "request")
      .map((line) => line.status);
    expect(answered.filter((status) => status === 401 || status === 429)).toEqual([]);
    // The operator, from the same address, by the console's own names and a tool's.
    const calls = consoleCalls(origin.base, { admin: secrets.adminToken });
    expect((await calls.get("/operations")).status).toBe(200);
    expect((await calls.get("/operations", { headers: { "sec-fetch-site": "same-origin" } })).status).toBe(
      200,
    );
    const local = consoleCalls(`http://localhost:${port}${origin.deps.config.http.basePath}`, {
      admin: secrets.adminToken,
    });
    expect((await local.get("/operations", { headers: { "sec-fetch-site": "same-origin" } })).status).toBe(
      200,
    );
    // A tool by another name is refused too (a page's read cannot be told from it), saying what to do.
    const named = await calls.get("/operations", { headers: { host: `rebind.test:${port}` } });
    expect(named.status).toBe(403);
    expect((named.body as { error: { message: string } }).error.message).toContain("CONSOLE_ALLOWED_HOSTS");
    const metrics = await send(`${origin.base}/metrics`, { headers: { host: `rebind.test:${port}` } });
    expect(metrics.status).toBe(403);
  });

  // A console reached over plain http by a name that is not localhost (a name of the operator's
  // network, CONSOLE_ALLOWED_HOSTS; Chromium resolves it to loopback by a resolver rule, standing
  // for the network's DNS) is no trustworthy origin: a browser sends it no Sec-Fetch-Site, and an
  // image tag sends no Origin either, so another site's image tags look like a tool that sent no
  // token. A request that presents no credential guesses none: it is 401, counted as no failure.
  it("counts no failure for a request that presents no credential (a page's image tags to a console on plain http by a LAN name): the operator is not locked out", async () => {
    const lan = await launchBrowser({ extraArgs: ["--host-resolver-rules=MAP lan.test 127.0.0.1"] });
    const before = logLines.length;
    try {
      const page = await (await lan.newContext()).newPage();
      await page.goto(`${elsewhere.url}/lan`);
      await page.waitForFunction("document.title === 'sent'");
    } finally {
      await lan.close();
    }
    const answered = logLines
      .slice(before)
      .map((line) => JSON.parse(line) as { msg?: string; status?: number })
      .filter((line) => line.msg === "request")
      .map((line) => line.status);
    // Nothing told them from a tool's request: each the 401 of a missing token, none a 429.
    expect(answered).toEqual(Array.from({ length: REQUESTS }, () => 401));
    // The operator, from the same address, by the same name.
    const port = new URL(origin.url).port;
    const operator = consoleCalls(origin.base, { admin: secrets.adminToken });
    expect((await operator.get("/operations", { headers: { host: `lan.test:${port}` } })).status).toBe(200);
    // A wrong token is still a counted guess: past the limit, the address is 429.
    const guesser = consoleCalls(origin.base, { admin: "0".repeat(64) });
    for (let i = 0; i < ADMIN_AUTH_FAILURES.limit; i++)
      expect((await guesser.get("/operations")).status).toBe(401);
    expect((await guesser.get("/operations")).status).toBe(429);
  });
});
