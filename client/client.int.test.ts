import { sql } from "drizzle-orm";
import { createPublicClient } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { nodeFetch } from "../cli/node-fetch.ts";
import { newAccount, publicClientFor } from "../devnet/testing.ts";
import { queryRows } from "../origin/db/client.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { sleep } from "../shared/sleep.ts";
import { freePort } from "../testing/free-port.ts";
import { rejection } from "../testing/gateway-rejection.ts";
import { checkingFetch } from "../testing/openapi-check.ts";
import { deployRevertingContract } from "../testing/reverting-contract.ts";
import { useMoneyStack } from "../testing/stack.ts";
import {
  ActionFailed,
  AgentAuthFailed,
  CapabilityRequired,
  chain77,
  createGatewayClient,
  FeatureDisabled,
  FundingGateClosed,
  findGatewayError,
  type GatewayClient,
  IdempotencyConflict,
  InsufficientFunds,
  LimitExceeded,
  NotFound,
  RateLimited,
  RegistrationUnavailable,
  RpcError,
  RpcMethodNotAllowed,
  register,
  ServiceUnavailable,
  SignerUnavailable,
  ValidationFailed,
} from "./index.ts";

// The client library (docs/agents.md) against the real stack: origin, enclave, devnet, Postgres. Every
// answer it receives is also checked against the OpenAPI document (checkingFetch).

/** Adjacent concurrent blocks run at once; each block's tests run as it marks them. */
const BESIDE = { concurrent: true } as const;

describe("gateway client (real stack)", () => {
  // The test that stops the enclave waits for the origin to reconnect once it is back: its signer
  // client retries every 0.5 s at most here, not every 5 s (what the test checks is that the same
  // key then moves the money once, however soon that is).
  const stack = useMoneyStack({ signerTimings: { backoff: { initialMs: 50, maxMs: 500 } } });
  let chain: ReturnType<typeof publicClientFor>;
  const fetch = checkingFetch();
  const clientFor = (token: string, base = stack.origin.base): GatewayClient =>
    createGatewayClient({ baseUrl: base, token, fetch });
  const actionsOf = async (agentId: string): Promise<number> => {
    const [row] = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as n from agent_actions where agent_id = ${agentId}`,
    );
    return row!.n;
  };

  beforeAll(async () => {
    chain = publicClientFor(stack.devnet.url);
  });

  // The two tests that wait out a Retry-After run beside the others (vitest runs adjacent concurrent
  // blocks at once), each block's tests in turn: each test has its own agent and counts only its
  // agent's actions. The test that stops the enclave runs after both, alone (docs/performance.md,
  // "The test suite").
  describe("waits for a Retry-After", BESIDE, () => {
    // Mutation: retrying on the schedule alone (250 ms, then 500 ms) spends both retries inside the
    // Retry-After and throws ServiceUnavailable while the service said when it would answer again.
    it.sequential("repeats a transfer answered 503 with Retry-After no sooner than it asks, with the same key: moved once", async () => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      // The origin's database out of reach for 1.5 s, as app.ts answers it (503 service_unavailable,
      // Retry-After), a fault a shared test database cannot take on demand (a fake, named as such):
      // requests in that time get the answer without reaching the origin.
      let outageEnds: number | undefined;
      const posts: { at: number; key: string; answered: number }[] = [];
      const outage: typeof globalThis.fetch = async (input, init) => {
        if (init?.method !== "POST") return fetch(input, init);
        outageEnds ??= Date.now() + 1_500;
        const at = Date.now();
        const key = JSON.parse(String(init.body)).idempotency_key as string;
        if (at < outageEnds) {
          posts.push({ at, key, answered: 503 });
          return Response.json(
            {
              error: {
                code: "service_unavailable",
                message: "the database is unavailable; try again shortly",
              },
            },
            { status: 503, headers: { "retry-after": "2" } },
          );
        }
        const response = await fetch(input, init);
        posts.push({ at, key, answered: response.status });
        return response;
      };
      const client = createGatewayClient({ baseUrl: stack.origin.base, token: agent.token, fetch: outage });
      const to = newAccount().address;
      const sent = await client.transfer({ to, amount: "1000" });
      expect(posts.map((post) => post.answered)).toEqual([503, 202]);
      expect(posts[1]!.at - posts[0]!.at).toBeGreaterThanOrEqual(2_000);
      expect(new Set(posts.map((post) => post.key))).toEqual(new Set([sent.idempotency_key]));
      expect((await clientFor(agent.token).waitForAction(sent.action_id)).status).toBe("confirmed");
      expect(await actionsOf(agent.agentId)).toBe(1);
      expect(await chain.getBalance({ address: to })).toBe(1_000n * WEI_PER_UNIT);
    });

    it.sequential("waitForAction reads again after a dropped connection, a 503 or a 429 while it waits, and resolves once confirmed", async () => {
      // Mutation: a waitForAction that throws the first failed read (as it did) rejects here with
      // ServiceUnavailable while the transfer goes on to be confirmed.
      const agent = await stack.newAgent({ units: 1_000_000n });
      const to = newAccount().address;
      const sent = await clientFor(agent.token).transfer({ to, amount: "1000" });
      // Faults a client cannot meet for real on demand (a fake network, named as such): the first
      // three reads of the action fail, as a dropped connection, a proxy's 503 and a 429 would.
      const faults = [
        () => Promise.reject(new TypeError("fetch failed (connection reset)")),
        () => Promise.resolve(new Response("unavailable", { status: 503 })),
        () =>
          Promise.resolve(
            Response.json(
              { error: { code: "rate_limited", message: "too many requests" } },
              { status: 429, headers: { "retry-after": "1" } },
            ),
          ),
      ];
      const reads: string[] = [];
      const flaky: typeof globalThis.fetch = async (input, init) => {
        const url = String(input instanceof Request ? input.url : input);
        if (url.includes("/agent/v1/actions/")) {
          reads.push(url);
          const fault = faults.shift();
          if (fault) return fault();
        }
        return fetch(input, init);
      };
      const client = createGatewayClient({ baseUrl: stack.origin.base, token: agent.token, fetch: flaky });
      expect((await client.waitForAction(sent.action_id, { timeoutMs: 30_000 })).status).toBe("confirmed");
      expect(reads.length).toBeGreaterThanOrEqual(4);
      expect(await chain.getBalance({ address: to })).toBe(1_000n * WEI_PER_UNIT);

      // A final error is not waited out: an unknown action is NotFound at once.
      const started = Date.now();
      const unknown = await rejection(client.waitForAction("00000000-0000-4000-8000-000000000000"));
      expect(unknown).toBeInstanceOf(NotFound);
      expect(Date.now() - started).toBeLessThan(5_000);
    });
  });

  describe("beside the waits", BESIDE, () => {
    it.sequential("reads the network and the balance, and calls an allowlisted rpc method", async () => {
      const agent = await stack.newAgent({ units: 2_000_000n });
      const client = clientFor(agent.token);
      const network = await client.network();
      expect(network.chain.chain_id).toBe(77);
      expect(network.agent).toEqual({
        agent_id: agent.agentId,
        assigned_wallet: agent.wallet.toLowerCase(),
        capabilities: expect.arrayContaining(["read"]),
        spending_policy: false,
      });
      const balance = await client.balance();
      expect(balance).toMatchObject({ address: agent.wallet.toLowerCase(), balance: "2000000", decimals: 6 });
      expect(BigInt(balance.balance_wei)).toBe(2_000_000n * WEI_PER_UNIT);
      expect(await client.rpc("eth_chainId")).toBe("0x4d");
    });

    it.sequential("pays the faucet and transfers, waits for both, and reads the actions", async () => {
      const agent = await stack.newAgent();
      const client = clientFor(agent.token);
      const payout = await client.faucet();
      expect(payout.kind).toBe("faucet");
      expect(payout.idempotency_key).toMatch(/^faucet-/);
      const paid = await client.waitForAction(payout.action_id);
      expect(paid.status).toBe("confirmed");
      expect(await chain.getBalance({ address: agent.wallet })).toBe(1_000_000n * WEI_PER_UNIT);

      const to = newAccount().address;
      const sent = await client.transfer({ to, amount: 250_000n });
      expect(sent).toMatchObject({ kind: "transfer", amount: "250000", to: to.toLowerCase() });
      const done = await client.waitForAction(sent.action_id);
      expect(done.status).toBe("confirmed");
      expect(await client.action(sent.action_id)).toEqual(done);
      expect(await chain.getBalance({ address: to })).toBe(250_000n * WEI_PER_UNIT);
    });

    it.sequential("repeats a money call with the same generated key after a lost answer: moved once", async () => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      // Fault that cannot be produced for real from the client side: the request reaches the
      // gateway, the answer is dropped on its way back (the connection dies after the send).
      let dropped = 0;
      const keys: string[] = [];
      const losing: typeof globalThis.fetch = async (input, init) => {
        const response = await fetch(input, init);
        if (typeof init?.body === "string") keys.push(JSON.parse(init.body).idempotency_key);
        if (dropped++ === 0) throw new TypeError("fetch failed (answer lost)");
        return response;
      };
      const client = createGatewayClient({ baseUrl: stack.origin.base, token: agent.token, fetch: losing });
      const to = newAccount().address;
      const sent = await client.transfer({ to, amount: "1000" });
      expect(keys).toHaveLength(2);
      expect(keys[0]).toBe(keys[1]);
      expect(sent.idempotency_key).toBe(keys[0]);
      expect((await clientFor(agent.token).waitForAction(sent.action_id)).status).toBe("confirmed");
      expect(await actionsOf(agent.agentId)).toBe(1);
      expect(await chain.getBalance({ address: to })).toBe(1_000n * WEI_PER_UNIT);
      // The caller repeating with the key gets the same action, and a changed payload conflicts.
      const again = await clientFor(agent.token).transfer({
        to,
        amount: "1000",
        idempotencyKey: sent.idempotency_key,
      });
      expect(again.action_id).toBe(sent.action_id);
      const conflict = await rejection(
        clientFor(agent.token).transfer({ to, amount: "1001", idempotencyKey: sent.idempotency_key }),
      );
      expect(conflict).toBeInstanceOf(IdempotencyConflict);
      expect(conflict.status).toBe(409);
    });

    // Mutation: sending the token as given, the CLI's node:http refuses the line break (exit 19,
    // "no answer", retry) and fetch the typeset quotes (the same): neither is a network failure.
    it.sequential.each([
      ["fetch", fetch],
      ["the CLI's node:http fetch", nodeFetch],
    ])(
      "a token ending with a line break is the token; one in typeset quotes is AgentAuthFailed, nothing sent (%s)",
      async (_, viaFetch) => {
        const agent = await stack.newAgent({ units: 1_000_000n });
        let sent = 0;
        const counting: typeof globalThis.fetch = async (input, init) => {
          sent++;
          return viaFetch(input, init);
        };
        const read = createGatewayClient({
          baseUrl: stack.origin.base,
          token: `${agent.token}\n`,
          fetch: counting,
        });
        expect((await read.balance()).address.toLowerCase()).toBe(agent.wallet.toLowerCase());
        const sentOnce = await read.transfer({ to: newAccount().address, amount: "1000" });
        expect((await read.waitForAction(sentOnce.action_id)).status).toBe("confirmed");

        sent = 0;
        const quoted = createGatewayClient({
          baseUrl: stack.origin.base,
          token: `\u201c${agent.token}\u201d`,
          fetch: counting,
        });
        const refused = await rejection(quoted.transfer({ to: newAccount().address, amount: "1000" }));
        expect(refused).toBeInstanceOf(AgentAuthFailed);
        expect(refused).toMatchObject({ code: "token_malformed", exitCode: AgentAuthFailed.exitCode });
        expect(refused.message).not.toContain(agent.token);
        expect(sent).toBe(0);
      },
    );

    it.sequential("reads the chain with viem through the transport, and a disallowed method is a typed error", async () => {
      const agent = await stack.newAgent({ units: 3_000_000n });
      const viem = createPublicClient({
        chain: chain77(stack.devnet.url),
        transport: clientFor(agent.token).transport(),
      });
      expect(await viem.getBalance({ address: agent.wallet })).toBe(3_000_000n * WEI_PER_UNIT);
      // The tests beside this one mine blocks on the same devnet: the chain's height read straight
      // before and after (none of the three from viem's cache) brackets the one read through the
      // transport.
      const heightBefore = await chain.getBlockNumber({ cacheTime: 0 });
      const height = await viem.getBlockNumber({ cacheTime: 0 });
      const heightAfter = await chain.getBlockNumber({ cacheTime: 0 });
      expect(
        height >= heightBefore && height <= heightAfter,
        `${heightBefore} ≤ ${height} ≤ ${heightAfter}`,
      ).toBe(true);
      const refused = await viem
        .request({ method: "eth_sendRawTransaction", params: ["0x00"] } as never)
        .catch((error: unknown) => error);
      const typed = findGatewayError(refused);
      expect(typed).toBeInstanceOf(RpcMethodNotAllowed);
      expect((typed as RpcMethodNotAllowed).rpcCode).toBe(-32601);
      expect((typed as RpcMethodNotAllowed).allowedMethods).toContain("eth_getBalance");
      // And directly through rpc().
      const direct = await rejection(clientFor(agent.token).rpc("eth_call", [{}, "latest"]));
      expect(direct).toBeInstanceOf(RpcMethodNotAllowed);
    });

    it.sequential("an /rpc call over the 64 KB limit is an RpcError naming the limit, not a service outage to retry", async () => {
      const agent = await stack.newAgent();
      const refused = await rejection(
        clientFor(agent.token).rpc("eth_getBalance", [`0x${"0".repeat(70_000)}`, "latest"]),
      );
      expect(refused).toBeInstanceOf(RpcError);
      expect(refused).not.toBeInstanceOf(ServiceUnavailable);
      expect(refused).toMatchObject({ status: 413, rpcCode: -32600 });
      expect((refused as RpcError).message).toContain("65536 bytes");
    });

    it.sequential("types each error the service gives", async () => {
      const agent = await stack.newAgent({ units: 1_000n });
      const client = clientFor(agent.token);
      const to = newAccount().address;

      const auth = await rejection(clientFor(`${agent.token.slice(0, -4)}0000`).balance());
      expect(auth).toBeInstanceOf(AgentAuthFailed);
      expect(auth).toMatchObject({ code: "agent_auth_failed", status: 401 });
      expect(auth.requestId).toMatch(/^req_/);
      expect(auth.message).not.toContain(agent.token);

      const reader = await stack.newAgent({ capabilities: ["read"] });
      expect(await rejection(clientFor(reader.token).faucet())).toBeInstanceOf(CapabilityRequired);

      const invalid = await rejection(client.transfer({ to: "0x1234", amount: "1" }));
      expect(invalid).toBeInstanceOf(ValidationFailed);
      expect(invalid.status).toBe(400);

      const over = await rejection(client.transfer({ to, amount: "10000001" }));
      expect(over).toBeInstanceOf(LimitExceeded);
      expect((over as LimitExceeded).limit).toBe("per_transaction");

      expect(await rejection(client.transfer({ to, amount: "1000" }))).toBeInstanceOf(InsufficientFunds);

      const undrilled = await stack.newAgent({ drilled: false, units: 2_000_000n });
      const gate = await rejection(clientFor(undrilled.token).transfer({ to, amount: "1" }));
      expect(gate).toBeInstanceOf(FundingGateClosed);
      expect((gate as FundingGateClosed).reason).toBe("no_restore_evidence");

      const faucetAgent = await stack.newAgent();
      await clientFor(faucetAgent.token).faucet();
      const cooldown = await rejection(clientFor(faucetAgent.token).faucet());
      expect(cooldown).toBeInstanceOf(RateLimited);
      expect(cooldown.code).toBe("faucet_cooldown");
      expect((cooldown as RateLimited).retryAfter).toBeGreaterThan(0);

      expect(await rejection(client.action("00000000-0000-4000-8000-000000000000"))).toBeInstanceOf(NotFound);

      const faucetOff = await stack.startOrigin({ AGENT_FAUCET_ENABLED: "false" });
      expect(await rejection(clientFor(faucetAgent.token, faucetOff.base).faucet())).toBeInstanceOf(
        FeatureDisabled,
      );

      // Registration is off on this stack: 503 registration_unavailable, reason disabled.
      const closed = await rejection(register({ baseUrl: stack.origin.base, fetch }));
      expect(closed).toBeInstanceOf(RegistrationUnavailable);
      expect((closed as RegistrationUnavailable).reason).toBe("disabled");

      const nowhere = `http://127.0.0.1:${await freePort()}/77`;
      const unreachable = await rejection(
        createGatewayClient({ baseUrl: nowhere, token: agent.token, retries: 0 }).balance(),
      );
      expect(unreachable).toBeInstanceOf(ServiceUnavailable);
      expect(unreachable.code).toBe("gateway_unreachable");
    });

    it.sequential("register sends once and never retries by itself, even when the answer is lost", async () => {
      let calls = 0;
      const lost: typeof globalThis.fetch = async (input, init) => {
        calls++;
        await fetch(input, init);
        throw new TypeError("fetch failed (answer lost)");
      };
      const error = await rejection(register({ baseUrl: stack.origin.base, fetch: lost }));
      expect(error).toBeInstanceOf(ServiceUnavailable);
      expect(error.code).toBe("gateway_unreachable");
      expect(calls).toBe(1);
    });

    it.sequential("rotateToken: the new token once, used by this client from then on; the old one refused; never retried", async () => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const client = clientFor(agent.token);
      const rotated = await client.rotateToken();
      expect(rotated).toEqual({
        token: expect.stringMatching(/^agt_[0-9a-f]{32}_[0-9a-f]{64}$/),
        agent_id: agent.agentId,
        assigned_wallet: agent.wallet.toLowerCase(),
        capabilities: ["read", "faucet", "transfer"],
      });
      // Mutation: a client that keeps its old token after the rotation fails this (AgentAuthFailed).
      expect(await client.balance()).toMatchObject({
        address: agent.wallet.toLowerCase(),
        balance: "1000000",
      });
      expect(await rejection(clientFor(agent.token).balance())).toBeInstanceOf(AgentAuthFailed);

      // A lost answer is not sent again: the rotation went through once, and neither token works.
      let calls = 0;
      const lost: typeof globalThis.fetch = async (input, init) => {
        calls++;
        await fetch(input, init);
        throw new TypeError("fetch failed (answer lost)");
      };
      const unlucky = createGatewayClient({ baseUrl: stack.origin.base, token: rotated.token, fetch: lost });
      expect(await rejection(unlucky.rotateToken())).toBeInstanceOf(ServiceUnavailable);
      expect(calls).toBe(1);
      expect(await rejection(client.balance())).toBeInstanceOf(AgentAuthFailed);
    });

    it.sequential("throws a terminal failure as its class, and the same class again on a repeat of the key", async () => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const client = clientFor(agent.token);
      const to = newAccount().address;
      const over = () => client.transfer({ to, amount: "10000001", idempotencyKey: "over-1" });
      const first = await rejection(over());
      expect(first).toBeInstanceOf(LimitExceeded);
      const repeat = await rejection(over());
      expect(repeat).toBeInstanceOf(LimitExceeded);
      expect(repeat.body.action_id).toBe(first.body.action_id);
      // The repeat's body is the first's, its figures included (no client change: `body` is the
      // service's whole error object).
      expect(repeat.body).toMatchObject({ limit: "per_transaction", limit_units: expect.any(String) });
      expect({ ...repeat.body, request_id: "" }).toEqual({ ...first.body, request_id: "" });
      expect(repeat.idempotencyKey).toBe("over-1");

      // Mined and reverted (a transfer to a contract whose code is INVALID): in flight at first, then
      // ActionFailed from waitForAction and from every repeat.
      const contract = await deployRevertingContract(stack.devnet.url);
      const revert = () => client.transfer({ to: contract, amount: "1000", idempotencyKey: "revert-1" });
      const sent = await revert();
      expect(sent.status).toBe("signed");
      const waited = await rejection(client.waitForAction(sent.action_id));
      expect(waited).toBeInstanceOf(ActionFailed);
      expect(waited).toMatchObject({ code: "reverted", exitCode: ActionFailed.exitCode });
      expect((waited as ActionFailed).actionId).toBe(sent.action_id);
      const again = await rejection(revert());
      expect(again).toBeInstanceOf(ActionFailed);
      expect(again).toMatchObject({ code: "reverted", status: 422 });
      expect(await chain.getBalance({ address: to })).toBe(0n);
      expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(1);
    });
  });

  it("is SignerUnavailable while the signer is down or cannot sign; the same key then moves the money once", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const to = newAccount().address;
    const client = clientFor(agent.token);
    const transfer = () => client.transfer({ to, amount: "1000", idempotencyKey: "signer-down-1" });
    await stack.enclave.stop();
    try {
      // Its own retries (same key) find the enclave still down: the error says to retry with the key.
      const down = await rejection(transfer());
      expect(down).toBeInstanceOf(SignerUnavailable);
      expect(down).toMatchObject({ status: 503, idempotencyKey: "signer-down-1" });
      expect(down.message).toMatch(/nothing was signed: retry with the same idempotency_key/);
      // Another version of the enclave on the socket: it answers, and cannot sign for us.
      await stack.enclave.start({ profile: "bridge_operator" });
      const cannot = await rejection(transfer());
      expect(cannot).toBeInstanceOf(SignerUnavailable);
      expect(cannot.idempotencyKey).toBe("signer-down-1");
    } finally {
      await stack.enclave.start();
    }
    const sent = await retryWhileSignerUnavailable(transfer);
    expect(sent.idempotency_key).toBe("signer-down-1");
    expect((await client.waitForAction(sent.action_id)).status).toBe("confirmed");
    expect(await chain.getBalance({ address: to })).toBe(1_000n * WEI_PER_UNIT);
    expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(1);
    expect(await actionsOf(agent.agentId)).toBe(1);
  });
});

/**
 * Repeats `call` while it is SignerUnavailable (the origin's enclave client reconnects after a
 * backoff of up to 5 s once the enclave is back), at most 30 s.
 */
async function retryWhileSignerUnavailable<T>(call: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof SignerUnavailable) || Date.now() > deadline) throw error;
      await sleep(200);
    }
  }
}
