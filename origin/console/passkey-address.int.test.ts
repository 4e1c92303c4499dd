import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addPlatformAuthenticator,
  consoleAtLocalhost,
  recordPageProblems,
  signInToConsole,
  useBrowserContext,
} from "../../testing/console-browser.ts";
import { consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { freePort } from "../../testing/free-port.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { startTcpProxy, type TcpProxy } from "../../testing/tcp-proxy.ts";
import { queryRows } from "../db/client.ts";
import { markEnrolled } from "../passkeys/store.ts";

// A passkey is bound to the console's origin (CONSOLE_ORIGIN, http://localhost:<port> by default),
// but the page opens at other addresses too: at 127.0.0.1, where the browser makes no passkey at
// all (an IP address is no relying party), and through a tunnel at another port of localhost,
// where the browser signs but the origin refuses the assertion's origin as a failed sign-in of the
// operator's address. In a real Chromium against the real origin (real
// Postgres), with a WebAuthn virtual authenticator: the page must say where passkeys work, and
// send nothing a passkey made there.

const secrets = consoleSecrets();
const OPERATOR = "Ines Duarte";

describe("the console opened at another address than CONSOLE_ORIGIN (real Chromium)", {
  timeout: 120_000,
}, () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let tunnel: TcpProxy;
  let port: number;
  const chromium = useBrowserContext();
  const logLines: string[] = [];
  const basePath = () => new URL(origin.base).pathname;
  /** The console at its own address, where its passkeys work. */
  const ownAddress = () => `http://localhost:${port}${basePath()}/admin/agents`;
  const signInsRefused = () =>
    logLines.filter((line) => line.includes('"sign_in_refused"') || line.includes("admin auth failed"));

  beforeAll(async () => {
    port = await freePort();
    testDb = await createTestDatabase();
    origin = await startTestOrigin({
      database: testDb.handle,
      port,
      env: { ...secrets.env, ...consoleAtLocalhost(port) },
      onLogLine: (line) => logLines.push(line),
    });
    tunnel = await startTcpProxy(`http://127.0.0.1:${port}`);
  }, 60_000);
  afterAll(async () => {
    await tunnel?.close();
    await origin?.close();
    await testDb?.drop();
  });

  it("at 127.0.0.1, an IP address, registering and signing in with a passkey say where passkeys work, and register nothing", async () => {
    const page = await chromium.context.newPage();
    const problems = recordPageProblems(page);
    const { cdp, authenticatorId } = await addPlatformAuthenticator(chromium.context, page);
    const atIp = `http://127.0.0.1:${port}${basePath()}/admin/agents`;
    await signInToConsole(page, `${atIp}#/passkeys`, {
      admin: secrets.adminToken,
      change: secrets.changeToken,
    });
    await page.locator('main section[data-page="passkeys"]').waitFor();
    await page.fill("#passkey-operator", OPERATOR);
    await page.click("#passkey-register");
    await expect.poll(() => page.textContent("#passkey-message")).toContain(`${ownAddress()}#/passkeys`);
    expect(await page.textContent("#passkey-message")).toContain(`opened at http://127.0.0.1:${port}`);
    const [registered] = await queryRows<{ n: number }>(
      testDb.handle.db,
      sql`select count(*)::int as n from operator_passkeys`,
    );
    expect(registered!.n).toBe(0);

    await page.click("#forget");
    await page.locator("#login").waitFor({ state: "visible" });
    await page.click("#sign-in-passkey");
    await expect.poll(() => page.textContent("#message")).toContain(ownAddress());
    expect(problems).toEqual([]);
    await cdp.send("WebAuthn.removeVirtualAuthenticator", { authenticatorId });
    await cdp.detach();
    await page.close();
  });

  it("through a tunnel at another port of localhost, an enrolled passkey's sign-in says where passkeys work and sends nothing: no failed authentication is counted", async () => {
    const page = await chromium.context.newPage();
    const problems = recordPageProblems(page);
    const { cdp, authenticatorId } = await addPlatformAuthenticator(chromium.context, page);
    // Registered and enrolled at the console's own address, as the operator did once.
    await signInToConsole(page, `${ownAddress()}#/passkeys`, {
      admin: secrets.adminToken,
      change: secrets.changeToken,
    });
    await page.locator('main section[data-page="passkeys"]').waitFor();
    await page.fill("#passkey-operator", OPERATOR);
    await page.click("#passkey-register");
    await expect.poll(() => page.textContent("#passkey-message")).toContain("pending");
    const [row] = await queryRows<{ credential_id: string }>(
      testDb.handle.db,
      sql`select credential_id from operator_passkeys where operator = ${OPERATOR}`,
    );
    await markEnrolled(testDb.handle.db, row!.credential_id);

    // The same console through a tunnel (ssh -L, say) at another port of localhost.
    const tunnelPort = new URL(tunnel.url).port;
    await page.goto(`http://localhost:${tunnelPort}${basePath()}/admin/agents`);
    await page.locator("#sign-in-passkey").waitFor();
    const refusedBefore = signInsRefused().length;
    await page.click("#sign-in-passkey");
    await expect.poll(() => page.textContent("#message")).toContain(ownAddress());
    expect(await page.textContent("#message")).toContain(`opened at http://localhost:${tunnelPort}`);
    expect(signInsRefused().slice(refusedBefore)).toEqual([]);
    const [sessions] = await queryRows<{ n: number }>(
      testDb.handle.db,
      sql`select count(*)::int as n from operator_sessions`,
    );
    expect(sessions!.n).toBe(0);

    // At its own address, the same passkey signs in.
    await page.goto(ownAddress());
    await page.click("#sign-in-passkey");
    await expect.poll(() => page.textContent("#signed-in-as")).toBe(`Signed in as ${OPERATOR}.`);
    expect(problems).toEqual([]);
    await cdp.send("WebAuthn.removeVirtualAuthenticator", { authenticatorId });
    await cdp.detach();
    await page.close();
  });
});

describe("the console of an origin whose derived CONSOLE_ORIGIN names no address (real Chromium)", {
  timeout: 120_000,
}, () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  const chromium = useBrowserContext();

  beforeAll(async () => {
    testDb = await createTestDatabase();
    // Listening on every IPv6 address without CONSOLE_RP_ID: the console's derived origin,
    // http://:::<port>, does not parse. The tokens still open the console.
    origin = await startTestOrigin({
      database: testDb.handle,
      env: { ...secrets.env, ORIGIN_HOST: "::", AGENT_ALLOW_PUBLIC_BIND: "1" },
    });
  }, 60_000);
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });

  it("serves the page, and a passkey sign-in says passkeys work at no address and sends nothing", async () => {
    expect(origin.deps.config.console.origin).toMatch(/^http:\/\/:::\d+$/);
    const page = await chromium.context.newPage();
    const problems = recordPageProblems(page);
    await page.goto(`${origin.base}/admin/agents`);
    await page.click("#sign-in-passkey");
    await expect.poll(() => page.textContent("#message")).toContain("Passkeys work at no address");
    expect(problems).toEqual([]);
    await page.close();
  });
});
