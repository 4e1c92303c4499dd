import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../../devnet/testing.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { SlidingWindowLimiter } from "../../shared/rate-limiter.ts";
import type { TokenRotationResponse } from "../../shared/token-schemas.ts";
import { type EdgeHandle, startTestEdge } from "../../testing/edge.ts";
import { send, type TestResponse } from "../../testing/http.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import { runTool } from "../../testing/run-tool.ts";
import { recordSecret } from "../../testing/secret-sink.ts";
import { useMoneyStack, useStackOrigin } from "../../testing/stack.ts";
import { createGatewayLimiters } from "./limits.ts";

// Rotating an agent's token (docs/agents.md, "Rotating the token"; docs/security.md, "Token
// rotation"), against the real stack: by the agent with its current token through the edge, and by
// the operator with `npm run agents -- rotate-token`. The identity keeps its wallet, capabilities,
// actions and limits; the old token stops at its next request; the new one is shown once.

const TOKEN = /^agt_[0-9a-f]{32}_[0-9a-f]{64}$/;

describe("token rotation (real stack)", () => {
  const stack = useMoneyStack({}, { timeoutMs: 180_000 });
  const edgeSecret = randomBytes(32).toString("hex");
  const logLines: string[] = [];
  const origin = useStackOrigin("edge's origin", stack, () => ({
    env: { AGENT_EDGE_SHARED_SECRET: edgeSecret },
    onLogLine: (line) => logLines.push(line),
  }));
  // The per-agent tier at 5 requests a minute, for the test of the window a new token inherits.
  const tightLimiters = {
    ...createGatewayLimiters(),
    requestsPerAgent: new SlidingWindowLimiter({ limit: 5, windowSeconds: 60 }),
  };
  const tight = useStackOrigin("origin with a tight per-agent tier", stack, () => ({
    limiters: tightLimiters,
  }));
  let edge: EdgeHandle;
  let base: string;

  beforeAll(async () => {
    edge = await startTestEdge({ originUrl: origin.url, edgeSharedSecret: edgeSecret, onLine: () => {} });
    base = `${edge.url}/77`;
  }, 120_000);
  afterAll(async () => {
    await edge?.stop();
  });

  const get = (token: string, path: string, at = base): Promise<TestResponse> =>
    send(`${at}/agent/v1${path}`, { headers: { authorization: `Bearer ${token}` } });
  const rotate = async (token: string, at = base): Promise<TestResponse> => {
    const answer = await send(`${at}/agent/v1/token/rotate`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: "{}",
    });
    const issued = (answer.body as Partial<TokenRotationResponse>).token;
    // A token the run must never log (the suite's secret scan, testing/secret-sink.ts).
    if (issued) recordSecret(issued);
    return answer;
  };

  it("the agent rotates its own token through the edge: shown once, the old token refused at once, wallet, capabilities and actions kept", async () => {
    const agent = await stack.newAgent({ units: 2_000_000n });
    const calls = agentCalls(base, agent.token);
    const sent = await calls.transfer({
      idempotency_key: newKey(),
      to: newAccount().address,
      amount: "1000",
    });
    const action = sent.body as ActionView;
    expect(sent.status).toBe(202);

    const rotated = await rotate(agent.token);
    expect(rotated.status).toBe(200);
    expect(rotated.headers["cache-control"]).toBe("no-store");
    const body = rotated.body as TokenRotationResponse;
    expect(body).toEqual({
      token: expect.stringMatching(TOKEN),
      agent_id: agent.agentId,
      assigned_wallet: agent.wallet.toLowerCase(),
      capabilities: ["read", "faucet", "transfer"],
    });
    expect(body.token).not.toBe(agent.token);

    // Mutation: a rotation that keeps the identity's other tokens (rotate-token.ts without its
    // delete) fails this: the old token still reads the network.
    const old = await get(agent.token, "/network");
    expect(old.status).toBe(401);
    expect(old.body).toMatchObject({ error: { code: "agent_auth_failed" } });
    expect((await rotate(agent.token)).status).toBe(401);

    const network = await get(body.token, "/network");
    expect(network.status).toBe(200);
    expect(network.body).toMatchObject({
      agent: { agent_id: agent.agentId, assigned_wallet: agent.wallet.toLowerCase() },
    });
    // The action the old token asked for is the identity's, read with the new one.
    const read = await get(body.token, `/actions/${action.action_id}`);
    expect(read.status).toBe(200);
    expect((read.body as ActionView).action_id).toBe(action.action_id);
    // The wallet's key still signs for it.
    const again = await agentCalls(base, body.token).transfer({
      idempotency_key: newKey(),
      to: newAccount().address,
      amount: "1000",
    });
    expect(again.status).toBe(202);

    // Never logged, the token nor its secret.
    const secret = body.token.split("_")[2]!;
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.filter((line) => line.includes(secret))).toEqual([]);
  });

  it("two rotations with one token at once issue one token; the other is refused 401 (any capability may rotate)", async () => {
    const reader = await stack.newAgent({ capabilities: ["read"] });
    // Mutation: rotating without checking the presented token (rotateToken without
    // presentedTokenId) fails this: both answer 200, and one of the two tokens never works.
    const answers = await Promise.all([rotate(reader.token), rotate(reader.token)]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 401]);
    const issued = (answers.find((answer) => answer.status === 200)!.body as TokenRotationResponse).token;
    expect((await get(issued, "/balance")).status).toBe(200);
    expect((await get(reader.token, "/balance")).status).toBe(401);
  });

  it("a new token starts no new window: the per-agent tier counts the identity", async () => {
    const agent = await stack.newAgent();
    for (let i = 0; i < 3; i++) expect((await get(agent.token, "/network", tight.base)).status).toBe(200);
    const rotated = await rotate(agent.token, tight.base);
    expect(rotated.status).toBe(200);
    const token = (rotated.body as TokenRotationResponse).token;
    expect((await get(token, "/network", tight.base)).status).toBe(200);
    // The sixth request of the identity in the minute. Mutation: keying the per-agent tier by the
    // token (bearer-auth.ts consuming identity.tokenId) fails this with a 200.
    const sixth = await get(token, "/network", tight.base);
    expect(sixth.status).toBe(429);
    expect(sixth.body).toMatchObject({ error: { code: "rate_limited" } });
  });

  it("the operator rotates with npm run agents -- rotate-token: printed once, the old token refused, the wallet kept", async () => {
    const agent = await stack.newAgent({ units: 1_500_000n });
    const tool = (...args: string[]) =>
      runTool("ops/agents.ts", args, { env: { DATABASE_URL: stack.db.url, LOG_LEVEL: "silent" } });
    const rotated = await tool("rotate-token", "--agent", agent.agentId);
    expect(rotated.code).toBe(0);
    const printed = JSON.parse(rotated.stdout) as TokenRotationResponse;
    recordSecret(printed.token);
    expect(printed).toEqual({
      token: expect.stringMatching(TOKEN),
      agent_id: agent.agentId,
      assigned_wallet: agent.wallet.toLowerCase(),
      capabilities: ["read", "faucet", "transfer"],
    });
    expect(rotated.stderr).toBe(
      `agents: ${agent.agentId} has a new token; the old one fails from its next request on\n`,
    );
    // Mutation: the operator's rotation keeping the old token fails this with a 200.
    expect((await get(agent.token, "/balance")).status).toBe(401);
    const balance = await get(printed.token, "/balance");
    expect(balance.body).toMatchObject({ address: agent.wallet.toLowerCase(), balance: "1500000" });

    // Revocation is final; an unknown agent has no token to rotate.
    // The reason is required since revocations are recorded as every identity change.
    expect((await tool("revoke", "--agent", agent.agentId, "--reason", "rotated, then retired")).code).toBe(
      0,
    );
    const revoked = await tool("rotate-token", "--agent", agent.agentId);
    expect(revoked).toMatchObject({ code: 1, stdout: "" });
    expect(revoked.stderr).toContain("is revoked; revocation is final");
    expect((await get(printed.token, "/balance")).status).toBe(401);
    const unknown = await tool("rotate-token", "--agent", "00000000-0000-4000-8000-000000000000");
    expect(unknown).toMatchObject({ code: 1, stdout: "", stderr: expect.stringContaining("no agent") });
  });
});
