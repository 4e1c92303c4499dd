import { HTTPFacilitatorClient } from "@x402/core/server";
import type { Hono } from "hono";
import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount } from "../devnet/testing.ts";
import { rejection } from "../testing/gateway-rejection.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { checkingFetch } from "../testing/openapi-check.ts";
import { useMoneyStack } from "../testing/stack.ts";
import { officialArticleSeller, PAID_ARTICLE } from "../testing/x402-official-seller.ts";
import { authorizationUsedCount } from "../testing/x402-settlements.ts";
import { createGatewayClient, PaymentOutcomeUnknown, PaymentRefused, paymentSettlement } from "./index.ts";

// fetchWithPayment against an official @x402/hono seller settling through our facilitator (the real
// stack: origin, enclave, devnet, Postgres), whose settle answer is lost on its way back to the
// seller. The official seller then answers the paid request 402 with a PAYMENT-RESPONSE naming its
// own failure ("fetch failed"), while the payment settled on chain: the agent paid.

const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;
const ARTICLE = "http://seller.test/article";

describe("x402 through the client: a seller whose settle answer was lost (real stack, official seller)", () => {
  const stack = useMoneyStack({ x402: { amountUnits: AMOUNT, payTo } }, { timeoutMs: 120_000 });
  const fetch = checkingFetch();

  /**
   * The seller's way to the facilitator: every request passes to the real one; while `losing`, a
   * settle's answer is read whole from the facilitator and then its connection is dropped (a fake
   * network loss between the seller and the facilitator, named as such: the settlement is real).
   */
  const startFacilitatorLink = async () => {
    const link = { losing: true, settlesLost: 0 };
    const upstream = `${stack.origin.base}/x402/facilitator`;
    const server = await startLoopbackServer(async (request, response) => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks);
      const answer = await globalThis.fetch(`${upstream}${request.url}`, {
        method: request.method,
        headers: { "content-type": request.headers["content-type"] ?? "application/json" },
        ...(request.method === "GET" || request.method === "HEAD" ? {} : { body }),
      });
      const text = await answer.text();
      if (link.losing && request.url === "/settle") {
        link.settlesLost += 1;
        throw new Error("the settle's answer is lost on the way back");
      }
      response.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "" });
      response.end(text);
    });
    return { link, server };
  };

  /** An official seller of one article over the facilitator at `facilitatorUrl`. */
  const sellerOver = (facilitatorUrl: string) =>
    officialArticleSeller({
      facilitator: new HTTPFacilitatorClient({ url: facilitatorUrl }),
      payTo,
      amount: AMOUNT,
      maxTimeoutSeconds: 60,
    });

  /**
   * The agent's requests to the seller reach the official middleware in this process; the
   * gateway's go over the network, checked against the OpenAPI document.
   */
  const through =
    (seller: Hono): typeof globalThis.fetch =>
    async (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      return url.startsWith("http://seller.test/")
        ? await seller.fetch(new Request(url, init))
        : await fetch(input, init);
    };

  it("a seller answers the paid request 402 naming its settle's failure while the payment settled: PaymentOutcomeUnknown with the key, never PaymentRefused; repeated with the key, the article is delivered, paid once", async () => {
    // Mutation: a client that takes every paid request answered 402 for a refusal of the payment
    // (as it did) throws PaymentRefused `payment_not_accepted` here, "nothing to retry", with no
    // key to retry with, while the agent's wallet has paid the seller.
    const { link, server } = await startFacilitatorLink();
    try {
      const seller = sellerOver(server.url);
      const agent = await stack.newAgent({ units: 1_000_000n });
      const client = createGatewayClient({
        baseUrl: stack.origin.base,
        token: agent.token,
        fetch: through(seller),
      });

      const lost = await rejection(client.fetchWithPayment(ARTICLE));
      expect(link.settlesLost).toBeGreaterThan(0);
      // The payment settled: the agent's wallet paid the seller once.
      await expect
        .poll(() => authorizationUsedCount(stack.devnet.url, agent.wallet), { timeout: 30_000 })
        .toBe(1);
      expect(lost).not.toBeInstanceOf(PaymentRefused);
      expect(lost).toBeInstanceOf(PaymentOutcomeUnknown);
      expect(lost).toMatchObject({ code: "payment_outcome_unknown", status: 402, exitCode: 17 });
      expect((lost as Error).message).toMatch(/fetch failed.*may have settled.*same idempotency key/);
      const key = (lost as PaymentOutcomeUnknown).idempotencyKey;
      expect(key).toMatch(/^x402-[0-9a-f]{64}$/);

      // The seller's link is whole again: the same payment, presented under its payment id, is
      // answered as the request it settled, and the seller delivers.
      link.losing = false;
      const repeated = await client.fetchWithPayment(ARTICLE, {}, { idempotencyKey: key });
      expect(repeated.status).toBe(200);
      expect(await repeated.json()).toEqual(PAID_ARTICLE);
      expect(paymentSettlement(repeated)).toMatchObject({ success: true });
      expect(await authorizationUsedCount(stack.devnet.url, agent.wallet)).toBe(1);
    } finally {
      await server.close();
    }
  });

  it("a payment the seller's facilitator refuses by its checks (a wallet that cannot pay) is still PaymentRefused: nothing moved, nothing to repeat", async () => {
    const { link, server } = await startFacilitatorLink();
    link.losing = false;
    try {
      const seller = sellerOver(server.url);
      // Funded with less than the price: the gateway signs (it does not read balances), the
      // facilitator refuses the payment for its balance before anything is signed.
      const agent = await stack.newAgent({ units: AMOUNT / 2n });
      const client = createGatewayClient({
        baseUrl: stack.origin.base,
        token: agent.token,
        fetch: through(seller),
      });
      const refused = await rejection(client.fetchWithPayment(ARTICLE));
      expect(refused).toBeInstanceOf(PaymentRefused);
      expect(refused).toMatchObject({ code: "payment_not_accepted", status: 402, exitCode: 16 });
      expect(await authorizationUsedCount(stack.devnet.url, agent.wallet)).toBe(0);
    } finally {
      await server.close();
    }
  });
});
