import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { queryRows } from "../origin/db/client.ts";
import { sleep } from "../shared/sleep.ts";
import { rejection } from "../testing/gateway-rejection.ts";
import { useMoneyStack } from "../testing/stack.ts";
import { authorizationUsedCount, settlementRowCount } from "../testing/x402-settlements.ts";
import { createGatewayClient, PAYMENT_SIGNATURE_HEADER, PaymentOutcomeUnknown } from "./index.ts";

// A retry of a paid call whose answer was lost, against a demo paid to the enclave's payee key
// (as `npm start` runs it), whose 402 carries a signed offer the node signs again once half the
// quote's timeout has passed: the retry's quote is the same purchase with another offer. Every
// part real: origin, enclave, devnet, Postgres.

const AMOUNT = 10_000n;
/** The node's validity bound: its offers are served again for 10 s, then signed anew. */
const MAX_TIMEOUT_SECONDS = 20;

// Its two tests wait out the offer's reuse beside each other: each pays with an agent of its own,
// and counts only that agent's actions, signatures and settlements.
describe("x402 retries across a new offer (real stack, offers on)", {
  timeout: 120_000,
  concurrent: true,
}, () => {
  const stack = useMoneyStack(
    {
      x402: { amountUnits: AMOUNT, payTo: "enclave-payee" },
      policy: { x402MaxTimeoutSeconds: MAX_TIMEOUT_SECONDS },
      env: { AGENT_X402_MAX_TIMEOUT_SECONDS: String(MAX_TIMEOUT_SECONDS) },
    },
    { timeoutMs: 180_000 },
  );

  /** Pays the demo, loses the paid answer, and repeats the call once the demo signed a new offer. */
  const retryAcrossNewOffer = async (idempotencyKey: string | undefined) => {
    // Mutation: the request hash binding the quote's offer-receipt extension (as before) answers
    // this retry 409 idempotency_conflict, and the agent's only way on is a new key: a second payment.
    const agent = await stack.newAgent({ units: 1_000_000n });
    const demo = `${stack.origin.base}/x402/demo`;
    const offerOf = async () =>
      JSON.stringify(((await (await fetch(demo)).json()) as { extensions: unknown }).extensions);
    const losing: typeof globalThis.fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (new Headers(init?.headers).get(PAYMENT_SIGNATURE_HEADER) !== null) {
        await response.body?.cancel();
        throw new TypeError("fetch failed (the answer was lost)");
      }
      return response;
    };
    const client = (fetchFn: typeof globalThis.fetch) =>
      createGatewayClient({ baseUrl: stack.origin.base, token: agent.token, fetch: fetchFn });
    const options = idempotencyKey === undefined ? {} : { idempotencyKey };
    const offered = await offerOf();
    const lost = await rejection(client(losing).fetchWithPayment(demo, {}, options));
    expect(lost).toBeInstanceOf(PaymentOutcomeUnknown);
    // Past the offer's reuse, well within the authorization's validity (6 s margin).
    await sleep((MAX_TIMEOUT_SECONDS / 2) * 1000 + 1_000);
    expect(await offerOf()).not.toBe(offered);
    const retried = await client(fetch).fetchWithPayment(demo, {}, options);
    expect(retried.status, await retried.clone().text()).toBe(200);
    const [row] = await queryRows<{ actions: number; signed: number }>(
      stack.db.handle.db,
      sql`select (select count(*)::int from agent_actions where kind = 'x402' and agent_id = ${agent.agentId}) as actions,
                 (select coalesce(sum(authorizations), 0)::int from x402_daily_authorizations where agent_id = ${agent.agentId}) as signed`,
    );
    expect(row).toEqual({ actions: 1, signed: 1 });
    expect(await authorizationUsedCount(stack.devnet.url, agent.wallet)).toBe(1);
    expect(await settlementRowCount(stack.db.handle.db, agent.wallet)).toBe(1);
  };

  it("a retry without a key after a lost answer, once the demo signed a new offer, presents the same payment: paid once, one signature", () =>
    retryAcrossNewOffer(undefined));

  it("a retry with its key after a lost answer, once the demo signed a new offer, presents the same payment: paid once, one signature", () =>
    retryAcrossNewOffer("x402-offer-retry-with-key"));
});
