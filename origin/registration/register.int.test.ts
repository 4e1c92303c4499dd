import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  HEADER_EDGE_SECRET,
  HEADER_REGISTRATION,
  HEADER_REGISTRATION_IP,
  HEADER_REGISTRATION_PROOF,
} from "../../shared/constants.ts";
import { solveChallenge } from "../../shared/registration-proof.ts";
import { createTestDatabase, databaseBehindProxy, type TestDatabase } from "../../testing/database.ts";
import { send, type TestResponse } from "../../testing/http.ts";
import { backendPid, waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import { queryRows } from "../db/client.ts";
import { provisionIdentity } from "../keypool/provision.ts";
import { hashIpGroup } from "./ip-classification.ts";
import { updateRegistrationPolicy } from "./policy-repository.ts";

// POST {base}/agent/v1/register at the real origin (real Postgres), the test acting as the edge: it
// sends the edge secret and X-svc-Registration-IP itself
// (docs/api.md#registration-what-a-request-must-be).

/** Issuance's lock of the policy row (issuance.ts issuePublicIdentity), where every registration queues. */
const POLICY_LOCK = "^select 1 from registration_policy where id = 1 for update";

const EDGE_SECRET = randomBytes(32).toString("hex");
const IP_SECRET = randomBytes(32).toString("hex");
const ENV = {
  AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
  AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
  AGENT_REGISTRATION_IP_SECRET: IP_SECRET,
};
type Envelope = { error: { code: string; message: string; request_id: string; [field: string]: unknown } };
type Created = {
  token: string;
  agent_id: string;
  assigned_wallet: string;
  capabilities: string[];
  chain_id: number;
};

/** One clock for every origin of the file; tests move it a day on so quotas start afresh. */
const time = { now: Date.parse("2031-03-04T10:00:05Z") };
const clock = { now: () => new Date(time.now) };

let nextAddress = 1;
/** A public address no other test uses (81.2.0.0/16 is ordinary unicast space). */
function publicIp(): string {
  const n = nextAddress++;
  return `81.2.${n >> 8}.${n & 255}`;
}

describe("POST {base}/agent/v1/register at the origin", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let twin: TestOrigin;
  const logLines: string[] = [];

  const db = () => testDb.handle.db;
  const open = (changes: Parameters<typeof updateRegistrationPolicy>[1]["changes"] = {}) =>
    updateRegistrationPolicy(db(), { changes: { paused: false, ...changes }, reason: "test" });

  function register(
    target: TestOrigin,
    ip: string | null,
    overrides: { headers?: Record<string, string | null>; body?: string } = {},
  ): Promise<TestResponse> {
    const merged: Record<string, string | null> = {
      "content-type": "application/json",
      [HEADER_REGISTRATION]: "1",
      [HEADER_EDGE_SECRET]: EDGE_SECRET,
      [HEADER_REGISTRATION_IP]: ip,
      ...overrides.headers,
    };
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(merged)) if (value !== null) headers[name] = value;
    return send(`${target.base}/agent/v1/register`, {
      method: "POST",
      headers,
      body: overrides.body ?? "{}",
    });
  }

  /** Everything a refusal must leave alone. */
  async function counters() {
    const [row] = await queryRows<{
      attempts: number;
      admissions: number;
      issued: number;
      identities: number;
      free_keys: number;
    }>(
      db(),
      sql`select
            (select coalesce(sum(count), 0)::int from registration_attempts) as attempts,
            (select coalesce(sum(count), 0)::int from registration_admissions) as admissions,
            (select count(*)::int from registration_issued) as issued,
            (select count(*)::int from agent_identities) as identities,
            (select count(*)::int from key_pool where status = 'free') as free_keys`,
    );
    return row!;
  }

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 100);
    [origin, twin] = await Promise.all([
      startTestOrigin({ database: testDb.handle, env: ENV, clock, onLogLine: (line) => logLines.push(line) }),
      startTestOrigin({ database: testDb.handle, env: ENV, clock }),
    ]);
  });
  afterAll(async () => {
    await origin?.close();
    await twin?.close();
    await testDb?.drop();
  });
  beforeEach(async () => {
    time.now += 86_400_000; // a new UTC day: fresh daily and per-minute counts, empty local windows
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

  it("issues a token and an empty wallet: 201, no-store, read and transfer, chain 77", async () => {
    await open();
    const ip = publicIp();
    const response = await register(origin, ip);
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
    const network = await send(`${origin.base}/agent/v1/network`, { headers: auth });
    expect(network.status).toBe(200);
    expect(network.body).toMatchObject({
      agent: {
        agent_id: body.agent_id,
        assigned_wallet: body.assigned_wallet,
        capabilities: ["read", "transfer"],
      },
    });
    const faucet = await send(`${origin.base}/agent/v1/faucet`, {
      method: "POST",
      headers: auth,
      body: "{}",
    });
    expect(faucet.status).toBe(403);
    expect((faucet.body as Envelope).error.code).toBe("agent_capability_required");

    const [issued] = await queryRows<{ ip_group: string; origin: string; capabilities: string[] }>(
      db(),
      sql`select r.ip_group, i.origin, i.capabilities from registration_issued r
          join agent_identities i using (agent_id) where r.agent_id = ${body.agent_id}`,
    );
    expect(issued).toEqual({
      ip_group: hashIpGroup(IP_SECRET, ip),
      origin: "public",
      capabilities: ["read", "transfer"],
    });
    // Nothing stores the address itself.
    const stored = await queryRows<{ text: string }>(
      db(),
      sql`select (select string_agg(ip_group, ',') from registration_attempts)
            || (select string_agg(ip_group, ',') from registration_admissions)
            || (select string_agg(ip_group, ',') from registration_issued) as text`,
    );
    expect(stored[0]!.text).not.toContain(ip);
  });

  it("never logs the response (token, its secret, agent id, wallet) or the client address", async () => {
    await open();
    const ip = publicIp();
    logLines.length = 0;
    const response = await register(origin, ip);
    expect(response.status).toBe(201);
    const { token, agent_id: agentId, assigned_wallet: wallet } = response.body as Created;
    const text = logLines.join("\n");
    expect(text).toContain('"route":"/77/agent/v1/register"');
    expect(text).toContain('"outcome":"issued"');
    expect(text).not.toContain(token);
    expect(text).not.toContain(token.split("_")[2]);
    expect(text).not.toContain(ip);
    expect(text).not.toContain(agentId);
    expect(text.toLowerCase()).not.toContain(wallet.toLowerCase());
  });

  describe("ingress refusals: 403, no key, no counter", () => {
    const refused = async (ip: string | null, headers: Record<string, string | null> = {}) => {
      await open();
      const before = await counters();
      const response = await register(origin, ip, { headers });
      expect(response.status).toBe(403);
      expect(response.headers["cache-control"]).toBe("no-store");
      expect((response.body as Envelope).error.code).toBe("registration_ingress_refused");
      expect(await counters()).toEqual(before);
    };

    it("without the edge secret, or with a wrong one", async () => {
      await refused(publicIp(), { [HEADER_EDGE_SECRET]: null });
      // The secret with its last digit changed (to another digit, whatever it was).
      const wrong = `${EDGE_SECRET.slice(0, -1)}${EDGE_SECRET.endsWith("0") ? "1" : "0"}`;
      await refused(publicIp(), { [HEADER_EDGE_SECRET]: wrong });
      await refused(publicIp(), { [HEADER_EDGE_SECRET]: "" });
    });

    it.each([
      ["missing", null],
      ["a list", "81.2.200.1, 81.2.200.2"],
      ["a list without spaces", "81.2.200.1,81.2.200.2"],
      ["with a port", "81.2.200.1:443"],
      ["bracketed", "[2a00:1450:4001::1]"],
      ["with a zone", "2a00:1450:4001::1%eth0"],
      ["a word", "unknown"],
      ["IPv4 with leading zeros", "081.2.200.1"],
    ])("an X-svc-Registration-IP that is %s", async (_case, ip) => {
      await refused(ip);
    });

    it.each([
      ["private 10/8", "10.1.2.3"],
      ["private 172.16/12", "172.20.0.1"],
      ["private 192.168/16", "192.168.1.1"],
      ["CGNAT 100.64/10", "100.64.0.1"],
      ["loopback", "127.0.0.1"],
      ["IPv6 loopback", "::1"],
      ["link-local", "169.254.1.1"],
      ["IPv6 link-local", "fe80::1"],
      ["unique-local", "fd00::1"],
      ["documentation", "203.0.113.7"],
      ["IPv6 documentation", "2001:db8::1"],
      ["multicast", "224.0.0.1"],
      ["IPv6 multicast", "ff02::1"],
      ["unspecified", "0.0.0.0"],
      ["IPv6 unspecified", "::"],
      ["reserved 240/4 (the edge's pseudo-IPv4 range)", "240.1.2.3"],
      ["broadcast", "255.255.255.255"],
      ["IPv4-mapped private", "::ffff:10.0.0.1"],
      ["IPv4-mapped loopback, hex spelling", "::ffff:7f00:1"],
      ["NAT64 of a private address", "64:ff9b::192.168.0.1"],
    ])("a %s address", async (_case, ip) => {
      await refused(ip);
    });

    it("accepts the public control of each family, so the cases above fail for their address alone", async () => {
      await open();
      for (const ip of [publicIp(), "2a00:1450:4001:81c::200e", "::ffff:81.2.250.1"]) {
        expect((await register(origin, ip)).status, ip).toBe(201);
      }
    });
  });

  describe("request shape: 400 validation_failed, nothing counted", () => {
    it.each([
      ["a form Content-Type", { headers: { "content-type": "application/x-www-form-urlencoded" } }],
      ["no X-SVC-Registration", { headers: { [HEADER_REGISTRATION]: null } }],
      ["X-SVC-Registration: 0", { headers: { [HEADER_REGISTRATION]: "0" } }],
      ["a capability field", { body: '{"capabilities":["faucet"]}' }],
      ["a wallet field", { body: '{"assigned_wallet":"0x0000000000000000000000000000000000000001"}' }],
      ["an array", { body: "[]" }],
      ["an empty body", { body: "" }],
      ["a body that is no JSON", { body: "{" }],
    ])("%s", async (_case, overrides) => {
      await open();
      const before = await counters();
      const response = await register(origin, publicIp(), overrides);
      expect(response.status).toBe(400);
      expect((response.body as Envelope).error.code).toBe("validation_failed");
      expect(response.headers["cache-control"]).toBe("no-store");
      expect(await counters()).toEqual(before);
    });
  });

  describe("503 registration_unavailable with its reason, no counter moved", () => {
    const unavailable = async (target: TestOrigin, reason: string) => {
      const before = await counters();
      const response = await register(target, publicIp());
      expect(response.status).toBe(503);
      expect(response.headers["cache-control"]).toBe("no-store");
      expect(response.body).toMatchObject({ error: { code: "registration_unavailable", reason } });
      expect(await counters()).toEqual(before);
    };

    it("while paused (the initial policy)", async () => {
      await unavailable(origin, "paused");
    });

    it("when AGENT_PUBLIC_REGISTRATION_ENABLED is not true", async () => {
      await open();
      const off = await startTestOrigin({
        database: testDb.handle,
        env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET, AGENT_REGISTRATION_IP_SECRET: IP_SECRET },
        clock,
      });
      try {
        await unavailable(off, "disabled");
      } finally {
        await off.close();
      }
    });

    it("at the total ceiling", async () => {
      const { issued } = await counters();
      await open({ totalCeiling: issued + 1 });
      expect((await register(origin, publicIp())).status).toBe(201);
      await unavailable(origin, "total_ceiling");
    });

    it("at the key reserve, while operator provisioning still takes a reserved key", async () => {
      const { free_keys } = await counters();
      await open({ keyReserve: free_keys - 1 });
      expect((await register(origin, publicIp())).status).toBe(201);
      await unavailable(origin, "key_reserve");
      const operator = await provisionIdentity(db(), { capabilities: ["read"], origin: "operator" });
      expect(operator.ok).toBe(true);
      expect((await counters()).free_keys).toBe(free_keys - 2);
      await unavailable(origin, "key_reserve");
    });
  });

  describe("429 registration_rate_limited with Retry-After", () => {
    const expectLimited = (response: TestResponse) => {
      expect(response.status).toBe(429);
      expect(response.headers["cache-control"]).toBe("no-store");
      const retryAfter = Number(response.headers["retry-after"]);
      expect(retryAfter).toBeGreaterThan(0);
      expect(response.body).toMatchObject({
        error: { code: "registration_rate_limited", retry_after: retryAfter },
      });
      return retryAfter;
    };
    const attemptsOf = async (ip: string) =>
      (
        await queryRows<{ n: number }>(
          db(),
          sql`select coalesce(sum(count), 0)::int as n from registration_attempts
              where ip_group = ${hashIpGroup(IP_SECRET, ip)}`,
        )
      )[0]!.n;

    it("the 11th attempt in a minute from one address on one node, refused before the database", async () => {
      await open({ perIpDaily: 100 });
      const ip = publicIp();
      for (let i = 0; i < 10; i++) expect((await register(origin, ip)).status).toBe(201);
      expect(await attemptsOf(ip)).toBe(10);
      logLines.length = 0;
      expectLimited(await register(origin, ip));
      // The early limiter refused it: the database was not asked, and no counter moved.
      expect(logLines.join("\n")).toContain('"stage":"early_limiter"');
      expect(await attemptsOf(ip)).toBe(10);
    });

    it("past the minute's limit, refused from the node's memory with the database out of reach; read again a second later", async () => {
      // A node whose database link the test can cut: a refusal that still read the policy would
      // answer 503 registration_unavailable here instead of 429.
      const { proxy, database: handle } = await databaseBehindProxy(testDb.url, { maxConnections: 2 });
      const lines: string[] = [];
      const lone = await startTestOrigin({
        database: handle,
        env: ENV,
        clock,
        workers: [],
        onLogLine: (line) => lines.push(line),
      });
      try {
        await open({ perIpDaily: 100 });
        const ip = publicIp();
        for (let i = 0; i < 10; i++) expect((await register(lone, ip)).status).toBe(201);
        proxy.cut("reset");
        lines.length = 0;
        for (let i = 0; i < 5; i++) expectLimited(await register(lone, ip));
        expect(lines.join("\n")).toContain('"stage":"early_limiter"');
        // Within its limits an address still needs the policy: unavailable while it is out of reach.
        const other = await register(lone, publicIp());
        expect(other.status).toBe(503);
        expect(other.body).toMatchObject({
          error: { code: "registration_unavailable", reason: "unavailable" },
        });
        // The limits remembered are a second old: the next attempt reads the policy again.
        time.now += 1_000;
        const stale = await register(lone, ip);
        expect(stale.status).toBe(503);
        expect(stale.body).toMatchObject({
          error: { code: "registration_unavailable", reason: "unavailable" },
        });
        proxy.restore();
        lines.length = 0;
        expectLimited(await register(lone, ip));
        expect(lines.join("\n")).toContain('"stage":"early_limiter"');
        expect(await attemptsOf(ip)).toBe(10);
      } finally {
        time.now -= 1_000; // the other tests' days start on the file's second
        await lone.close();
        await handle.close();
        await proxy.close();
      }
    });

    it("the 11th attempt in a minute from one address across two nodes, refused by the persisted count", async () => {
      await open({ perIpDaily: 100 });
      const ip = publicIp();
      for (let i = 0; i < 10; i++) expect((await register(i % 2 ? twin : origin, ip)).status).toBe(201);
      logLines.length = 0;
      const retryAfter = expectLimited(await register(origin, ip));
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(logLines.join("\n")).toContain('"stage":"admission"');
      expect(await attemptsOf(ip)).toBe(10);
      // Another address is not affected.
      expect((await register(origin, publicIp())).status).toBe(201);
    });

    it("attempts from one address sent at once to two nodes: exactly 10 admitted in the minute", async () => {
      await open({ perIpDaily: 100 });
      const ip = publicIp();
      // 7 a node: each node's early limiter lets them all through; the persisted count decides.
      const responses = await Promise.all(
        Array.from({ length: 14 }, (_, i) => register(i % 2 ? twin : origin, ip)),
      );
      const statuses = responses.map((response) => response.status).sort();
      expect(statuses).toEqual([...Array(10).fill(201), ...Array(4).fill(429)]);
      for (const response of responses) if (response.status === 429) expectLimited(response);
      expect(await attemptsOf(ip)).toBe(10);
    });

    it("the global attempt limit across two nodes, counted in the database", async () => {
      await open({ attemptsGlobalPerMinute: 4 });
      for (let i = 0; i < 4; i++)
        expect((await register(i % 2 ? twin : origin, publicIp())).status).toBe(201);
      logLines.length = 0;
      expectLimited(await register(origin, publicIp()));
      expect(logLines.join("\n")).toContain('"stage":"admission"');
    });

    it("the 4th registration of the UTC day from one address, without counting an attempt", async () => {
      await open();
      const ip = publicIp();
      for (let i = 0; i < 3; i++) expect((await register(origin, ip)).status).toBe(201);
      const before = await counters();
      const retryAfter = expectLimited(await register(origin, ip));
      // Until the next UTC midnight: the clock stands at 10:00:05.
      expect(retryAfter).toBe(14 * 3600 - 5);
      expect(await counters()).toEqual(before);
      // An IPv6 client is one group per /64: another address in it shares the quota.
      for (let i = 1; i <= 3; i++)
        expect((await register(origin, `2a00:1450:4001:77::${i}`)).status).toBe(201);
      expectLimited(await register(origin, "2a00:1450:4001:77:ffff::9"));
      expect((await register(origin, "2a00:1450:4001:78::1")).status).toBe(201);
    });

    it("the day's network-wide quota, without counting an attempt", async () => {
      await open({ networkDaily: 2 });
      for (let i = 0; i < 2; i++) expect((await register(origin, publicIp())).status).toBe(201);
      const before = await counters();
      expectLimited(await register(origin, publicIp()));
      expect(await counters()).toEqual(before);
    });
  });

  it("holds the quotas exactly when two nodes issue at once (the lock is in the database, not the node)", async () => {
    await open({ networkDaily: 12, attemptsGlobalPerMinute: 1000 });
    const addresses = Array.from({ length: 8 }, () => publicIp());
    const requests = addresses.flatMap((ip) =>
      Array.from({ length: 8 }, (_, i) => ({ ip, node: i % 2 ? twin : origin })),
    );
    const before = await counters();
    const responses = await Promise.all(requests.map(({ ip, node }) => register(node, ip)));
    const created = responses.flatMap((response, i) => (response.status === 201 ? [requests[i]!.ip] : []));
    expect(created).toHaveLength(12);
    for (const ip of addresses) expect(created.filter((from) => from === ip).length).toBeLessThanOrEqual(3);
    const after = await counters();
    expect(after.issued - before.issued).toBe(12);
    expect(after.identities - before.identities).toBe(12);
  });

  it("a provisioning that fails after admission still consumes the attempt", async () => {
    // The attempt is committed before provisioning (docs/api.md#registration-quotas-and-counters).
    await open({ keyReserve: 0 });
    const ip = publicIp();
    // A real busy pool: every free key is row-locked by a transaction held open here.
    let response: TestResponse | undefined;
    await db().transaction(async (tx) => {
      await tx.execute(sql`select key_ref from key_pool where status = 'free' for update`);
      response = await register(origin, ip);
    });
    expect(response!.status).toBe(503);
    expect(response!.body).toMatchObject({
      error: { code: "registration_unavailable", reason: "unavailable" },
    });
    const [row] = await queryRows<{ n: number }>(
      db(),
      sql`select coalesce(sum(count), 0)::int as n from registration_attempts
          where ip_group = ${hashIpGroup(IP_SECRET, ip)}`,
    );
    expect(row!.n).toBe(1);
    expect(
      (
        await queryRows<{ n: number }>(
          db(),
          sql`select count(*)::int as n from registration_admissions where ip_group = ${hashIpGroup(IP_SECRET, ip)}`,
        )
      )[0]!.n,
    ).toBe(0);
  });

  describe("with the proof of work on (AGENT_REGISTRATION_POW_BITS=8)", () => {
    let proofOrigin: TestOrigin;
    beforeAll(async () => {
      proofOrigin = await startTestOrigin({
        database: testDb.handle,
        env: { ...ENV, AGENT_REGISTRATION_POW_BITS: "8" },
        clock,
      });
    });
    afterAll(async () => {
      await proofOrigin?.close();
    });

    /** The 428's challenge, solved: the header value the client sends back. */
    const solve = async (
      response: TestResponse,
    ): Promise<{ challenge: string; bits: number; proof: string }> => {
      expect(response.status).toBe(428);
      expect(response.headers["cache-control"]).toBe("no-store");
      const { code, challenge, bits } = (response.body as Envelope).error as unknown as {
        code: string;
        challenge: string;
        bits: number;
      };
      expect(code).toBe("registration_proof_required");
      return { challenge, bits, proof: `${challenge}.${await solveChallenge({ challenge, bits })}` };
    };
    const withProof = (proof: string) => ({ headers: { [HEADER_REGISTRATION_PROOF]: proof } });

    // Mutation: the gate letting a request without a valid proof through (judge answering ok)
    // fails the first expectation: the request registers.
    it("answers 428 with a challenge, counting nothing; the solved challenge registers", async () => {
      await open();
      const ip = publicIp();
      const before = await counters();
      const { bits, proof } = await solve(await register(proofOrigin, ip));
      expect(bits).toBe(8);
      expect(await counters()).toEqual(before);
      const created = await register(proofOrigin, ip, withProof(proof));
      expect(created.status).toBe(201);
      expect((created.body as Created).capabilities).toEqual(["read", "transfer"]);
    });

    // Mutation: a MAC without the IP group lets the other address register with it.
    it("refuses a solution made for another address, and a spent one, each with a fresh challenge", async () => {
      await open();
      const ip = publicIp();
      const { challenge, proof } = await solve(await register(proofOrigin, ip));
      const before = await counters();
      await solve(await register(proofOrigin, publicIp(), withProof(proof)));
      expect(await counters()).toEqual(before);
      expect((await register(proofOrigin, ip, withProof(proof))).status).toBe(201);
      // Spent: the address's count moved on, so the same solution is answered with a new challenge.
      const replay = await solve(await register(proofOrigin, ip, withProof(proof)));
      expect(replay.challenge).not.toBe(challenge);
      expect((await register(proofOrigin, ip, withProof(replay.proof))).status).toBe(201);
    });

    // Mutation: issuance not checking under the policy lock that the group's count is still the
    // challenge's: three of the identical requests register (the address's day allows 3).
    it("one solution sent 6 times at once registers once", async () => {
      await open();
      const ip = publicIp();
      const { proof } = await solve(await register(proofOrigin, ip));
      // All six pass every check before the lock (none has registered yet) and then queue on the
      // policy row lock, held here until they all wait: the count under the lock decides.
      const sent: Promise<TestResponse>[] = [];
      await db().transaction(async (tx) => {
        await tx.execute(sql`select 1 from registration_policy where id = 1 for update`);
        for (let i = 0; i < 6; i++) sent.push(register(proofOrigin, ip, withProof(proof)));
        await waitUntilBlockedBy(db(), {
          holder: await backendPid(tx),
          statement: POLICY_LOCK,
          count: 6,
          what: "every request queues at the policy row's lock",
        });
      });
      const statuses = (await Promise.all(sent)).map((response) => response.status).sort();
      expect(statuses).toEqual([201, 428, 428, 428, 428, 428]);
    });

    // Mutation: challenges asking for the configured bits whatever the day's fill fails this.
    it("asks for a bit more for each halving of the day's network-wide quota left", async () => {
      await open({ networkDaily: 8 });
      const bitsNow = async (): Promise<number> =>
        (await solve(await register(proofOrigin, publicIp()))).bits;
      const registerOne = async (): Promise<void> => {
        const ip = publicIp();
        const { proof } = await solve(await register(proofOrigin, ip));
        expect((await register(proofOrigin, ip, withProof(proof))).status).toBe(201);
      };
      expect(await bitsNow()).toBe(8); // 8 of 8 left
      for (let i = 0; i < 4; i++) await registerOne();
      expect(await bitsNow()).toBe(9); // 4 left: half
      for (let i = 0; i < 2; i++) await registerOne();
      expect(await bitsNow()).toBe(10); // 2 left: a quarter
      await registerOne();
      expect(await bitsNow()).toBe(11); // 1 left: an eighth
    });

    /** Challenges for `count` new addresses, all asked for now, and solved: a client's stock. */
    const stockOfProofs = async (count: number): Promise<{ ip: string; proof: string; bits: number }[]> => {
      await seedFreeKeys(db(), count); // keys for every one of them, whatever earlier tests took
      const stock: { ip: string; proof: string; bits: number }[] = [];
      for (let i = 0; i < count; i++) {
        const ip = publicIp();
        stock.push({ ip, ...(await solve(await register(proofOrigin, ip))) });
      }
      return stock;
    };

    // docs/security.md: the last slots of a day cost the most. Solutions asked for while the day
    // was empty, kept and sent once half of it is taken, must not pass at the empty day's price.
    it("refuses a solution of a challenge asked for while the day was emptier, once the day asks for more bits, counting nothing", async () => {
      await open({ networkDaily: 8 });
      const stock = await stockOfProofs(8);
      expect(stock.map((held) => held.bits)).toEqual(Array(8).fill(8));
      for (const held of stock.slice(0, 4)) {
        expect((await register(proofOrigin, held.ip, withProof(held.proof))).status).toBe(201);
      }
      // 4 of 8 left: a registration now costs 9 bits.
      const late = stock[4]!;
      const before = await counters();
      const fresh = await solve(await register(proofOrigin, late.ip, withProof(late.proof)));
      expect(fresh.bits).toBe(9);
      expect(await counters()).toEqual(before);
      expect((await register(proofOrigin, late.ip, withProof(fresh.proof))).status).toBe(201);
    });

    // The same, sent at once: every request passes the check before the lock against the empty
    // day, so only the check under the lock can tell which of them the day's fill has outpriced.
    it("of 8 cheap solutions sent at once, registers only the 4 the day's fill still lets pass at their bits", async () => {
      await open({ networkDaily: 8 });
      const stock = await stockOfProofs(8);
      const sent: Promise<TestResponse>[] = [];
      await db().transaction(async (tx) => {
        await tx.execute(sql`select 1 from registration_policy where id = 1 for update`);
        for (const held of stock) sent.push(register(proofOrigin, held.ip, withProof(held.proof)));
        await waitUntilBlockedBy(db(), {
          holder: await backendPid(tx),
          statement: POLICY_LOCK,
          count: 8,
          what: "every request queues at the policy row's lock",
        });
      });
      const responses = await Promise.all(sent);
      expect(responses.map((response) => response.status).sort()).toEqual([
        201, 201, 201, 201, 428, 428, 428, 428,
      ]);
      for (const refused of responses.filter((response) => response.status === 428)) {
        expect(((refused.body as Envelope).error as unknown as { bits: number }).bits).toBe(9);
      }
    });
  });

  it("answers 404 to another method, and to the legacy GET {base}/faucet", async () => {
    await open();
    const get = await send(`${origin.base}/agent/v1/register`);
    expect(get.status).toBe(404);
    expect((get.body as Envelope).error.code).toBe("not_found");
    const legacy = await send(`${origin.base}/faucet`);
    expect(legacy.status).toBe(404);
  });

  it("is 404 with the gateway switch off", async () => {
    await open();
    const off = await startTestOrigin({
      database: testDb.handle,
      env: { ...ENV, AGENT_GATEWAY_ENABLED: "false" },
    });
    try {
      const response = await register(off, publicIp());
      expect(response.status).toBe(404);
    } finally {
      await off.close();
    }
  });
});
