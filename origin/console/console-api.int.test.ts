import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  auditSchema,
  identityChangeResponseSchema,
  operationsOverviewSchema,
  registrationOverviewSchema,
  settingsChangeResponseSchema,
  webhookAddResponseSchema,
  webhookReplayResponseSchema,
  webhookRotateSecretResponseSchema,
  webhooksOverviewSchema,
} from "../../shared/console-schemas.ts";
import { consoleCalls, consoleSecrets, withoutRequestId } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { send, type TestResponse } from "../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { registerAsEdge } from "../../testing/register-as-edge.ts";
import { recordSecret } from "../../testing/secret-sink.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { queryRows } from "../db/client.ts";
import { grantException } from "../funding/exceptions.ts";
import { hashIpGroup } from "../registration/ip-classification.ts";
import { ADMIN_AUTH_FAILURES } from "./admin-auth.ts";
import { CONSOLE_CSP } from "./page.ts";

// The console API at the real origin over HTTP, on a real Postgres: what an operator sees and
// what the database keeps. Registrations come in as the edge sends them (the test plays the edge).

const EDGE_SECRET = randomBytes(32).toString("hex");
const IP_SECRET = randomBytes(32).toString("hex");
const secrets = consoleSecrets();

type Created = { token: string; agent_id: string; assigned_wallet: string };

describe("operator console API", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  const logLines: string[] = [];
  const db = () => testDb.handle.db;
  const operator = () =>
    consoleCalls(origin.base, { admin: secrets.adminToken, change: secrets.changeToken });
  const reader = () => consoleCalls(origin.base, { admin: secrets.adminToken });

  const register = async (ip: string): Promise<Created> => {
    const response = await registerAsEdge(origin.base, EDGE_SECRET, ip);
    expect(response.status).toBe(201);
    return response.body as Created;
  };
  const network = (token: string, localAddress?: string): Promise<TestResponse> =>
    send(`${origin.base}/agent/v1/network`, { headers: { authorization: `Bearer ${token}` }, localAddress });

  /** The policy row and the number of recorded changes: what a refused change must leave alone. */
  const policyState = async () => ({
    policy: (await queryRows(db(), sql`select * from registration_policy`))[0],
    changes: (
      await queryRows<{ n: number }>(db(), sql`select count(*)::int as n from registration_policy_changes`)
    )[0]!.n,
  });

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 30);
    origin = await startTestOrigin({
      database: testDb.handle,
      env: {
        ...secrets.env,
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
        AGENT_REGISTRATION_IP_SECRET: IP_SECRET,
      },
      onLogLine: (line) => logLines.push(line),
    });
  });
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });

  it("refuses unknown settings, bad values and empty reasons with 400, changing nothing", async () => {
    const before = await policyState();
    const cases: [unknown, string][] = [
      [{ changes: { per_ip_daly: 5 }, reason: "typo" }, "unknown setting: per_ip_daly"],
      [{ changes: { per_ip_daily: -1 }, reason: "negative" }, "per_ip_daily must be a whole number"],
      [{ changes: { per_ip_daily: 2.5 }, reason: "fraction" }, "per_ip_daily must be a whole number"],
      [{ changes: { per_ip_daily: 100_001 }, reason: "too big" }, "from 0 to 100000"],
      // Mutation: without json-body.ts describeUnion these are "changes.paused: Invalid input".
      [
        { changes: { paused: "maybe" }, reason: "not a boolean" },
        "changes.paused must be a boolean or a number",
      ],
      [
        { changes: { per_ip_daily: "5" }, reason: "digits" },
        "changes.per_ip_daily must be a boolean or a number",
      ],
      [{ changes: { paused: 1 }, reason: "number for a boolean" }, "paused must be true or false"],
      [{ changes: { per_ip_daily: 5 }, reason: "" }, "reason must not be empty"],
      [{ changes: { per_ip_daily: 5 }, reason: "   " }, "reason must not be empty"],
      [{ changes: { per_ip_daily: 5 } }, "reason is required"],
      [{ changes: {}, reason: "nothing" }, "at least one setting"],
      // All or nothing: a valid change beside an invalid one is not applied either.
      [{ changes: { per_ip_daily: 5, key_reserve: -3 }, reason: "mixed" }, "key_reserve must be"],
      [{ changes: { per_ip_daily: 5 }, reason: "x", extra: true }, "unknown field: extra"],
    ];
    for (const [body, message] of cases) {
      const response = await operator().post("/registration/settings", body);
      expect({ body, status: response.status }).toEqual({ body, status: 400 });
      expect(response.body).toMatchObject({
        error: { code: "validation_failed", message: expect.stringContaining(message) },
      });
    }
    expect(await policyState()).toEqual(before);
  });

  it("needs both tokens for changes; every wrong token is the same 401", async () => {
    const before = await policyState();
    const identity = await provisionedIdentity(db(), { capabilities: ["read"], origin: "operator" });
    const settingsBody = { changes: { per_ip_daily: 7 }, reason: "read token only" };
    const identityBody = { agent_id: identity.agentId, action: "disable", reason: "read token only" };
    const wrong = randomBytes(32).toString("hex");
    const bodies: unknown[] = [];
    const expect401 = async (response: Promise<TestResponse>): Promise<void> => {
      const answered = await response;
      expect(answered.status).toBe(401);
      bodies.push(withoutRequestId(answered.body));
    };
    // The read token without the registration admin token: reads work, changes do not.
    expect((await reader().get("/registration")).status).toBe(200);
    await expect401(reader().post("/registration/settings", settingsBody));
    await expect401(reader().post("/registration/identity", identityBody));
    // Wrong, missing, swapped or truncated tokens, on reads and changes alike.
    await expect401(consoleCalls(origin.base, {}).get("/registration"));
    await expect401(consoleCalls(origin.base, { admin: wrong }).get("/registration"));
    await expect401(consoleCalls(origin.base, { admin: secrets.adminToken.slice(0, 63) }).get("/audit"));
    await expect401(consoleCalls(origin.base, { admin: secrets.changeToken }).get("/operations"));
    await expect401(
      consoleCalls(origin.base, { admin: secrets.adminToken, change: wrong }).post(
        "/registration/settings",
        settingsBody,
      ),
    );
    await expect401(
      consoleCalls(origin.base, { admin: wrong, change: secrets.changeToken }).post(
        "/registration/identity",
        identityBody,
      ),
    );
    await expect401(
      consoleCalls(origin.base, { admin: secrets.changeToken, change: secrets.adminToken }).post(
        "/registration/settings",
        settingsBody,
      ),
    );
    expect(new Set(bodies.map((body) => JSON.stringify(body)))).toEqual(
      new Set([
        JSON.stringify({ error: { code: "admin_auth_failed", message: "admin authentication failed" } }),
      ]),
    );
    expect(await policyState()).toEqual(before);
    const [row] = await queryRows<{ enabled: boolean }>(
      db(),
      sql`select enabled from agent_identities where agent_id = ${identity.agentId}`,
    );
    expect(row!.enabled).toBe(true);
  });

  it("limits failed authentications per client: 429 past the limit, even with the right token", async () => {
    const attacker = "127.0.0.77";
    const bystander = "127.0.0.78";
    const wrong = consoleCalls(origin.base, { admin: randomBytes(32).toString("hex") });
    for (let i = 0; i < ADMIN_AUTH_FAILURES.limit; i++) {
      expect((await wrong.get("/registration", { localAddress: attacker })).status).toBe(401);
    }
    const blocked = await reader().get("/registration", { localAddress: attacker });
    expect(blocked.status).toBe(429);
    expect(blocked.headers["retry-after"]).toMatch(/^\d+$/);
    expect(blocked.body).toMatchObject({ error: { code: "rate_limited" } });
    // Another client is not held back by the first one's failures.
    expect((await reader().get("/registration", { localAddress: bystander })).status).toBe(200);
  });

  it("serializes concurrent changes of one setting: every before is the previous after", async () => {
    const values = Array.from({ length: 20 }, (_, i) => 200 + i);
    const answers = await Promise.all(
      values.map((value) =>
        operator().post("/registration/settings", {
          changes: { network_daily: value },
          reason: `race ${value}`,
        }),
      ),
    );
    expect(answers.map((answer) => answer.status)).toEqual(values.map(() => 200));
    for (const answer of answers) settingsChangeResponseSchema.parse(answer.body);

    const audit = auditSchema.parse((await reader().get("/audit")).body);
    const chain = audit.changes
      .filter((change) => change.kind === "registration_setting" && change.subject === "network_daily")
      .reverse(); // oldest first
    expect(chain).toHaveLength(20);
    expect(chain[0]!.before).toBe("100"); // the spec's initial value
    for (let i = 1; i < chain.length; i++) expect(chain[i]!.before).toBe(chain[i - 1]!.after);
    expect(chain.map((change) => Number(change.after)).sort()).toEqual(values);
    for (const change of chain) expect(change.reason).toBe(`race ${change.after}`);
    // Each change keeps the channel it came through; made with the shared tokens, it names no one.
    for (const change of chain)
      expect(change).toMatchObject({ source: "console", operator: null, passkey_key_id: null });
    // What each request was told is what the audit kept, and the last after is the setting now.
    const told = answers.map((answer) => settingsChangeResponseSchema.parse(answer.body).changed[0]);
    expect(told.map((change) => `${change!.before}->${change!.after}`).sort()).toEqual(
      chain.map((change) => `${change.before}->${change.after}`).sort(),
    );
    const overview = registrationOverviewSchema.parse((await reader().get("/registration")).body);
    expect(String(overview.settings.network_daily)).toBe(chain.at(-1)!.after);
  });

  it("shows counters, key stock, identities, hashed IP groups and this node's buckets; reading moves no counter", async () => {
    const opened = await operator().post("/registration/settings", {
      changes: { paused: false },
      reason: "open for the console test",
    });
    expect(opened.status).toBe(200);
    const [first, second] = [await register("81.3.0.1"), await register("81.3.0.2")];
    expect((await network(first.token)).status).toBe(200);
    expect((await network("agt_nope", "127.0.0.90")).status).toBe(401);

    const read = async () => registrationOverviewSchema.parse((await reader().get("/registration")).body);
    const overview = await read();
    expect(overview.counters).toMatchObject({ issued_total: 2, issued_today: 2, attempts_this_minute: 2 });
    // 30 seeded, one provisioned by the operator, two registered.
    expect(overview.key_stock).toMatchObject({ free: 27, in_flight_batches: 0, reserve: 10 });
    expect(overview.key_stock.issuable_before_reserve).toBe(17);
    expect(overview.settings.paused).toBe(false);
    expect(overview.identities.slice(0, 2)).toEqual([
      expect.objectContaining({
        agent_id: second.agent_id,
        assigned_wallet: second.assigned_wallet,
        enabled: true,
        ip_group: hashIpGroup(IP_SECRET, "81.3.0.2"),
      }),
      expect.objectContaining({ agent_id: first.agent_id, ip_group: hashIpGroup(IP_SECRET, "81.3.0.1") }),
    ]);
    expect(overview.ip_groups).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          ip_group: hashIpGroup(IP_SECRET, "81.3.0.1"),
          issued_total: 1,
          issued_today: 1,
        }),
        expect.objectContaining({ ip_group: hashIpGroup(IP_SECRET, "81.3.0.2"), issued_total: 1 }),
      ]),
    );
    expect(overview.local_buckets).toMatchObject({
      scope: "node",
      reset_on_restart: true,
      window_seconds: 60,
    });
    expect(overview.local_buckets.buckets).toEqual(
      expect.arrayContaining([
        { tier: "per_agent", key: first.agent_id, count: 1 },
        { tier: "pre_auth_ip", key: hashIpGroup(IP_SECRET, "127.0.0.90"), count: 1 },
        { tier: "registration_early", key: hashIpGroup(IP_SECRET, "81.3.0.1"), count: 1 },
        { tier: "registration_early", key: "*", count: 2 },
      ]),
    );
    // No client address anywhere in what the console shows.
    const text = JSON.stringify(overview);
    for (const ip of ["81.3.0.1", "81.3.0.2", "127.0.0.90"]) expect(text).not.toContain(ip);
    // Reading changes no admission counter (docs/api.md#registration-quotas-and-counters).
    const again = await read();
    expect(again.counters).toEqual(overview.counters);
  });

  it("disables and enables an identity with a reason: 401 at its next request, 200 again, both audited", async () => {
    const agent = await register("81.3.0.9");
    expect((await network(agent.token)).status).toBe(200);
    const change = (action: string, reason: string) =>
      operator().post("/registration/identity", { agent_id: agent.agent_id, action, reason });

    const disabled = await change("disable", "suspicious traffic");
    expect(disabled.status).toBe(200);
    expect(identityChangeResponseSchema.parse(disabled.body)).toEqual({
      agent_id: agent.agent_id,
      changed: true,
      before: { enabled: true },
      after: { enabled: false },
      revoked: false,
    });
    expect((await network(agent.token)).status).toBe(401);
    // Again: nothing changes and nothing more is recorded.
    expect((await change("disable", "twice")).body).toMatchObject({ changed: false });
    expect((await change("enable", "")).status).toBe(400);
    expect((await network(agent.token)).status).toBe(401);

    expect((await change("enable", "false alarm")).body).toMatchObject({
      changed: true,
      after: { enabled: true },
    });
    expect((await network(agent.token)).status).toBe(200);

    const audit = auditSchema.parse((await reader().get("/audit")).body);
    expect(audit.note).toMatch(/shared admin tokens or the operator tools names no one/);
    expect(audit.changes.filter((row) => row.subject === agent.agent_id)).toEqual([
      expect.objectContaining({
        kind: "identity",
        change: "enable",
        before: "disabled",
        after: "enabled",
        reason: "false alarm",
        source: "console",
        operator: null,
        passkey_key_id: null,
      }),
      expect.objectContaining({
        kind: "identity",
        change: "disable",
        before: "enabled",
        after: "disabled",
        reason: "suspicious traffic",
        source: "console",
        operator: null,
        passkey_key_id: null,
      }),
    ]);
    const unknown = await operator().post("/registration/identity", {
      agent_id: "00000000-0000-4000-8000-000000000000",
      action: "disable",
      reason: "x",
    });
    expect(unknown.status).toBe(404);
    const badAction = await operator().post("/registration/identity", {
      agent_id: agent.agent_id,
      action: "destroy",
      reason: "x",
    });
    expect(badAction.status).toBe(400);
    // Postgres text cannot hold NUL: a reason with a control character is the agent's 400, not a 500.
    for (const reason of ["\u0000", "a\u0007b"]) {
      const control = await operator().post("/registration/identity", {
        agent_id: agent.agent_id,
        action: "enable",
        reason,
      });
      expect(control.status).toBe(400);
      expect(control.body).toMatchObject({
        error: { code: "validation_failed", message: expect.stringContaining("control characters") },
      });
    }
  });

  it("revokes an identity with a reason: 401 at its next request, audited once, and no enable brings it back", async () => {
    const agent = await register("81.3.0.10");
    expect((await network(agent.token)).status).toBe(200);
    const change = (action: string, reason: string) =>
      operator().post("/registration/identity", { agent_id: agent.agent_id, action, reason });
    const recorded = async () =>
      (
        await queryRows<{ n: number }>(
          db(),
          sql`select count(*)::int as n from identity_changes where agent_id = ${agent.agent_id}`,
        )
      )[0]!.n;

    expect((await change("revoke", " ")).status).toBe(400);
    expect(await recorded()).toBe(0);

    const revoked = await change("revoke", "token leaked");
    expect(revoked.status).toBe(200);
    // A revocation leaves the enabled flag as it found it: it is final whatever the flag says.
    expect(identityChangeResponseSchema.parse(revoked.body)).toEqual({
      agent_id: agent.agent_id,
      changed: true,
      before: { enabled: true },
      after: { enabled: true },
      revoked: true,
    });
    const refused = await network(agent.token);
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ error: { code: "agent_auth_failed" } });
    expect(await recorded()).toBe(1);

    // Again: nothing changes and nothing more is recorded.
    expect((await change("revoke", "twice")).body).toMatchObject({ changed: false, revoked: true });
    expect(await recorded()).toBe(1);

    // Disable and enable still move the flag, as they always did, and answer that the identity is
    // revoked: the token stays refused.
    expect((await change("disable", "paused")).status).toBe(200);
    const enabled = await change("enable", "try to bring it back");
    expect(enabled.status).toBe(200);
    expect(enabled.body).toMatchObject({ changed: true, after: { enabled: true }, revoked: true });
    const still = await network(agent.token);
    expect(still.status).toBe(401);
    expect(still.body).toMatchObject({ error: { code: "agent_auth_failed" } });

    const audit = auditSchema.parse((await reader().get("/audit")).body);
    expect(audit.changes.filter((row) => row.subject === agent.agent_id)).toEqual([
      expect.objectContaining({ change: "enable", before: "disabled", after: "enabled" }),
      expect.objectContaining({ change: "disable", before: "enabled", after: "disabled" }),
      expect.objectContaining({
        kind: "identity",
        change: "revoke",
        before: "enabled",
        after: "revoked",
        reason: "token leaked",
        source: "console",
      }),
    ]);
  });

  it("shows findings, batches, actions, settlements and exceptions, and merges every change into the audit", async () => {
    const granted = await grantException(db(), {
      wallet: `0x${"ab".repeat(20)}`,
      ceilingUnits: 5_000_000n,
      expiresAt: new Date(Date.now() + 3_600_000),
      reason: "pre-restore test",
    });
    if (!granted.ok) throw new Error(granted.error.message);
    const operations = operationsOverviewSchema.parse((await reader().get("/operations")).body);
    expect(operations.key_batches.by_state).toEqual([{ state: "available", count: 1, keys: 30 }]);
    // The seeded batch has no restore evidence: listed as not drilled, then drilled once it has.
    const [batch] = await queryRows<{ batch_id: string }>(db(), sql`select batch_id from key_batches`);
    expect(operations.key_batches.drills).toEqual({
      drilled: 0,
      undrilled_count: 1,
      undrilled: [{ batch_id: batch!.batch_id, keys: 30, created_at: expect.any(String) }],
    });
    await db().execute(
      sql`insert into restore_evidence (batch_id, method, key_count, public_keys_sha256)
          values (${batch!.batch_id}, 'recovery_key_new_enclave', 30, ${"ab".repeat(32)})`,
    );
    const drilled = operationsOverviewSchema.parse((await reader().get("/operations")).body);
    expect(drilled.key_batches.drills).toEqual({ drilled: 1, undrilled_count: 0, undrilled: [] });
    await db().execute(sql`delete from restore_evidence where batch_id = ${batch!.batch_id}`);
    expect(operations.funding_exceptions.active).toEqual([
      expect.objectContaining({
        id: granted.value.id,
        ceiling_units: "5000000",
        reason: "pre-restore test",
      }),
    ]);
    const audit = auditSchema.parse((await reader().get("/audit")).body);
    expect(audit.changes[0]).toMatchObject({
      kind: "funding_exception",
      subject: granted.value.id,
      change: "grant",
      before: null,
      reason: "pre-restore test",
      source: "cli",
    });
    expect(new Set(audit.changes.map((row) => row.kind))).toEqual(
      new Set(["funding_exception", "identity", "registration_setting"]),
    );
    const times = audit.changes.map((row) => Date.parse(row.at));
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it("counts x402 settlements in every state (claimed, submitted, settled, failed, reverted)", async () => {
    const states = ["claimed", "submitted", "settled", "failed", "reverted"];
    for (const [i, state] of states.entries()) {
      // A settlement row as the settler leaves it in each state (seeded: no chain is needed to count them).
      await db().execute(sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash,
          payload_hash, valid_after, valid_before, signature, status)
        values (${`0x${String(i).repeat(40)}`}, ${`0x${"0".repeat(63)}${i}`}, ${`0x${"42".repeat(20)}`}, 10000,
          'r', 'p', 0, 1, '0x', ${state})`);
    }
    const operations = operationsOverviewSchema.parse((await reader().get("/operations")).body);
    expect([...operations.x402_settlements.by_state].sort((a, b) => (a.state < b.state ? -1 : 1))).toEqual(
      [...states].sort().map((state) => ({ state, count: 1 })),
    );
    await db().execute(sql`delete from x402_settlements`);
  });

  it("serves the page as a shell: no data, a strict CSP, its script and style from its own routes", async () => {
    const page = await send(`${origin.base}/admin/agents`);
    expect(page.status).toBe(200);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.headers["content-security-policy"]).toBe(CONSOLE_CSP);
    expect(CONSOLE_CSP).toContain("default-src 'none'");
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    const html = String(page.body);
    // No operational data: no agent id, wallet or other address, no IP, no token, no counter.
    const identities = await queryRows<{ agent_id: string; assigned_wallet: string }>(
      db(),
      sql`select agent_id, assigned_wallet from agent_identities`,
    );
    expect(identities.length).toBeGreaterThan(0);
    for (const row of identities) {
      expect(html).not.toContain(row.agent_id);
      expect(html).not.toContain(row.assigned_wallet);
    }
    expect(html).not.toMatch(/0x[0-9a-fA-F]{40}/);
    expect(html).not.toMatch(/\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b/);
    expect(html).not.toContain(secrets.adminToken);
    expect(html).not.toContain(hashIpGroup(IP_SECRET, "81.3.0.1"));
    // The shell is the file as it is, with only the API's path and the console's origin (the
    // configuration's, CONSOLE_ORIGIN as derived for this origin) put in: nothing of the database.
    const template = readFileSync(new URL("./page/console.html", import.meta.url), "utf8");
    expect(html).toBe(
      template
        .replaceAll("{{API_BASE}}", "/77/admin/agents")
        .replaceAll("{{CONSOLE_ORIGIN}}", "http://localhost:8788"),
    );
    expect(html).toContain('<dl id="counters" class="grid"></dl>');
    expect(html).toContain('<div id="identities"></div>');
    // No inline script or style: the CSP would refuse them anyway.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/\sstyle=|<style/);
    expect(html).not.toMatch(/\son[a-z]+=/);
    for (const [path, type] of [
      ["/admin/agents/assets/console.js", "text/javascript; charset=utf-8"],
      ["/admin/agents/assets/console.css", "text/css; charset=utf-8"],
      ["/admin/agents/assets/simplewebauthn-browser.js", "text/javascript; charset=utf-8"],
    ] as const) {
      const asset = await send(`${origin.base}${path}`);
      expect(asset.status).toBe(200);
      expect(asset.headers["content-type"]).toBe(type);
      expect(asset.headers["x-content-type-options"]).toBe("nosniff");
      expect(html).toContain(`${path.replace("/admin", "/77/admin")}`);
    }
    // The WebAuthn library is the package's own bundle, served by the origin (never a CDN's copy).
    const webauthn = await send(`${origin.base}/admin/agents/assets/simplewebauthn-browser.js`);
    expect(webauthn.body).toBe(
      readFileSync(
        new URL("../../node_modules/@simplewebauthn/browser/dist/bundle/index.umd.min.js", import.meta.url),
        "utf8",
      ),
    );
  });

  it("never writes the console tokens to the request log", async () => {
    expect(logLines.length).toBeGreaterThan(0);
    const consoleLines = logLines.filter((line) => line.includes("/admin/agents"));
    expect(consoleLines.length).toBeGreaterThan(10);
    for (const line of logLines) {
      expect(line).not.toContain(secrets.adminToken);
      expect(line).not.toContain(secrets.changeToken);
      expect(line.toLowerCase()).not.toContain("x-admin-api-token");
      expect(line.toLowerCase()).not.toContain("x-registration-admin-token");
    }
  });

  it("adds, lists, replays and removes webhook endpoints with a reason, each audited; refuses what delivery would", async () => {
    const webhookRows = async () =>
      (await queryRows<{ n: number }>(db(), sql`select count(*)::int as n from webhook_endpoints`))[0]!.n;
    const before = await webhookRows();
    // This node does not allow private addresses: a loopback URL is refused as delivery would refuse it.
    for (const [body, field] of [
      [{ url: "http://127.0.0.1:9/hook", events: ["action.confirmed"], reason: "r" }, "url"],
      [{ url: "http://169.254.169.254/", events: ["action.confirmed"], reason: "r" }, "url"],
      [{ url: "ftp://93.184.216.34/", events: ["action.confirmed"], reason: "r" }, "url"],
      // A NUL failed the insert (500); another control character or a space was stored as given,
      // a URL other than the one delivery would parse out of it.
      [{ url: "https://93.184.216.34/hook\u0000", events: ["action.confirmed"], reason: "r" }, "url"],
      [{ url: "https://93.184.216.34/h\u001bk", events: ["action.confirmed"], reason: "r" }, "url"],
      [{ url: "https://93.184.216.34/a hook", events: ["action.confirmed"], reason: "r" }, "url"],
      [{ url: "https://93.184.216.34/hook", events: ["action.teleported"], reason: "r" }, "events"],
      [{ url: "https://93.184.216.34/hook", events: [], reason: "r" }, undefined],
      [{ url: "https://93.184.216.34/hook", events: ["action.confirmed"], reason: " " }, undefined],
    ] as const) {
      const refused = await operator().post("/webhooks", body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect((refused.body as { error: { code: string } }).error.code).toBe("validation_failed");
      if (field) expect(JSON.stringify(refused.body)).toContain(field);
    }
    // The read token alone cannot change anything.
    const readOnly = await reader().post("/webhooks", {
      url: "https://93.184.216.34/hook",
      events: ["action.confirmed"],
      reason: "read only",
    });
    expect(readOnly.status).toBe(401);
    expect(await webhookRows()).toBe(before);

    const added = await operator().post("/webhooks", {
      url: "https://93.184.216.34/hook",
      events: ["action.confirmed", "action.failed"],
      reason: "a public receiver",
    });
    expect(added.status).toBe(201);
    const endpoint = webhookAddResponseSchema.parse(added.body);
    expect(endpoint).toMatchObject({
      enabled: true,
      disabled_reason: null,
      events: ["action.confirmed", "action.failed"],
    });
    expect(endpoint.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);

    // Deliveries as the fan-out queues them; none is sent (no worker runs in this test).
    const [event] = await queryRows<{ id: string }>(
      db(),
      sql`insert into events (agent_id, type, data) values (null, 'action.confirmed', '{}') returning id::text as id`,
    );
    await db().execute(
      sql`insert into webhook_deliveries (endpoint_id, event_id, status, attempts, last_http_status, last_error)
          values (${endpoint.id}::uuid, ${event!.id}::bigint, 'failed', 5, 500, 'the receiver answered 500')`,
    );
    const listed = await reader().get("/webhooks");
    expect(listed.status).toBe(200);
    expect(JSON.stringify(listed.body)).not.toContain(endpoint.secret);
    const overview = webhooksOverviewSchema.parse(listed.body);
    expect(overview.event_types).toContain("action.confirmed");
    const shown = overview.endpoints.find((each) => each.id === endpoint.id)!;
    // The queue against the bound (AGENT_WEBHOOKS_MAX_PENDING, 1000 by default): a failed delivery is not pending.
    expect(overview.max_pending).toBe(1_000);
    expect(shown).toMatchObject({ pending: 0, at_bound: false });
    expect(shown.deliveries).toEqual([
      expect.objectContaining({
        event_id: event!.id,
        event_type: "action.confirmed",
        status: "failed",
        attempts: 5,
        last_http_status: 500,
        last_error: "the receiver answered 500",
        next_attempt_at: null,
        delivered_at: null,
      }),
    ]);

    // Replay of that event: the same row, so the same webhook-id, pending again from a first attempt.
    const replayed = await operator().post(`/webhooks/${endpoint.id}/replay`, {
      event_id: event!.id,
      reason: "the receiver is fixed",
    });
    expect(replayed.status).toBe(200);
    expect(webhookReplayResponseSchema.parse(replayed.body)).toEqual({ id: endpoint.id, queued: 1 });
    const after = webhooksOverviewSchema
      .parse((await reader().get("/webhooks")).body)
      .endpoints.find((each) => each.id === endpoint.id)!;
    expect(after.deliveries).toHaveLength(1);
    expect(after).toMatchObject({ pending: 1, at_bound: false });
    expect(after.deliveries[0]).toMatchObject({
      webhook_id: shown.deliveries[0]!.webhook_id,
      status: "pending",
      attempts: 0,
      last_error: null,
    });
    expect(after.deliveries[0]!.next_attempt_at).not.toBeNull();
    const both = await operator().post(`/webhooks/${endpoint.id}/replay`, {
      event_id: "1",
      from_event_id: "1",
      reason: "both",
    });
    expect(both.status).toBe(400);
    // Past the log's bigint ids: no event has it, refused as a bad parameter, never queried.
    for (const field of ["event_id", "from_event_id"]) {
      const beyond = await operator().post(`/webhooks/${endpoint.id}/replay`, {
        [field]: "9223372036854775808",
        reason: "beyond",
      });
      expect(beyond.status, field).toBe(400);
      expect(beyond.body, field).toMatchObject({ error: { code: "validation_failed" } });
    }

    // A new secret, shown once; an overlap outside 0 to 168 hours is refused, changing nothing.
    for (const overlap of [-1, 169, 1.5, "24"]) {
      const refusedRotation = await operator().post(`/webhooks/${endpoint.id}/rotate-secret`, {
        overlap_hours: overlap,
        reason: "refused",
      });
      expect(refusedRotation.status, String(overlap)).toBe(400);
      expect(refusedRotation.body, String(overlap)).toMatchObject({
        error: {
          code: "validation_failed",
          message: expect.stringContaining("overlap_hours must be a whole number of hours from 0 to 168"),
        },
      });
    }
    expect(
      (await reader().post(`/webhooks/${endpoint.id}/rotate-secret`, { reason: "read only" })).status,
    ).toBe(401);
    const rotation = await operator().post(`/webhooks/${endpoint.id}/rotate-secret`, {
      overlap_hours: 2,
      reason: "yearly rotation",
    });
    expect(rotation.status).toBe(200);
    const rotated = webhookRotateSecretResponseSchema.parse(rotation.body);
    recordSecret(rotated.secret);
    expect(rotated).toMatchObject({
      id: endpoint.id,
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    expect(rotated.secret).not.toBe(endpoint.secret);
    const hoursLeft = (Date.parse(rotated.previous_secret_until) - Date.now()) / 3_600_000;
    expect(hoursLeft).toBeGreaterThan(1.9);
    expect(hoursLeft).toBeLessThanOrEqual(2);
    expect(JSON.stringify((await reader().get("/webhooks")).body)).not.toContain(rotated.secret);

    const removed = await operator().post(`/webhooks/${endpoint.id}/remove`, { reason: "decommissioned" });
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual({ id: endpoint.id, removed: true });
    for (const path of [
      `/webhooks/${endpoint.id}/remove`,
      `/webhooks/${endpoint.id}/replay`,
      `/webhooks/${endpoint.id}/rotate-secret`,
      "/webhooks/nope/remove",
      "/webhooks/nope/rotate-secret",
    ]) {
      const missing = await operator().post(path, { reason: "again" });
      expect(missing.status, path).toBe(404);
    }

    const audit = auditSchema.parse((await reader().get("/audit")).body);
    const changes = audit.changes.filter((row) => row.subject === endpoint.id);
    expect(changes.map(({ at: _at, ...row }) => row)).toEqual([
      {
        kind: "webhook_endpoint",
        subject: endpoint.id,
        change: "remove",
        before: "https://93.184.216.34/hook (action.confirmed,action.failed)",
        after: "removed",
        reason: "decommissioned",
        source: "console",
        operator: null,
        passkey_key_id: null,
      },
      {
        kind: "webhook_endpoint",
        subject: endpoint.id,
        change: "rotate_secret",
        before: "secret",
        after: `new secret; the old one signs beside it until ${rotated.previous_secret_until}`,
        reason: "yearly rotation",
        source: "console",
        operator: null,
        passkey_key_id: null,
      },
      {
        kind: "webhook_endpoint",
        subject: endpoint.id,
        change: "replay",
        before: "enabled",
        after: `enabled; 1 deliveries queued: event ${event!.id}`,
        reason: "the receiver is fixed",
        source: "console",
        operator: null,
        passkey_key_id: null,
      },
      {
        kind: "webhook_endpoint",
        subject: endpoint.id,
        change: "add",
        before: null,
        after: "https://93.184.216.34/hook (action.confirmed,action.failed)",
        reason: "a public receiver",
        source: "console",
        operator: null,
        passkey_key_id: null,
      },
    ]);
  });
});

describe("operator console: configuration", () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  it("answers with the gateway switch off (only the gateway's endpoints are governed by it)", async () => {
    const origin = await startTestOrigin({
      database: testDb.handle,
      env: { ...secrets.env, AGENT_GATEWAY_ENABLED: "false" },
    });
    try {
      expect((await send(`${origin.base}/agent/v1/network`)).status).toBe(404);
      expect(
        (await consoleCalls(origin.base, { admin: secrets.adminToken }).get("/registration")).status,
      ).toBe(200);
      expect((await send(`${origin.base}/admin/agents`)).status).toBe(200);
      expect(
        (await send(`${origin.base}/metrics`, { headers: { authorization: `Bearer ${secrets.adminToken}` } }))
          .status,
      ).toBe(200);
      expect(
        (await send(`${origin.base}/metrics`, { headers: { authorization: `bearer ${secrets.adminToken}` } }))
          .status,
      ).toBe(200);
    } finally {
      await origin.close();
    }
  });

  it("without AGENT_ADMIN_API_TOKEN the console and /metrics are 404; without the registration secret, changes are", async () => {
    const off = await startTestOrigin({ database: testDb.handle });
    const readOnly = await startTestOrigin({
      database: testDb.handle,
      env: { AGENT_ADMIN_API_TOKEN: secrets.adminToken },
    });
    try {
      for (const path of ["/admin/agents", "/admin/agents/registration", "/metrics"]) {
        const response = await send(`${off.base}${path}`, {
          headers: { "x-admin-api-token": secrets.adminToken },
        });
        expect(response.status).toBe(404);
        expect(response.body).toMatchObject({ error: { code: "feature_disabled" } });
      }
      const calls = consoleCalls(readOnly.base, { admin: secrets.adminToken, change: secrets.changeToken });
      expect((await calls.get("/registration")).status).toBe(200);
      const refused = await calls.post("/registration/settings", { changes: { paused: false }, reason: "x" });
      expect(refused.status).toBe(404);
      expect(refused.body).toMatchObject({ error: { code: "feature_disabled" } });
      // Without the read token nothing tells a stranger how the node is configured.
      const stranger = await consoleCalls(readOnly.base, {}).post("/registration/settings", {});
      expect(stranger.status).toBe(401);
    } finally {
      await off.close();
      await readOnly.close();
    }
  });
});

// What the console shows at most (docs/api.md#the-operator-console).
describe("operator console caps: the last 50 identities, up to 200 API buckets", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 55);
    origin = await startTestOrigin({ database: testDb.handle, env: secrets.env });
  });
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });

  it("shows the 50 newest of 55 public identities, newest first, and 200 of 210 active API buckets", async () => {
    const made: string[] = [];
    for (let i = 0; i < 55; i++) {
      const result = await provisionedIdentity(testDb.handle.db, {
        capabilities: ["read"],
        origin: "public",
      });
      made.push(result.agentId);
    }
    // 210 clients, each with one failed authentication: 210 pre-authentication buckets.
    for (let i = 1; i <= 210; i++) {
      const response = await send(`${origin.base}/agent/v1/network`, {
        headers: { authorization: "Bearer agt_nope" },
        localAddress: `127.0.${3 + (i >> 8)}.${i & 255}`,
      });
      expect(response.status).toBe(401);
    }
    const overview = registrationOverviewSchema.parse(
      (await consoleCalls(origin.base, { admin: secrets.adminToken }).get("/registration")).body,
    );
    expect(overview.identities.map((identity) => identity.agent_id)).toEqual(made.slice(5).reverse());
    expect(overview.local_buckets.buckets).toHaveLength(200);
    expect(new Set(overview.local_buckets.buckets.map((bucket) => bucket.key)).size).toBe(200);
  });
});
