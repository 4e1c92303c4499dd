import { randomBytes } from "node:crypto";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevnet } from "../../devnet/index.ts";
import { RPC_READ_ALLOWLIST } from "../../shared/constants.ts";
import { sleep } from "../../shared/sleep.ts";
import { startCountingPassThrough } from "../../testing/counting-pass-through.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { send, sendUnchecked } from "../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { createGatewayLimiters } from "./limits.ts";

type Devnet = Awaited<ReturnType<typeof startDevnet>>;
type ErrorEnvelope = { error: { code: string; message: string; request_id: string } };
type RpcReply = {
  jsonrpc: string;
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
};

const POLICY = { allowed_methods: [...RPC_READ_ALLOWLIST], max_batch: 100, max_batch_bytes: 65536 };

async function devRpc(devnet: Devnet, method: string, params: unknown[]): Promise<unknown> {
  const response = await fetch(devnet.url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  return ((await response.json()) as { result: unknown }).result;
}

/** Adjacent concurrent blocks run at once; each block's tests run as it marks them. */
const BESIDE = { concurrent: true } as const;

describe("gateway over HTTP (real database and devnet)", () => {
  let testDb: TestDatabase;
  let devnet: Devnet;
  let origin: TestOrigin;
  let proxied: TestOrigin;
  const logLines: string[] = [];
  const tokens: Record<"read" | "all" | "transfer", { token: string; agentId: string; wallet: string }> =
    {} as never;

  async function issue(capabilities: string[]) {
    const result = await provisionedIdentity(testDb.handle.db, { capabilities, origin: "operator" });
    return { token: result.token, agentId: result.agentId, wallet: result.assignedWallet };
  }
  const auth = (token: string) => ({ authorization: `Bearer ${token}` });
  /**
   * Retry-After of a 60-second sliding window counted in whole seconds: 60 less the seconds between
   * the first counted event and the refusal. `first` and `last` bracket those two requests (sent
   * at, answered at), which bounds the value from both sides; the body must say the same.
   */
  type Span = { sent: number; answered: number };
  const sec = (ms: number) => Math.floor(ms / 1000);
  const timed = async <T>(request: () => Promise<T>): Promise<{ response: T; span: Span }> => {
    const sent = Date.now();
    const response = await request();
    return { response, span: { sent, answered: Date.now() } };
  };
  const expectRetryAfter = (
    limited: { headers: Record<string, unknown>; body: unknown },
    first: Span,
    last: Span,
  ) => {
    const retryAfter = Number(limited.headers["retry-after"]);
    expect(retryAfter).toBeGreaterThanOrEqual(60 - (sec(last.answered) - sec(first.sent)));
    expect(retryAfter).toBeLessThanOrEqual(60 - (sec(last.sent) - sec(first.answered)));
    expect(limited.body).toMatchObject({ error: { code: "rate_limited", retry_after: retryAfter } });
  };

  beforeAll(async () => {
    testDb = await createTestDatabase();
    devnet = await startDevnet({ port: 0 });
    origin = await startTestOrigin({
      database: testDb.handle,
      rpcUrl: devnet.url,
      onLogLine: (line) => logLines.push(line),
    });
    proxied = await startTestOrigin({
      database: testDb.handle,
      rpcUrl: devnet.url,
      env: { AGENT_TRUSTED_PROXIES: "127.0.0.1/32" },
    });
    await seedFreeKeys(testDb.handle.db, 24);
    tokens.read = await issue(["read"]);
    tokens.all = await issue(["read", "faucet", "transfer"]);
    tokens.transfer = await issue(["read", "transfer"]);
  });
  afterAll(async () => {
    await origin?.close();
    await proxied?.close();
    await devnet?.close();
    await testDb?.drop();
  });

  describe("authentication", () => {
    it("answers every kind of bad token with one identical 401", async () => {
      const revoked = await issue(["read"]);
      const disabled = await issue(["read"]);
      await testDb.handle.db.execute(
        sql`update agent_identities set revoked = true where agent_id = ${revoked.agentId}`,
      );
      await testDb.handle.db.execute(
        sql`update agent_identities set enabled = false where agent_id = ${disabled.agentId}`,
      );
      const [, id] = /^agt_([0-9a-f]{32})_/.exec(tokens.read.token)!;
      const cases: Record<string, Record<string, string>> = {
        missing: {},
        malformed: { authorization: "Bearer not-a-token" },
        wrongScheme: { authorization: `Basic ${tokens.read.token}` },
        unknown: auth(`agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`),
        wrongSecret: auth(`agt_${id}_${randomBytes(32).toString("hex")}`),
        revoked: auth(revoked.token),
        disabled: auth(disabled.token),
      };
      const bodies = new Set<string>();
      for (const [name, headers] of Object.entries(cases)) {
        const response = await send(`${origin.base}/agent/v1/network`, {
          headers,
          localAddress: "127.0.0.10",
        });
        expect(response.status, name).toBe(401);
        const { request_id, ...rest } = (response.body as ErrorEnvelope).error;
        expect(request_id).toMatch(/^req_/);
        bodies.add(JSON.stringify(rest));
      }
      expect([...bodies]).toEqual([
        JSON.stringify({ code: "agent_auth_failed", message: "authentication failed" }),
      ]);
    });

    it("takes the bearer scheme in any case and after any run of spaces (RFC 9110)", async () => {
      for (const scheme of ["bearer ", "BEARER ", "bEaReR   "]) {
        const response = await send(`${origin.base}/agent/v1/network`, {
          headers: { authorization: `${scheme}${tokens.read.token}` },
        });
        expect(response.status, scheme).toBe(200);
      }
      const glued = await send(`${origin.base}/agent/v1/network`, {
        headers: { authorization: `Bearer${tokens.read.token}` },
        localAddress: "127.0.0.11",
      });
      expect(glued.status).toBe(401);
    });

    it("stops a token on the very next request after revocation", async () => {
      const agent = await issue(["read"]);
      expect((await send(`${origin.base}/agent/v1/network`, { headers: auth(agent.token) })).status).toBe(
        200,
      );
      await testDb.handle.db.execute(
        sql`update agent_identities set revoked = true where agent_id = ${agent.agentId}`,
      );
      expect((await send(`${origin.base}/agent/v1/network`, { headers: auth(agent.token) })).status).toBe(
        401,
      );
    });

    it("refuses a read token on every write route with 403, before any feature check", async () => {
      for (const path of ["/faucet", "/transfers", "/x402/authorize"]) {
        const response = await send(`${origin.base}/agent/v1${path}`, {
          method: "POST",
          headers: auth(tokens.read.token),
          body: "{}",
        });
        expect(response.status, path).toBe(403);
        expect((response.body as ErrorEnvelope).error.code).toBe("agent_capability_required");
      }
      const faucetWithoutCapability = await send(`${origin.base}/agent/v1/faucet`, {
        method: "POST",
        headers: auth(tokens.transfer.token),
        body: "{}",
      });
      expect(faucetWithoutCapability.status).toBe(403);
    });
  });

  it("logs every request without the Authorization header, the token or its secret", async () => {
    const agent = await issue(["read"]);
    const secret = agent.token.split("_")[2]!;
    logLines.length = 0;
    await send(`${origin.base}/agent/v1/network`, { headers: auth(agent.token) });
    await send(`${origin.base}/agent/v1/network`, { headers: auth(`${agent.token.slice(0, -4)}0000`) });
    await send(`${origin.base}/agent/v1/network?token=${agent.token}`, { headers: auth(agent.token) });
    const text = logLines.join("");
    expect(logLines.length).toBeGreaterThanOrEqual(4); // three requests and one auth failure
    expect(text).toContain('"route":"/77/agent/v1/network"');
    expect(text).not.toContain("agt_");
    expect(text).not.toContain(secret);
    expect(text.toLowerCase()).not.toContain("authorization");
  });

  it("logs the matched route pattern, never a token a client put in the path or the query", async () => {
    const agent = await issue(["read"]);
    const [, tokenId, secret] = agent.token.split("_");
    logLines.length = 0;
    const paths = {
      "/agent/v1/actions/TOKEN": "/77/agent/v1/actions/:action_id",
      "/agent/v1/TOKEN": "unmatched",
      "/agent/v1/network/TOKEN?token=TOKEN": "unmatched",
      "/agent/v1/network?token=TOKEN": "/77/agent/v1/network",
      "/TOKEN": "unmatched",
    };
    for (const [path, route] of Object.entries(paths)) {
      const url = `${origin.base}${path.replaceAll("TOKEN", agent.token)}`;
      logLines.length = 0;
      await sendUnchecked(url, { headers: auth(agent.token) });
      // Without a token: refused by the gateway's authentication, a middleware of each of its
      // routes, or no route at all; labelled as the request with the token was.
      await sendUnchecked(url, { localAddress: "127.0.0.12" });
      const text = logLines.join("");
      expect(text, path).not.toContain(secret);
      expect(text, path).not.toContain(tokenId);
      const entries = logLines
        .map((line) => JSON.parse(line) as { msg: string; route?: string })
        .filter((entry) => entry.msg === "request");
      expect(entries, path).toHaveLength(2);
      expect(entries[0]!.route, path).toBe(route);
      expect(entries[1]!.route, path).toBe(route);
    }
  });

  describe("rate limits", () => {
    it("keeps a token that worked from an address working while that address sends a bad token a second; a new one gets in through the allowance, the rest wait unread", async () => {
      const from = "127.0.0.40";
      const [known, stranger, another] = [
        await issue(["read"]),
        await issue(["read"]),
        await issue(["read"]),
      ];
      const read = (token: string, localAddress = from) =>
        send(`${origin.base}/agent/v1/network`, { headers: auth(token), localAddress });
      const bad = () =>
        send(`${origin.base}/agent/v1/network`, {
          headers: auth(`agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`),
          localAddress: from,
        });
      expect((await read(known.token)).status).toBe(200);
      for (let i = 0; i < 60; i++) expect((await bad()).status).toBe(401);
      for (let second = 0; second < 3; second++) {
        expect((await bad()).status).toBe(429);
        expect((await read(known.token)).status).toBe(200);
        await sleep(1_000);
      }
      // Those three bad tokens used up the first lane: a token new to the address is told to come
      // back in a second, and then gets in; it works from elsewhere meanwhile.
      const told = await read(stranger.token);
      expect(told.status).toBe(429);
      expect(told.headers["retry-after"]).toBe("1");
      expect((await read(stranger.token, "127.0.0.41")).status).toBe(200);
      await sleep(1_000);
      expect((await read(stranger.token)).status).toBe(200);

      // Past the limit, a refusal reads nothing: with the token table locked, a request that read
      // it would wait for the lock; these are answered at once.
      const BLOCKED = "still waiting: it reads the database";
      const within = <T>(request: Promise<T>) =>
        Promise.race([request, new Promise<string>((resolve) => setTimeout(() => resolve(BLOCKED), 2_000))]);
      const whileLocked: unknown[] = [];
      await testDb.handle.db.transaction(async (tx) => {
        await tx.execute(sql`lock table agent_tokens in access exclusive mode`);
        whileLocked.push(await within(bad().then((r) => r.status)));
        whileLocked.push(await within(read(another.token).then((r) => r.status)));
      });
      expect(whileLocked).toEqual([429, 429]);
    });

    // The test whose addresses send a bad token a second (about 6 s) runs beside the limits that
    // need no wait (vitest runs adjacent concurrent blocks at once): each test comes from addresses
    // of its own, the windows and the allowance are kept per address, and the agent of the 601st
    // request is its own. The two tests that lock the token table run before and after, alone.
    describe("a bad token a second", BESIDE, () => {
      it.sequential("admits a fresh valid token behind an address that sends one bad token a second", async () => {
        // Mutation: bearerAuth reading no token past the limit but those that worked from the
        // address (no LockoutAllowance) answers the fresh token 429 every time.
        const badToken = () => `agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`;
        const networkFrom = (localAddress: string, token: string) =>
          sendUnchecked(`${origin.base}/agent/v1/network`, { headers: auth(token), localAddress });
        /** A client that follows Retry-After: its statuses until it is let in (at most 3 tries). */
        const untilAdmitted = async (localAddress: string, token: string): Promise<number[]> => {
          const statuses: number[] = [];
          for (let attempt = 0; attempt < 3; attempt++) {
            const answer = await networkFrom(localAddress, token);
            statuses.push(answer.status);
            if (answer.status !== 429) break;
            await sleep(Number(answer.headers["retry-after"]) * 1_000);
          }
          return statuses;
        };
        const withJunk = async <T>(
          address: string,
          junk: () => string,
          steps: () => Promise<T>,
        ): Promise<T> => {
          for (let i = 0; i < 60; i++) expect((await networkFrom(address, junk())).status).toBe(401);
          const sent: Array<Promise<unknown>> = [];
          const timer = setInterval(() => sent.push(networkFrom(address, junk())), 1_000);
          try {
            await sleep(4_500);
            return await steps();
          } finally {
            clearInterval(timer);
            await Promise.all(sent);
          }
        };

        // The two junk senders below run at once: each from its own address, and the failure limit
        // and the allowance are kept per address (shared/lockout-allowance.ts).
        const fresh = await issue(["read"]);
        const revoked = badToken();
        const other = await issue(["read"]);
        const [scanned, repeated] = await Promise.all([
          // A new bad token every second (a scanner): the fresh token is let in once it comes back.
          withJunk("127.0.0.42", badToken, async () => {
            const statuses = await untilAdmitted("127.0.0.42", fresh.token);
            for (let i = 0; i < 3; i++) statuses.push((await networkFrom("127.0.0.42", fresh.token)).status);
            return statuses;
          }),
          // One bad token over and over (a job with a revoked token): the fresh token is let in at once.
          withJunk(
            "127.0.0.43",
            () => revoked,
            () => untilAdmitted("127.0.0.43", other.token),
          ),
        ]);
        expect(scanned.slice(-4)).toEqual([200, 200, 200, 200]);
        expect(scanned.length).toBeLessThanOrEqual(5);
        expect(repeated).toEqual([200]);
      });
    });

    describe("beside the bad token a second", BESIDE, () => {
      it.sequential("429s the 61st failed authentication from one IP, leaves other IPs alone, and ignores a spoofed X-Forwarded-For", async () => {
        const bad = auth(`agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`);
        const from = "127.0.0.20";
        const attempt = () => send(`${origin.base}/agent/v1/network`, { headers: bad, localAddress: from });
        const first = await timed(attempt);
        expect(first.response.status).toBe(401);
        // The first failure ages: the answer must count down from it, not always say 60.
        await sleep(2_100);
        for (let i = 1; i < 60; i++) expect((await attempt()).status).toBe(401);
        const limited = await timed(attempt);
        expect(limited.response.status).toBe(429);
        expectRetryAfter(limited.response, first.span, limited.span);
        // Once blocked, a valid token that has not worked from that IP lately is read only through
        // the address's small allowance past the limit (lockout-allowance.ts): here it has room.
        const valid = await send(`${origin.base}/agent/v1/network`, {
          headers: auth(tokens.read.token),
          localAddress: from,
        });
        expect(valid.status).toBe(200);

        const spoofed = await send(`${origin.base}/agent/v1/network`, {
          headers: { ...bad, "x-forwarded-for": "198.51.100.77" },
          localAddress: from,
        });
        expect(spoofed.status).toBe(429);

        const other = await send(`${origin.base}/agent/v1/network`, {
          headers: bad,
          localAddress: "127.0.0.21",
        });
        expect(other.status).toBe(401);
      });

      it.sequential("holds the 60-failure limit when 100 bad requests from one IP arrive at once", async () => {
        const responses = await Promise.all(
          Array.from({ length: 100 }, () =>
            send(`${origin.base}/agent/v1/network`, {
              headers: auth(`agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`),
              localAddress: "127.0.0.30",
            }),
          ),
        );
        const statuses = responses.map((response) => response.status);
        expect(statuses.filter((status) => status === 401)).toHaveLength(60);
        expect(statuses.filter((status) => status === 429)).toHaveLength(40);
      });

      it.sequential("selects the client from X-Forwarded-For when the peer is a trusted proxy", async () => {
        const bad = auth(`agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`);
        const via = (client: string) => ({ ...bad, "x-forwarded-for": `${client}, 127.0.0.1` });
        for (let i = 0; i < 60; i++) {
          expect(
            (await send(`${proxied.base}/agent/v1/network`, { headers: via("203.0.113.5") })).status,
          ).toBe(401);
        }
        expect((await send(`${proxied.base}/agent/v1/network`, { headers: via("203.0.113.5") })).status).toBe(
          429,
        );
        expect((await send(`${proxied.base}/agent/v1/network`, { headers: via("203.0.113.6") })).status).toBe(
          401,
        );
      });

      it.sequential("counts an IPv6 client's failures per /64: another address in it is limited too", async () => {
        const bad = auth(`agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`);
        const via = (client: string) => ({ ...bad, "x-forwarded-for": client });
        for (let i = 0; i < 60; i++) {
          const from = `2001:db8:77:1::${(i + 1).toString(16)}`;
          expect((await send(`${proxied.base}/agent/v1/network`, { headers: via(from) })).status).toBe(401);
        }
        const sameSite = await send(`${proxied.base}/agent/v1/network`, {
          headers: via("2001:db8:77:1:ffff::9"),
        });
        expect(sameSite.status).toBe(429);
        const otherSite = await send(`${proxied.base}/agent/v1/network`, {
          headers: via("2001:db8:77:2::1"),
        });
        expect(otherSite.status).toBe(401);
      });

      it.sequential("429s an agent's 601st request in the window", async () => {
        const agent = await issue(["read"]);
        const read = () => send(`${origin.base}/agent/v1/network`, { headers: auth(agent.token) });
        const first = await timed(read);
        expect(first.response.status).toBe(200);
        for (let i = 1; i < 600; i++) {
          const response = await read();
          if (response.status !== 200) throw new Error(`request ${i + 1} answered ${response.status}`);
        }
        const limited = await timed(read);
        expect(limited.response.status).toBe(429);
        expectRetryAfter(limited.response, first.span, limited.span);
        // Another agent is not affected.
        expect(
          (await send(`${origin.base}/agent/v1/network`, { headers: auth(tokens.read.token) })).status,
        ).toBe(200);
      });
    });

    it("holds back no valid request from one IP while 100 wait on a slow database at once", async () => {
      const agent = await issue(["read"]);
      let responses: Promise<{ status: number }[]> | undefined;
      // A real slow database: the token table is locked, so every lookup waits until the lock goes.
      await testDb.handle.db.transaction(async (tx) => {
        await tx.execute(sql`lock table agent_tokens in access exclusive mode`);
        responses = Promise.all(
          Array.from({ length: 100 }, () =>
            send(`${origin.base}/agent/v1/network`, {
              headers: auth(agent.token),
              localAddress: "127.0.0.31",
            }),
          ),
        );
        await sleep(500);
      });
      const statuses = (await responses!).map((response) => response.status);
      expect(statuses).toEqual(Array(100).fill(200));
    });
  });

  describe("network and balance", () => {
    it("describes the chain, the caller, the allowlist, the limits and the features", async () => {
      const response = await send(`${origin.base}/agent/v1/network`, { headers: auth(tokens.all.token) });
      expect(response.status).toBe(200);
      expect(response.headers["content-type"]).toBe("application/json");
      expect(response.body).toMatchObject({
        api_version: "v1",
        chain: {
          chain_id: 77,
          caip2: "eip155:77",
          native_token: { symbol: "USDC", decimals: 6 },
          latest_block: expect.stringMatching(/^\d+$/),
        },
        agent: {
          agent_id: tokens.all.agentId,
          assigned_wallet: tokens.all.wallet,
          capabilities: ["read", "faucet", "transfer"],
          spending_policy: false,
        },
        rpc: POLICY,
        limits: {
          failed_auth_per_ip: { limit: 60, window_seconds: 60 },
          requests_per_agent: { limit: 600, window_seconds: 60 },
          transfer: { per_tx_units: "0", daily_units: "0" },
          // Every limit an agent meets, the x402 day's count too (AGENT_X402_DAILY_LIMIT, 1000 by default).
          x402: { max_timeout_seconds: 180, daily_limit: 1000 },
        },
        features: { faucet: false, transfers: false, x402: false, registration: false },
      });
    });

    it("reads the assigned wallet's balance in units and wei, with the block", async () => {
      await devRpc(devnet, "dev_setBalance", [
        tokens.read.wallet,
        `0x${(2_500_000n * 10n ** 12n + 7n).toString(16)}`,
      ]);
      const response = await send(`${origin.base}/agent/v1/balance`, { headers: auth(tokens.read.token) });
      expect(response.status).toBe(200);
      const block = BigInt((await devRpc(devnet, "eth_blockNumber", [])) as string);
      expect(response.body).toEqual({
        address: tokens.read.wallet,
        balance: "2500000",
        decimals: 6,
        symbol: "USDC",
        balance_wei: (2_500_000n * 10n ** 12n + 7n).toString(),
        block_number: block.toString(),
      });
    });
  });

  describe("rpc proxy", () => {
    const rpc = (body: unknown, token = tokens.read.token) =>
      send(`${origin.base}/agent/v1/rpc`, {
        method: "POST",
        headers: auth(token),
        body: JSON.stringify(body),
      });
    const call = (id: number, method: string, params: unknown[] = []) => ({
      jsonrpc: "2.0",
      id,
      method,
      params,
    });

    it("answers an allowed call, including eth_getBalance of any address", async () => {
      const stranger = `0x${randomBytes(20).toString("hex")}`;
      await devRpc(devnet, "dev_setBalance", [stranger, "0x2a"]);
      const response = await rpc(call(7, "eth_getBalance", [stranger, "latest"]));
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ jsonrpc: "2.0", id: 7, result: "0x2a" });
      expect(await rpc(call(8, "eth_chainId"))).toMatchObject({ body: { id: 8, result: "0x4d" } });
    });

    it.each(["eth_sendRawTransaction", "eth_sendTransaction", "personal_sign", "dev_setBalance", "eth_call"])(
      "refuses %s with the allowlist, even for a token with every capability",
      async (method) => {
        const response = await rpc(call(1, method, ["0x00"]), tokens.all.token);
        expect(response.body).toEqual({
          jsonrpc: "2.0",
          id: 1,
          error: { code: -32601, message: `method '${method}' is not allowed`, data: POLICY },
        });
      },
    );

    it("answers every element of a mixed batch, in order", async () => {
      const response = await rpc([
        call(1, "eth_blockNumber"),
        call(2, "eth_sendRawTransaction", ["0x00"]),
        { jsonrpc: "2.0", id: 3 },
        call(4, "eth_chainId"),
      ]);
      const replies = response.body as RpcReply[];
      expect(replies.map((reply) => reply.id)).toEqual([1, 2, 3, 4]);
      expect(replies[0]!.result).toMatch(/^0x/);
      expect(replies[1]!.error).toMatchObject({ code: -32601, data: POLICY });
      expect(replies[2]!.error).toMatchObject({ code: -32600, data: POLICY });
      expect(replies[3]!.result).toBe("0x4d");
    });

    it("the served OpenAPI document states the batch limits /rpc enforces: its largest batch is answered, one more refused", async () => {
      // Mutation: a document whose batch schema has no maxItems (a generated client sends 101).
      type Schema = {
        $ref?: string;
        type?: string;
        maxItems?: number;
        minItems?: number;
        description?: string;
      };
      const document = (await send(`${origin.base}/agent/v1/openapi.json`)).body as {
        paths: Record<
          string,
          { post: { requestBody: { content: Record<string, { schema: { oneOf: Schema[] } }> } } }
        >;
        components: { schemas: Record<string, Schema> };
      };
      const resolve = (schema: Schema): Schema =>
        schema.$ref ? document.components.schemas[schema.$ref.split("/").pop()!]! : schema;
      const batch = document.paths["/agent/v1/rpc"]!.post.requestBody.content[
        "application/json"
      ]!.schema.oneOf.map(resolve).find((schema) => schema.type === "array")!;
      expect(batch).toMatchObject({ minItems: 1, maxItems: 100 });
      expect(batch.description).toContain("65536 bytes");
      const largest = await rpc(Array.from({ length: batch.maxItems! }, (_, i) => call(i, "eth_chainId")));
      expect((largest.body as RpcReply[]).map((reply) => reply.result)).toEqual(
        Array.from({ length: batch.maxItems! }, () => "0x4d"),
      );
      const over = await rpc(Array.from({ length: batch.maxItems! + 1 }, (_, i) => call(i, "eth_chainId")));
      expect(over.body).toEqual({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32600, message: "batch exceeds 100 requests", data: POLICY },
      });
    });

    it("refuses a batch of 101 and a body over 64 KB before any upstream call, even while the body streams", async () => {
      const counter = await startCountingPassThrough(devnet.url);
      const counted = await startTestOrigin({ database: testDb.handle, rpcUrl: counter.url });
      const rpcTo = (body: unknown, headers: Record<string, string> = {}) =>
        send(`${counted.base}/agent/v1/rpc`, {
          method: "POST",
          headers: { ...auth(tokens.read.token), ...headers },
          body: JSON.stringify(body),
        });
      try {
        // The proxy is in the path: an allowed call is counted.
        expect((await rpcTo(call(1, "eth_chainId"))).body).toMatchObject({ result: "0x4d" });
        expect(counter.calls).toBe(1);
        const before = counter.calls;

        const tooMany = await rpcTo(Array.from({ length: 101 }, (_, i) => call(i, "eth_chainId")));
        expect(tooMany.body).toEqual({
          jsonrpc: "2.0",
          id: null,
          error: { code: -32600, message: "batch exceeds 100 requests", data: POLICY },
        });
        const padding = "0".repeat(700);
        const tooBig = Array.from({ length: 100 }, (_, i) =>
          call(i, "eth_getBalance", [`0x${padding}`, "latest"]),
        );
        expect(JSON.stringify(tooBig).length).toBeGreaterThan(65_536);
        expect((await rpcTo(tooBig)).body).toEqual({
          jsonrpc: "2.0",
          id: null,
          error: { code: -32600, message: "request exceeds 65536 bytes", data: POLICY },
        });
        // Without a declared length (chunked), the limit holds while the body streams in.
        const streamed = await rpcTo(tooBig, { "transfer-encoding": "chunked" });
        expect(streamed.body).toMatchObject({
          error: { code: -32600, message: "request exceeds 65536 bytes" },
        });

        // An endless chunked body: the origin stops it while the client is still sending. It either
        // answers the refusal first, or closes the connection before the client has read that
        // answer (the client's next write then fails with EPIPE or ECONNRESET): which one the
        // client sees first depends on scheduling. Either way the body was never buffered whole.
        type Endless =
          | { kind: "answered"; status: number; body: string; sent: number }
          | { kind: "closed"; sent: number };
        const endless = await new Promise<Endless>((resolve, reject) => {
          let sent = 0;
          const req = request(`${counted.base}/agent/v1/rpc`, {
            method: "POST",
            headers: {
              ...auth(tokens.read.token),
              "content-type": "application/json",
              "transfer-encoding": "chunked",
            },
            agent: false,
          });
          const chunk = Buffer.from(`[${'{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},'.repeat(300)}`);
          const pump = setInterval(() => {
            if (sent > 64 * 1024 * 1024) {
              clearInterval(pump);
              reject(new Error("64 MiB sent and no answer: the body is being buffered"));
              return;
            }
            req.write(chunk);
            sent += chunk.length;
          }, 1);
          req.on("response", (res) => {
            clearInterval(pump);
            const parts: Buffer[] = [];
            res.on("data", (part: Buffer) => parts.push(part));
            res.on("end", () => {
              resolve({
                kind: "answered",
                status: res.statusCode ?? 0,
                body: Buffer.concat(parts).toString("utf8"),
                sent,
              });
              req.destroy();
            });
          });
          req.on("error", (error: NodeJS.ErrnoException) => {
            clearInterval(pump);
            if (error.code === "EPIPE" || error.code === "ECONNRESET") resolve({ kind: "closed", sent });
            else reject(error);
          });
        });
        expect(endless.sent).toBeGreaterThan(65_536);
        expect(endless.sent).toBeLessThan(64 * 1024 * 1024);
        if (endless.kind === "answered") {
          expect(endless.status).toBe(413);
          expect(JSON.parse(endless.body)).toMatchObject({
            error: { code: -32600, message: "request exceeds 65536 bytes" },
          });
        }
        expect(counter.calls).toBe(before);
      } finally {
        await counted.close();
        await counter.close();
      }
    });

    it("caps /rpc calls in flight per agent (4) and per node (16): 429 with retry_after past them", async ({
      expect,
    }) => {
      // A chain that holds each call until the test lets it answer, so the calls admitted stay in
      // flight however slowly this machine runs the rest. It answered after a fixed 700 ms, and the
      // test waited a fixed 300 ms for its 16 calls to be admitted: on a loaded machine a call
      // admitted late, or one answered before the extra was admitted, let the extra in.
      let holding = true;
      const held: Array<() => void> = [];
      const slow = createServer((req, res) => {
        req.resume();
        req.on("end", () => {
          const answer = (): void => {
            res
              .writeHead(200, { "content-type": "application/json" })
              .end('{"jsonrpc":"2.0","id":0,"result":"0x4d"}');
          };
          if (holding) held.push(answer);
          else answer();
        });
      });
      const answerHeld = (): void => {
        holding = false;
        for (const answer of held.splice(0)) answer();
      };
      await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
      // The origin's own /rpc limiter, read only to know when the calls have been admitted.
      const limiters = createGatewayLimiters();
      const admitted = () => limiters.rpcInFlight.size;
      const target = await startTestOrigin({
        database: testDb.handle,
        rpcUrl: `http://127.0.0.1:${(slow.address() as AddressInfo).port}`,
        limiters,
      });
      const callAs = (token: string) =>
        send(`${target.base}/agent/v1/rpc`, {
          method: "POST",
          headers: auth(token),
          body: JSON.stringify(call(1, "eth_chainId")),
        });
      try {
        let answered = 0;
        const five = Array.from({ length: 5 }, () =>
          callAs(tokens.read.token).then((response) => {
            answered++;
            return response;
          }),
        );
        // Four admitted and held by the chain, the fifth answered at once.
        await expect.poll(() => ({ admitted: admitted(), answered })).toEqual({ admitted: 4, answered: 1 });
        answerHeld();
        const one = await Promise.all(five);
        expect(one.filter((r) => r.status === 200)).toHaveLength(4);
        const [limited] = one.filter((r) => r.status === 429);
        expect(limited!.headers["retry-after"]).toBe("1");
        expect(limited!.body).toMatchObject({ error: { code: "rate_limited", retry_after: 1 } });

        const agents = [
          tokens.read,
          tokens.all,
          tokens.transfer,
          await issue(["read"]),
          await issue(["read"]),
        ];
        // Every slot of the first calls given back (once their answers have left), then 16 held.
        await expect.poll(admitted).toBe(0);
        holding = true;
        const first = agents
          .slice(0, 4)
          .flatMap((agent) => Array.from({ length: 4 }, () => callAs(agent.token)));
        await expect
          .poll(() => ({ admitted: admitted(), held: held.length }))
          .toEqual({ admitted: 16, held: 16 });
        // The chain answers at once from here: a node that let the extra in answers it 200.
        holding = false;
        const extra = await callAs(agents[4]!.token);
        expect(extra.status).toBe(429);
        answerHeld();
        expect((await Promise.all(first)).map((r) => r.status)).toEqual(Array(16).fill(200));
        // Slots come back once answers have left.
        expect((await callAs(agents[4]!.token)).status).toBe(200);
      } finally {
        await target.close();
        slow.closeAllConnections();
        slow.close();
      }
    });

    it("gives up on a chain that accepts but never answers, within CHAIN_RPC_TIMEOUT_MS", async () => {
      const silent = createServer(() => {});
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      const port = (silent.address() as AddressInfo).port;
      const stuck = await startTestOrigin({
        database: testDb.handle,
        rpcUrl: `http://127.0.0.1:${port}`,
        env: { CHAIN_RPC_TIMEOUT_MS: "300" },
      });
      try {
        const started = Date.now();
        const response = await send(`${stuck.base}/agent/v1/rpc`, {
          method: "POST",
          headers: auth(tokens.read.token),
          body: JSON.stringify(call(1, "eth_blockNumber")),
        });
        expect(response.body).toMatchObject({
          id: 1,
          error: { code: -32000, message: "upstream unavailable: timeout" },
        });
        expect(Date.now() - started).toBeLessThan(3_000);
      } finally {
        await stuck.close();
        silent.closeAllConnections();
        silent.close();
      }
    });

    it("turns an unreachable chain into JSON-RPC errors, never a 500", async () => {
      const dead = await startTestOrigin({ database: testDb.handle, rpcUrl: "http://127.0.0.1:9" });
      try {
        const response = await send(`${dead.base}/agent/v1/rpc`, {
          method: "POST",
          headers: auth(tokens.read.token),
          body: JSON.stringify([call(1, "eth_blockNumber"), call(2, "personal_sign")]),
        });
        expect(response.status).toBe(200);
        const replies = response.body as RpcReply[];
        expect(replies[0]!.error).toMatchObject({
          code: -32000,
          message: "upstream unavailable: unreachable",
        });
        expect(replies[1]!.error).toMatchObject({ code: -32601 });
        const balance = await send(`${dead.base}/agent/v1/balance`, { headers: auth(tokens.read.token) });
        expect(balance.status).toBe(503);
        expect((balance.body as ErrorEnvelope).error.code).toBe("chain_unavailable");
      } finally {
        await dead.close();
      }
    });
  });
});
