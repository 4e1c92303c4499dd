import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import pino from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { queryRows } from "../origin/db/client.ts";
import { refillOnce } from "../origin/keypool/refill.ts";
import { hashIpGroup } from "../origin/registration/ip-classification.ts";
import { updateRegistrationPolicy } from "../origin/registration/policy-repository.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import {
  HEADER_CLIENT_IP,
  HEADER_EDGE_SECRET,
  HEADER_REGISTRATION,
  HEADER_REGISTRATION_IP,
} from "../shared/constants.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../testing/enclave-process.ts";
import { send, sendUnchecked, type TestResponse } from "../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../testing/origin.ts";

// The whole path: the real worker in Miniflare (behind the local front that, like Cloudflare, takes
// the client's address from the connection), the real origin app, Postgres, and keys made by the
// real enclave. Clients are told apart by their loopback source address (127.0.0.1–127.0.0.99);
// the origin runs with AGENT_REGISTRATION_ALLOW_LOOPBACK, the local stack's switch.

const EDGE_SECRET = randomBytes(32).toString("hex");
const IP_SECRET = randomBytes(32).toString("hex");
const KEYS = 170;
type Envelope = { error: { code: string; request_id: string; [field: string]: unknown } };
type Created = {
  token: string;
  agent_id: string;
  assigned_wallet: string;
  capabilities: string[];
  chain_id: number;
};

/** The origin's clock; every test starts a new UTC day so its quotas start afresh. */
const time = { now: Date.parse("2032-06-01T08:00:10Z") };
const clock = { now: () => new Date(time.now) };

describe("the edge in front of the real origin", () => {
  let testDb: TestDatabase;
  let enclave: EnclaveProcess;
  let signer: SignerClient;
  let backupDir: string;
  let origin: TestOrigin;
  let edge: EdgeHandle;
  const logLines: string[] = [];
  const db = () => testDb.handle.db;

  const register = (from: string, headers: Record<string, string> = {}): Promise<TestResponse> =>
    send(`${edge.url}/77/agent/v1/register`, {
      method: "POST",
      headers: { "content-type": "application/json", [HEADER_REGISTRATION]: "1", ...headers },
      body: "{}",
      localAddress: from,
    });
  const open = (changes: Parameters<typeof updateRegistrationPolicy>[1]["changes"] = {}) =>
    updateRegistrationPolicy(db(), { changes: { paused: false, ...changes }, reason: "edge test" });
  const group = (ip: string) => hashIpGroup(IP_SECRET, ip);
  const count = async (query: ReturnType<typeof sql>): Promise<number> =>
    (await queryRows<{ n: number }>(db(), query))[0]!.n;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    enclave = await startEnclaveProcess({ envId: "edge-test" });
    signer = createSignerClient({ endpoint: `unix://${enclave.socketPath}`, liveIdentityEnabled: true });
    backupDir = await mkdtemp(path.join(tmpdir(), "edge-test-backups-"));
    const authorize = createCapabilityMinter({
      authority: enclave.adminSecret,
      envId: enclave.envId,
      client: signer,
    });
    const outcomes = await refillOnce(
      { db: db(), signer, authorize, backupDir, logger: pino({ level: "silent" }) },
      { target: KEYS, batchSize: 85 },
    );
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    origin = await startTestOrigin({
      database: testDb.handle,
      clock,
      env: {
        AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
        AGENT_SIGNER_LIVE_IDENTITY_ENABLED: "true",
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_REGISTRATION_ALLOW_LOOPBACK: "true",
        AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
        AGENT_REGISTRATION_IP_SECRET: IP_SECRET,
      },
      onLogLine: (line) => logLines.push(line),
    });
    edge = await startTestEdge({ originUrl: origin.url, edgeSharedSecret: EDGE_SECRET, onLine: () => {} });
  });
  afterAll(async () => {
    await edge?.stop();
    await origin?.close();
    await signer?.close();
    await enclave?.dispose();
    await testDb?.drop();
    if (backupDir) await rm(backupDir, { recursive: true, force: true });
  });
  beforeEach(async () => {
    time.now += 86_400_000;
    logLines.length = 0;
    await updateRegistrationPolicy(db(), {
      changes: {
        paused: true,
        perIpDaily: 3,
        networkDaily: 100,
        totalCeiling: 1000,
        keyReserve: 10,
        attemptsPerIpPerMinute: 10,
        attemptsGlobalPerMinute: 120,
      },
      reason: "reset for the next test",
    });
  });

  describe("registration", () => {
    let burstsSent = 0;
    it("201 through the edge: a token that reads /network, a wallet whose key the enclave holds, no faucet", async () => {
      await open();
      const response = await register("127.0.0.2");
      expect(response.status).toBe(201);
      expect(response.headers["cache-control"]).toBe("no-store");
      const body = response.body as Created;
      expect(body).toEqual({
        token: expect.stringMatching(/^agt_[0-9a-f]{32}_[0-9a-f]{64}$/),
        agent_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        assigned_wallet: expect.stringMatching(/^0x[0-9a-f]{40}$/),
        capabilities: ["read", "transfer"],
        chain_id: 77,
      });
      const auth = { authorization: `Bearer ${body.token}` };
      const network = await send(`${edge.url}/77/agent/v1/network`, {
        headers: auth,
        localAddress: "127.0.0.2",
      });
      expect(network.status).toBe(200);
      expect(network.body).toMatchObject({
        agent: { agent_id: body.agent_id, assigned_wallet: body.assigned_wallet },
      });
      const faucet = await send(`${edge.url}/77/agent/v1/faucet`, {
        method: "POST",
        headers: auth,
        body: "{}",
        localAddress: "127.0.0.2",
      });
      expect(faucet.status).toBe(403);
      expect((faucet.body as Envelope).error.code).toBe("agent_capability_required");

      const [row] = await queryRows<{ key_ref: string; ip_group: string }>(
        db(),
        sql`select k.key_ref, r.ip_group from key_pool k join registration_issued r on r.agent_id = k.assigned_agent_id
            where k.assigned_agent_id = ${body.agent_id}`,
      );
      expect(row!.ip_group).toBe(group("127.0.0.2"));
      const held = await signer.publicIdentity({ keyRef: row!.key_ref });
      expect(held.ok && held.value.address.toLowerCase()).toBe(body.assigned_wallet);
    });

    /**
     * `perAddress` registrations from each of `clients` loopback addresses, all at once, in random
     * order. Each burst from addresses of its own: the edge refuses an address the origin answered
     * 429 for up to a minute, whatever day the origin's clock has moved to.
     */
    async function burst(clients: number, perAddress: number) {
      burstsSent += 1;
      const addresses = Array.from({ length: clients }, (_, i) => `127.0.${burstsSent}.${i + 1}`);
      const requests = addresses.flatMap((from) => Array<string>(perAddress).fill(from));
      for (let i = requests.length - 1; i > 0; i--) {
        const j = Math.floor(Math.random() * (i + 1));
        [requests[i], requests[j]] = [requests[j]!, requests[i]!];
      }
      const before = await stock();
      const responses = await Promise.all(requests.map((from) => register(from)));
      const statuses = responses.map((response) => response.status);
      expect(statuses.every((status) => [201, 429, 503].includes(status))).toBe(true);
      for (const response of responses) {
        expect(response.headers["cache-control"]).toBe("no-store");
        if (response.status === 429) expect(Number(response.headers["retry-after"])).toBeGreaterThan(0);
      }
      const created = responses.flatMap((response, i) =>
        response.status === 201 ? [{ from: requests[i]!, body: response.body as Created }] : [],
      );
      const perGroup = new Map<string, number>();
      for (const { from } of created) perGroup.set(from, (perGroup.get(from) ?? 0) + 1);
      const after = await stock();
      return { responses, created, perGroup, before, after };
    }
    /** Identities, keys and records, and the counters of the current day and minute. */
    async function stock() {
      const day = new Date(time.now).toISOString().slice(0, 10);
      const minute = new Date(Math.floor(time.now / 60_000) * 60_000).toISOString();
      const [row] = await queryRows<Record<string, number>>(
        db(),
        sql`select
              (select count(*)::int from agent_identities where origin = 'public') as identities,
              (select count(*)::int from key_pool where status = 'assigned') as assigned,
              (select count(*)::int from key_pool where status = 'free') as free,
              (select count(*)::int from registration_issued) as issued,
              (select coalesce(sum(count), 0)::int from registration_admissions where day = ${day} and ip_group = '*') as network_today,
              (select coalesce(sum(count), 0)::int from registration_admissions where day = ${day} and ip_group <> '*') as groups_today,
              (select coalesce(sum(count), 0)::int from registration_attempts where minute = ${minute} and ip_group = '*') as attempts_global,
              (select coalesce(sum(count), 0)::int from registration_attempts where minute = ${minute} and ip_group <> '*') as attempts_groups`,
      );
      return row as Record<
        | "identities"
        | "assigned"
        | "free"
        | "issued"
        | "network_today"
        | "groups_today"
        | "attempts_global"
        | "attempts_groups",
        number
      >;
    }
    /** What every burst must show: each success a distinct wallet, and every record and counter agreeing. */
    async function expectConsistent(result: Awaited<ReturnType<typeof burst>>) {
      const { created, perGroup, before, after } = result;
      expect(new Set(created.map(({ body }) => body.assigned_wallet)).size).toBe(created.length);
      expect(new Set(created.map(({ body }) => body.agent_id)).size).toBe(created.length);
      // keys assigned = identities created = registrations issued = 201s
      expect(after.identities - before.identities).toBe(created.length);
      expect(after.assigned - before.assigned).toBe(created.length);
      expect(before.free - after.free).toBe(created.length);
      expect(after.issued - before.issued).toBe(created.length);
      expect(after.network_today - before.network_today).toBe(created.length);
      expect(after.groups_today - before.groups_today).toBe(created.length);
      for (const [from, n] of perGroup) {
        expect(
          await count(
            sql`select count::int as n from registration_admissions
                where day = ${new Date(time.now).toISOString().slice(0, 10)} and ip_group = ${group(from)}`,
          ),
        ).toBe(n);
      }
      // The attempt counters equal the admissions that reached the database, as the origin logged them.
      const reached = logLines.filter((line) => line.includes('"admitted":true')).length;
      expect(after.attempts_global).toBe(reached);
      expect(after.attempts_groups).toBe(reached);
    }

    it("500 concurrent registrations from 50 addresses: at most 3 each, the day's quota in all, exact counts", async () => {
      // Room for 300 admissions a minute, so that the per-address and network-wide quotas both bind.
      await open({ attemptsGlobalPerMinute: 300 });
      const result = await burst(50, 10);
      await expectConsistent(result);
      expect(Math.max(...result.perGroup.values())).toBeLessThanOrEqual(3);
      expect(result.created).toHaveLength(100);
      expect(result.after.attempts_global).toBeLessThanOrEqual(300);
      expect(result.after.free).toBeGreaterThanOrEqual(10);
    });

    it("concurrent registrations stop exactly at the verified-key reserve", async () => {
      const { free } = await stock();
      await open({ keyReserve: free - 25 });
      const result = await burst(20, 10);
      await expectConsistent(result);
      expect(result.created).toHaveLength(25);
      expect(result.after.free).toBe(free - 25);
      const refusals = result.responses.filter((response) => response.status === 503);
      expect(refusals.length).toBeGreaterThan(0);
      for (const refusal of refusals) {
        expect(refusal.body).toMatchObject({
          error: { code: "registration_unavailable", reason: "key_reserve" },
        });
      }
    });

    it("changes nothing for a client-sent X-svc-Registration-IP, X-Forwarded-For or edge secret", async () => {
      await open();
      for (let i = 0; i < 3; i++) expect((await register("127.0.0.70")).status).toBe(201);
      const spoofed = await register("127.0.0.70", {
        [HEADER_REGISTRATION_IP]: "127.0.0.71",
        [HEADER_CLIENT_IP]: "127.0.0.71",
        "x-forwarded-for": "127.0.0.71",
        [HEADER_EDGE_SECRET]: "spoofed",
      });
      expect(spoofed.status).toBe(429);
      const day = new Date(time.now).toISOString().slice(0, 10);
      expect(
        await count(
          sql`select count(*)::int as n from registration_admissions where ip_group = ${group("127.0.0.71")}`,
        ),
      ).toBe(0);
      expect(
        await count(
          sql`select count::int as n from registration_admissions where day = ${day} and ip_group = ${group("127.0.0.70")}`,
        ),
      ).toBe(3);
      expect((await register("127.0.0.71")).status).toBe(201);
    });

    it("refuses a request straight to the origin without the secret, moving no counter", async () => {
      await open();
      const attempts = await count(sql`select coalesce(sum(count), 0)::int as n from registration_attempts`);
      const direct = await send(`${origin.base}/agent/v1/register`, {
        method: "POST",
        headers: { [HEADER_REGISTRATION]: "1", [HEADER_REGISTRATION_IP]: "81.2.3.4" },
        body: "{}",
      });
      expect(direct.status).toBe(403);
      expect((direct.body as Envelope).error.code).toBe("registration_ingress_refused");
      expect(await count(sql`select coalesce(sum(count), 0)::int as n from registration_attempts`)).toBe(
        attempts,
      );
    });

    it.each([
      ["a cross-site Origin", { origin: "https://attacker.example" }],
      ["Sec-Fetch-Site: cross-site", { "sec-fetch-site": "cross-site" }],
    ])("refuses %s at the edge: it never reaches the origin", async (_case, headers) => {
      await open();
      const response = await register("127.0.0.72", headers);
      expect(response.status).toBe(403);
      expect((response.body as Envelope).error.code).toBe("cross_site_refused");
      expect(logLines.filter((line) => line.includes("/agent/v1/register"))).toEqual([]);
    });

    it("answers 503 paused through the edge, and 429 with Retry-After to the 11th attempt in a minute", async () => {
      const paused = await register("127.0.0.73");
      expect(paused.status).toBe(503);
      expect(paused.body).toMatchObject({ error: { code: "registration_unavailable", reason: "paused" } });
      await open({ perIpDaily: 20 });
      for (let i = 0; i < 10; i++) expect((await register("127.0.0.73")).status).toBe(201);
      const limited = await register("127.0.0.73");
      expect(limited.status).toBe(429);
      expect(Number(limited.headers["retry-after"])).toBeGreaterThan(0);
      expect((limited.body as Envelope).error.code).toBe("registration_rate_limited");
    });

    it("a client's oversize body sent chunked costs the next client through the edge nothing: its registration is answered, not 502", async () => {
      await open();
      for (const [round, honest] of ["127.0.0.74", "127.0.0.75", "127.0.0.76"].entries()) {
        // No Content-Length: the origin cuts the body off at its limit while it streams in.
        const oversize = await sendUnchecked(`${edge.url}/77/agent/v1/register`, {
          method: "POST",
          headers: { [HEADER_REGISTRATION]: "1", "transfer-encoding": "chunked" },
          body: `{"pad":"${"x".repeat(70 * 1024)}"}`,
          localAddress: "127.0.0.77",
        }).catch(() => undefined);
        // Refused, or its own connection cut: never anything else.
        if (oversize) expect(oversize.status, `round ${round}`).toBe(413);
        // Mutation: read-body.ts leaving a `for await` over the body at the limit destroys the
        // request mid-body; the edge's pooled connection to the origin then answers nothing more,
        // and this is 502 upstream_unavailable.
        const next = await register(honest);
        expect(next.status, `round ${round}: ${JSON.stringify(next.body)}`).toBe(201);
      }
    });

    it("a legacy GET {base}/faucet is 404 at the edge and at the origin", async () => {
      expect((await send(`${edge.url}/77/faucet`)).status).toBe(404);
      expect((await send(`${origin.base}/faucet`)).status).toBe(404);
    });
  });

  describe("the client's address on every route", () => {
    const badToken = () => ({
      authorization: `Bearer agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`,
    });
    const network = (from: string, headers: Record<string, string>) =>
      send(`${edge.url}/77/agent/v1/network`, { headers, localAddress: from });

    it("100 bad tokens from one client do not stop another's valid token, and no header moves a client's bucket", async () => {
      await open();
      const created = await register("127.0.0.80");
      const valid = { authorization: `Bearer ${(created.body as Created).token}` };

      const statuses = await Promise.all(
        Array.from({ length: 100 }, () => network("127.0.0.81", badToken())),
      );
      expect(statuses.filter((r) => r.status === 401)).toHaveLength(60);
      expect(statuses.filter((r) => r.status === 429)).toHaveLength(40);

      // Another client, on the same edge, is not affected.
      expect((await network("127.0.0.80", valid)).status).toBe(200);
      // The blocked client cannot step into another bucket by naming another address: its bad
      // token is refused 429 as the blocked address's, where the other's bucket would answer 401.
      for (const header of ["x-forwarded-for", HEADER_CLIENT_IP, "cf-connecting-ip"]) {
        expect((await network("127.0.0.81", { ...badToken(), [header]: "127.0.0.82" })).status, header).toBe(
          429,
        );
      }
      // …nor push another client into its own.
      expect((await network("127.0.0.82", { ...badToken(), [HEADER_CLIENT_IP]: "127.0.0.81" })).status).toBe(
        401,
      );
      expect((await network("127.0.0.82", { ...valid, "x-forwarded-for": "127.0.0.81" })).status).toBe(200);
    });
  });
});
