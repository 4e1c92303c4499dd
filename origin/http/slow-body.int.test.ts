import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { connect } from "node:net";
import { sql } from "drizzle-orm";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  HEADER_ADMIN_API_TOKEN,
  HEADER_EDGE_SECRET,
  HEADER_REGISTRATION,
  HEADER_REGISTRATION_ADMIN_TOKEN,
  HEADER_REGISTRATION_IP,
} from "../../shared/constants.ts";
import { sleep } from "../../shared/sleep.ts";
import type { StackAgent } from "../../testing/agent-factory.ts";
import { type HalfSentAnswer, type HalfSentRequest, sendHalfBody } from "../../testing/half-sent.ts";
import { send } from "../../testing/http.ts";
import { type OriginProcess, spawnOrigin } from "../../testing/origin-process.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";
import { RPC_IN_FLIGHT } from "../gateway/limits.ts";
import { RECEIVE_TIMEOUTS } from "../server.ts";
import { BODY_DEADLINE_MS } from "./read-body.ts";

// Slow request bodies against the origin as its own process (origin/main.ts), on the real stack
// with every route that reads a body switched on: a client sends its headers and the first byte
// of its body, then nothing. What such a client holds while the origin waits for the rest is what
// every other agent cannot have.

const ADMIN_TOKEN = randomBytes(32).toString("hex");
const REGISTRATION_ADMIN = randomBytes(32).toString("hex");
const EDGE_SECRET = randomBytes(32).toString("hex");
/** How late a 408 may come after the deadline on a shared machine. */
const SLACK_MS = 3_000;
/** Adjacent concurrent blocks run at once; each block's tests run as it marks them. */
const BESIDE = { concurrent: true } as const;

describe("slow request bodies (origin as its own process)", () => {
  const stack = useMoneyStack({
    inProcessOrigin: false,
    x402: { amountUnits: 10_000n, payTo: privateKeyToAccount(`0x${"11".repeat(32)}`).address },
  });
  let origin: OriginProcess;
  let agents: StackAgent[];

  beforeAll(async () => {
    // Real keys, proven: the origin's identity sweep would disable any other.
    agents = await stack.newAgents(6);
    origin = await spawnOrigin({
      env: stack.processEnv({
        AGENT_ADMIN_API_TOKEN: ADMIN_TOKEN,
        AGENT_REGISTRATION_ADMIN_SECRET: REGISTRATION_ADMIN,
        AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
        AGENT_REGISTRATION_ALLOW_LOOPBACK: "true",
      }),
    });
  });
  afterAll(async () => {
    await origin?.stop();
  });

  const auth = (token: string) => ({ authorization: `Bearer ${token}` });
  const chainId = (token: string) =>
    send(`${origin.base}/agent/v1/rpc`, {
      method: "POST",
      headers: auth(token),
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
    });
  /** A 408 in the gateway's envelope that closed its connection, within the deadline's reach. */
  const expectTimedOut = (answer: HalfSentAnswer & { at: number }, sentAt: number, what: string) => {
    expect(answer.kind, what).toBe("answered");
    if (answer.kind !== "answered") return;
    expect(answer.status, what).toBe(408);
    expect(JSON.parse(answer.body), what).toMatchObject({
      error: { code: "request_timeout", request_id: expect.stringMatching(/^req_/) },
    });
    expect(answer.headers.connection, what).toBe("close");
    expect(answer.at - sentAt, what).toBeGreaterThanOrEqual(BODY_DEADLINE_MS - 100);
    expect(answer.at - sentAt, what).toBeLessThan(BODY_DEADLINE_MS + SLACK_MS);
  };

  // The two waits for a deadline run beside each other (vitest runs adjacent concurrent blocks at
  // once): the half-sent /rpc bodies (each agent its own, the other agent's /rpc answered while
  // they wait) and the trickled headers (a connection that never reaches a route). The test that
  // counts the tables' rows runs after them, alone (docs/performance.md, "The test suite").
  describe("half-sent /rpc bodies", BESIDE, () => {
    it("16 half-sent /rpc bodies from 4 tokens leave another agent's /rpc answering 200", async () => {
      const attackers = agents.slice(0, 4);
      const sentAt = Date.now();
      const slow: HalfSentRequest[] = attackers.flatMap((agent, index) =>
        Array.from({ length: RPC_IN_FLIGHT.perAgent }, (_, i) =>
          sendHalfBody(`${origin.base}/agent/v1/rpc`, {
            headers: auth(agent.token),
            // Both ways a body is framed: a declared length, and chunks.
            ...((index + i) % 2 === 0 ? { declaredLength: 64 } : {}),
          }),
        ),
      );
      expect(slow).toHaveLength(RPC_IN_FLIGHT.perNode);
      await Promise.all(slow.map((request) => request.sent));
      // Long enough for every one of them to be authenticated and waiting on its body.
      await sleep(1_000);

      const other = await chainId(agents[4]!.token);
      expect(other.status).toBe(200);
      expect(other.body).toEqual({ jsonrpc: "2.0", id: 1, result: "0x4d" });
      // Nor do they hold their own tokens' slots.
      expect((await chainId(attackers[0]!.token)).status).toBe(200);

      // Each slow body is answered 408 at the deadline, and its connection closed.
      const answers = await Promise.all(slow.map((request) => request.answer));
      for (const [i, answer] of answers.entries()) expectTimedOut(answer, sentAt, `slow /rpc ${i}`);
    });
  });

  describe("trickled headers", BESIDE, () => {
    it("answers a client that trickles its headers 408 once the server's headers timeout has passed", async () => {
      const { port } = new URL(origin.base);
      const socket = connect(Number(port), "127.0.0.1");
      await once(socket, "connect");
      const chunks: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => chunks.push(chunk));
      const closed = Promise.race([once(socket, "close"), once(socket, "error")]);
      const startedAt = Date.now();
      socket.write("POST /77/agent/v1/rpc HTTP/1.1\r\nHost: origin\r\n");
      // A header line every second: the connection is never idle, the headers never end.
      const trickle = setInterval(
        () => socket.writable && socket.write(`X-Slow-${Date.now()}: 1\r\n`),
        1_000,
      );
      await closed;
      clearInterval(trickle);
      const text = Buffer.concat(chunks).toString("utf8");
      expect(text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
      expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4))).toMatchObject({
        error: { code: "request_timeout" },
      });
      const { headersTimeout, connectionsCheckingInterval } = RECEIVE_TIMEOUTS;
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(headersTimeout - 100);
      expect(Date.now() - startedAt).toBeLessThan(headersTimeout + connectionsCheckingInterval + SLACK_MS);
    });
  });

  it("every other route that reads a body answers a stalled one 408 at the deadline, having done nothing", async () => {
    const agent = agents[5]!;
    const admin = {
      [HEADER_ADMIN_API_TOKEN]: ADMIN_TOKEN,
      [HEADER_REGISTRATION_ADMIN_TOKEN]: REGISTRATION_ADMIN,
    };
    const routes: Record<string, Record<string, string>> = {
      "/agent/v1/faucet": auth(agent.token),
      "/agent/v1/transfers": auth(agent.token),
      "/agent/v1/x402/authorize": auth(agent.token),
      // Mutation: a rotation made before its body is read fails this (the token is replaced by the
      // first stalled request: the second answers 401, and the token no longer works).
      "/agent/v1/token/rotate": auth(agent.token),
      "/agent/v1/register": {
        [HEADER_EDGE_SECRET]: EDGE_SECRET,
        [HEADER_REGISTRATION_IP]: "127.0.0.77",
        [HEADER_REGISTRATION]: "1",
      },
      "/x402/facilitator/verify": {},
      "/x402/facilitator/settle": {},
      "/admin/agents/registration/settings": admin,
      "/admin/agents/registration/identity": admin,
    };
    const rows = async (): Promise<number> =>
      (
        await queryRows<{ n: number }>(
          stack.db.handle.db,
          sql`select (select count(*) from agent_actions)::int + (select count(*) from x402_settlements)::int
                + (select count(*) from agent_identities)::int + (select count(*) from registration_attempts)::int
                + (select count(*) from registration_policy_changes)::int + (select count(*) from identity_changes)::int as n`,
        )
      )[0]!.n;
    const before = await rows();
    const sentAt = Date.now();
    const slow = Object.entries(routes).flatMap(([path, headers]) =>
      [{ declaredLength: 64 }, {}].map((framing) => ({
        what: `${path} ${"declaredLength" in framing ? "with a length" : "chunked"}`,
        request: sendHalfBody(`${origin.base}${path}`, { headers, ...framing }),
      })),
    );
    for (const { what, request } of slow) expectTimedOut(await request.answer, sentAt, what);
    expect(await rows()).toBe(before);
    // Nor was the token rotated: it still works.
    expect((await chainId(agent.token)).status).toBe(200);
  });
});
