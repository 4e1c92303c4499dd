import type { IncomingHttpHeaders } from "node:http";
import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { nodeFetch } from "../cli/node-fetch.ts";
import { newAccount, publicClientFor } from "../devnet/testing.ts";
import { queryRows } from "../origin/db/client.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { rejection } from "../testing/gateway-rejection.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import type { StackAgent } from "../testing/money-stack.ts";
import { checkingFetch } from "../testing/openapi-check.ts";
import { useMoneyStack } from "../testing/stack.ts";
import { authorizationUsedCount, settlementRowCount } from "../testing/x402-settlements.ts";
import {
  type AgentEvent,
  createGatewayClient,
  type GatewayClient,
  isActionEvent,
  PAYMENT_REQUIRED_HEADER,
  PAYMENT_RESPONSE_HEADER,
  PAYMENT_SIGNATURE_HEADER,
  PaymentOutcomeUnknown,
  type PaymentRequired,
  paymentSettlement,
} from "./index.ts";

// The client's x402 side (docs/agents.md) against the real stack with x402 on (origin, enclave, devnet,
// Postgres, the in-process facilitator): the demo's 402 paid through the gateway's authorization
// and settled on chain. Every answer the client receives is checked against the OpenAPI document.

const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

describe("x402 through the client (real stack, x402 on)", () => {
  const stack = useMoneyStack({ x402: { amountUnits: AMOUNT, payTo } }, { timeoutMs: 120_000 });
  let demo: string;
  const fetch = checkingFetch();
  const chain = () => publicClientFor(stack.devnet.url);
  const clientFor = (agent: StackAgent, fetchFn: typeof globalThis.fetch = fetch): GatewayClient =>
    createGatewayClient({ baseUrl: stack.origin.base, token: agent.token, fetch: fetchFn });
  /** Times this agent's wallet paid: AuthorizationUsed logs on chain, and settlement rows. */
  const payments = async (agent: StackAgent) => ({
    onChain: await authorizationUsedCount(stack.devnet.url, agent.wallet),
    rows: await settlementRowCount(stack.db.handle.db, agent.wallet),
  });

  beforeAll(async () => {
    demo = `${stack.origin.base}/x402/demo`;
  }, 120_000);

  it("authorizeX402(quote) gives the PAYMENT-SIGNATURE value the demo accepts; its action ends signed", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const client = clientFor(agent);
    const unpaid = await fetch(demo);
    expect(unpaid.status).toBe(402);
    const quote = (await unpaid.json()) as PaymentRequired;

    const authorization = await client.authorizeX402(quote);
    const paid = await fetch(demo, {
      headers: { [PAYMENT_SIGNATURE_HEADER]: authorization.payment_signature },
    });
    expect(paid.status).toBe(200);
    expect(await payments(agent)).toEqual({ onChain: 1, rows: 1 });
    // An x402 authorization's action ends at signed (the payee settles it, not us): waiting
    // for it returns at once instead of polling for a confirmation that never comes.
    const action = await client.waitForAction(authorization.action_id, { timeoutMs: 5_000 });
    expect(action).toMatchObject({ kind: "x402", status: "signed" });
  });

  it("isActionEvent holds for x402.authorization.signed from the stream, whose data is the x402 action as GET answers it", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    // The built-in fetch: the OpenAPI check reads whole bodies, and a stream has no end.
    const wallet = clientFor(agent, globalThis.fetch);
    const response = await wallet.fetchWithPayment(demo);
    expect(response.status).toBe(200);
    const stop = AbortSignal.timeout(30_000);
    const events: AgentEvent[] = [];
    for await (const event of wallet.events({ after: "0", signal: stop })) {
      events.push(event);
      if (event.type === "x402.authorization.signed") break;
    }
    const signed = events.at(-1)!;
    expect(signed.type, events.map((event) => event.type).join(", ")).toBe("x402.authorization.signed");
    // docs/events.md#the-event-log: its data is the action, so a client narrowing with the guard
    // gets it as it gets the action's own `action.signed`.
    expect(isActionEvent(signed)).toBe(true);
    if (!isActionEvent(signed)) return;
    expect(signed.data).toEqual(await wallet.action(signed.data.action_id));
    expect(signed.data).toMatchObject({ kind: "x402", status: "signed" });
    // Every event of the payer's stream here carries the action, and the guard says so of each.
    expect(events.map((event) => [event.type, isActionEvent(event)])).toEqual([
      ["action.requested", true],
      ["action.signed", true],
      ["x402.authorization.signed", true],
    ]);
  });

  it("fetchWithPayment pays the demo's 402 once: 200, the wallet down by exactly the amount", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const before = await chain().getBalance({ address: agent.wallet });
    const response = await clientFor(agent).fetchWithPayment(demo);
    expect(response.status).toBe(200);
    // The settler pays the gas: the agent's wallet loses the amount and nothing more.
    expect(before - (await chain().getBalance({ address: agent.wallet }))).toBe(AMOUNT * WEI_PER_UNIT);
    expect(await payments(agent)).toEqual({ onChain: 1, rows: 1 });
  });

  it("never pays twice: the paid retry's answer lost, the call repeated with its key, one settlement", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    // A fault the client cannot meet for real on demand: the paid request reaches the demo and is
    // settled, then its answer is dropped on the way back (a fake network loss, named as such).
    const losing: typeof globalThis.fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (new Headers(init?.headers).has(PAYMENT_SIGNATURE_HEADER)) {
        await response.body?.cancel();
        throw new TypeError("fetch failed (the answer was lost)");
      }
      return response;
    };
    const before = await chain().getBalance({ address: agent.wallet });
    const lost = await rejection(clientFor(agent, losing).fetchWithPayment(demo));
    expect(lost).toBeInstanceOf(PaymentOutcomeUnknown);
    const key = (lost as PaymentOutcomeUnknown).idempotencyKey;
    expect(await payments(agent)).toEqual({ onChain: 1, rows: 1 });

    // The same logical request again: the gateway hands back the same authorization, and the demo
    // answers the same payment as paid, by its one settlement. Nothing is paid a second time.
    const repeated = await clientFor(agent)
      .fetchWithPayment(demo, {}, { idempotencyKey: key })
      .then(
        (response) => response.status,
        (caught: unknown) => caught,
      );
    expect(await payments(agent)).toEqual({ onChain: 1, rows: 1 });
    expect(repeated).toBe(200);
    expect(before - (await chain().getBalance({ address: agent.wallet }))).toBe(AMOUNT * WEI_PER_UNIT);
  });

  it("a paid request answered 502 by the way to the resource is PaymentOutcomeUnknown; repeated with its key, paid once", async () => {
    // Mutation: a client that returns a paid request's 502 as the answer (as it did) fails the
    // first expectation: the caller gets a Response and no word that it may have paid.
    const agent = await stack.newAgent({ units: 1_000_000n });
    // A fault the client cannot meet for real on demand: a proxy in front of the demo whose upstream
    // answer is lost after the demo settled, answering 502 itself (a fake proxy, named as such).
    const proxyLosing: typeof globalThis.fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (!new Headers(init?.headers).has(PAYMENT_SIGNATURE_HEADER)) return response;
      await response.body?.cancel();
      return new Response("<html>502 Bad Gateway</html>", {
        status: 502,
        headers: { "content-type": "text/html" },
      });
    };
    const lost = await rejection(clientFor(agent, proxyLosing).fetchWithPayment(demo));
    expect(lost).toBeInstanceOf(PaymentOutcomeUnknown);
    expect(lost).toMatchObject({ status: 502, code: "payment_outcome_unknown" });
    expect((lost as Error).message).toMatch(/answered 502 .*may have settled.*same idempotency key/);
    const key = (lost as PaymentOutcomeUnknown).idempotencyKey;
    expect(key).toMatch(/^x402-[0-9a-f]{64}$/);
    expect(await payments(agent)).toEqual({ onChain: 1, rows: 1 });

    const repeated = await clientFor(agent).fetchWithPayment(demo, {}, { idempotencyKey: key });
    expect(repeated.status).toBe(200);
    expect(await payments(agent)).toEqual({ onChain: 1, rows: 1 });
  });

  it("a retry without the key, after a lost answer, signs one authorization: one action, one signature, one settlement, the payment id the key", async () => {
    // Mutation: a client that makes a fresh key per call (as before) signs a second authorization
    // here: two actions, two signatures counted for the day.
    const agent = await stack.newAgent({ units: 1_000_000n });
    const presented: string[] = [];
    const losing: typeof globalThis.fetch = async (input, init) => {
      const response = await fetch(input, init);
      const payment = new Headers(init?.headers).get(PAYMENT_SIGNATURE_HEADER);
      if (payment !== null) {
        presented.push(payment);
        await response.body?.cancel();
        throw new TypeError("fetch failed (the answer was lost)");
      }
      return response;
    };
    const lost = await rejection(clientFor(agent, losing).fetchWithPayment(demo));
    expect(lost).toBeInstanceOf(PaymentOutcomeUnknown);
    // The caller retries the same call as it was written, with no key of its own.
    const retried = await clientFor(agent).fetchWithPayment(demo);
    expect(retried.status).toBe(200);

    const rows = await queryRows<{ actions: number; signed: number }>(
      stack.db.handle.db,
      sql`select (select count(*)::int from agent_actions where kind = 'x402' and agent_id = ${agent.agentId}) as actions,
                 (select coalesce(sum(authorizations), 0)::int from x402_daily_authorizations where agent_id = ${agent.agentId}) as signed`,
    );
    expect(rows[0]).toEqual({ actions: 1, signed: 1 });
    expect(await payments(agent)).toEqual({ onChain: 1, rows: 1 });
    // The envelope names the payment by the gateway's key, as the payment-identifier extension does.
    const key = (lost as PaymentOutcomeUnknown).idempotencyKey!;
    expect(key).toMatch(/^x402-[0-9a-f]{64}$/);
    const envelope = JSON.parse(Buffer.from(presented[0]!, "base64").toString()) as {
      extensions: Record<string, { info: { id?: string } }>;
    };
    expect(envelope.extensions["payment-identifier"]!.info.id).toBe(key);
  });

  /**
   * A seller in front of the demo (the demo never redirects: a fake seller, named as such; the
   * payments and their settlements are the demo's, real): `/paid`, once paid, redirects to
   * `/receipt`; `/moved` redirects to `/direct`, which answers as the demo does.
   */
  const startSeller = async () => {
    const receiptRequests: IncomingHttpHeaders[] = [];
    const seller = await startLoopbackServer(async (request, response) => {
      if (request.url === "/receipt") {
        receiptRequests.push(request.headers);
        response.end("receipt");
        return;
      }
      if (request.url === "/moved") {
        response.writeHead(308, { location: "/direct" });
        response.end();
        return;
      }
      const payment = request.headers[PAYMENT_SIGNATURE_HEADER.toLowerCase()] as string | undefined;
      const answer = await fetch(
        demo,
        payment === undefined ? {} : { headers: { [PAYMENT_SIGNATURE_HEADER]: payment } },
      );
      const headers: Record<string, string> = {};
      for (const name of [PAYMENT_REQUIRED_HEADER, PAYMENT_RESPONSE_HEADER, "content-type"]) {
        const value = answer.headers.get(name);
        if (value !== null) headers[name] = value;
      }
      const body = await answer.text();
      if (answer.status === 200 && request.url === "/paid") {
        response.writeHead(303, { ...headers, location: "/receipt" });
        response.end();
      } else {
        response.writeHead(answer.status, headers);
        response.end(body);
      }
    });
    return { seller, receiptRequests };
  };

  // Mutation: presenting the payment with fetch's default redirect ("follow") sends
  // PAYMENT-SIGNATURE on to the redirect's target and answers its page, the settlement lost.
  it.each([
    ["fetch", undefined],
    ["the CLI's node:http fetch", nodeFetch],
  ])(
    "a paid request answered with a redirect returns that answer, its settlement, and sends the payment nowhere else (%s)",
    async (_, viaFetch) => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const { seller, receiptRequests } = await startSeller();
      try {
        const client = viaFetch
          ? createGatewayClient({ baseUrl: stack.origin.base, token: agent.token, fetch: viaFetch })
          : clientFor(agent);
        const paid = await client.fetchWithPayment(`${seller.url}/paid`);
        const carried = receiptRequests.map((headers) => PAYMENT_SIGNATURE_HEADER.toLowerCase() in headers);
        expect(carried, "the payment was sent on to the redirect's target").toEqual([]);
        expect(paid.status).toBe(303);
        expect(paid.headers.get("location")).toBe("/receipt");
        expect(paymentSettlement(paid)).toMatchObject({
          success: true,
          transaction: expect.stringMatching(/^0x/),
        });
        expect(await payments(agent)).toEqual({ onChain: 1, rows: 1 });
      } finally {
        await seller.close();
      }
    },
  );

  // Mutation: presenting the payment to the URL asked first, not the one that answered the 402,
  // gets that URL's redirect back, the payment presented nowhere: 308, nothing paid.
  it.each([
    ["fetch", undefined],
    ["the CLI's node:http fetch", nodeFetch],
  ])(
    "a resource that quotes after a redirect is paid where it quoted: 200, paid once (%s)",
    async (_, viaFetch) => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const { seller } = await startSeller();
      try {
        const client = viaFetch
          ? createGatewayClient({ baseUrl: stack.origin.base, token: agent.token, fetch: viaFetch })
          : clientFor(agent);
        const paid = await client.fetchWithPayment(`${seller.url}/moved`);
        expect(paid.status).toBe(200);
        expect(paymentSettlement(paid)).toMatchObject({ success: true });
        expect(await payments(agent)).toEqual({ onChain: 1, rows: 1 });
      } finally {
        await seller.close();
      }
    },
  );

  it("a new key pays for the same quote again", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    expect((await clientFor(agent).fetchWithPayment(demo)).status).toBe(200);
    expect(
      (await clientFor(agent).fetchWithPayment(demo, {}, { idempotencyKey: "x402-second-purchase-1" }))
        .status,
    ).toBe(200);
    expect(await payments(agent)).toEqual({ onChain: 2, rows: 2 });
  });
});
