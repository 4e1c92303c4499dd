import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount } from "../devnet/testing.ts";
import { queryRows } from "../origin/db/client.ts";
import { rejection } from "../testing/gateway-rejection.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { checkingFetch } from "../testing/openapi-check.ts";
import { useMoneyStack } from "../testing/stack.ts";
import { createGatewayClient, PaymentRefused, type PaymentRequired } from "./index.ts";

// fetchWithPayment against a seller that quotes x402 version 1 (the shape most sellers still answer
// with: `resource` inside each `accepts` entry, `maxAmountRequired`, a network by name), against the
// real stack with x402 on. The gateway pays version 2 quotes only; the agent must learn that, not
// that it sent something malformed.

const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

describe("x402 through the client: a seller quoting x402 version 1 (real stack)", () => {
  const stack = useMoneyStack({ x402: { amountUnits: AMOUNT, payTo } }, { timeoutMs: 120_000 });
  const fetch = checkingFetch();

  it("is PaymentRefused x402_requirement_unsupported naming the version, 422, nothing signed; never ValidationFailed; the check call denies it as the node's refusal", async () => {
    // Mutation: checking the quote's shape before its version (as it did) answers 400
    // validation_failed "payment_required.resource.url is required": exit 6, the agent's input
    // taken for the fault.
    const seller = await startLoopbackServer(async (request, response) => {
      response.writeHead(402, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          x402Version: 1,
          error: "X-PAYMENT header is required",
          accepts: [
            {
              scheme: "exact",
              network: "base-sepolia",
              maxAmountRequired: AMOUNT.toString(),
              resource: `http://${request.headers.host}${request.url}`,
              description: "an article",
              mimeType: "application/json",
              payTo,
              maxTimeoutSeconds: 60,
              asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
              extra: { name: "USDC", version: "2" },
            },
          ],
        }),
      );
    });
    try {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const client = createGatewayClient({ baseUrl: stack.origin.base, token: agent.token, fetch });
      // The check call answers what authorize would: the node refuses the quote for its version.
      const quote = (await (await globalThis.fetch(`${seller.url}/article`)).json()) as PaymentRequired;
      expect(await client.checkPolicy({ x402: { paymentRequired: quote } })).toEqual({
        decision: "deny",
        rule: "node.x402_requirement_unsupported",
        remaining: "0",
      });
      const refused = await rejection(client.fetchWithPayment(`${seller.url}/article`));
      expect(refused).toBeInstanceOf(PaymentRefused);
      expect(refused).toMatchObject({ code: "x402_requirement_unsupported", status: 422, exitCode: 16 });
      expect((refused as Error).message).toMatch(/version 2 .*not version 1/);
      const [row] = await queryRows<{ actions: number }>(
        stack.db.handle.db,
        sql`select count(*)::int as actions from agent_actions where agent_id = ${agent.agentId}`,
      );
      expect(row).toEqual({ actions: 0 });
    } finally {
      await seller.close();
    }
  });
});
