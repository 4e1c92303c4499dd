import { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentPayload } from "@x402/core/types";
import {
  appendPaymentIdentifierToExtensions,
  declarePaymentIdentifierExtension,
  generatePaymentId,
  PAYMENT_IDENTIFIER,
} from "@x402/extensions/payment-identifier";
import { decodePaymentResponseHeader, wrapFetchWithPayment, type x402Client } from "@x402/fetch";
import type { Address, PrivateKeyAccount } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { fund, newAccount, publicClientFor } from "../../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../../shared/constants.ts";
import { useStackEdge } from "../../../testing/edge.ts";
import { checkingFetch } from "../../../testing/openapi-check.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { chain77X402Client } from "../../../testing/x402-official-client.ts";
import {
  envelope,
  fundedPayer as fundedPayerOn,
  identifiedEnvelope,
  withPaymentId,
} from "../../../testing/x402-payer.ts";
import { authorizationUsedCount, settlementRowCount } from "../../../testing/x402-settlements.ts";
import { X402_REASONS } from "../reasons.ts";

// The x402 `payment-identifier` extension (docs/x402.md#payment-identifiers) through the edge, every
// part real (the edge worker in Miniflare, the origin, the enclave, the devnet, Postgres), with the
// official packages unchanged: `@x402/fetch` adds the id as the extension's own client helper does.
const EDGE_SECRET = "x402-payment-id-secret-0123456789abcdef0123456789";
const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

const stack = useMoneyStack(
  {
    x402: { amountUnits: AMOUNT, payTo },
    env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET, AGENT_X402_RECEIPT_TIMEOUT_MS: "60000" },
  },
  { timeoutMs: 180_000 },
);
const edge = useStackEdge(stack, EDGE_SECRET);
let demo: string;
/** fetch whose every answer must be one the served OpenAPI document declares (a 409 too). */
const documented = checkingFetch();

beforeAll(() => {
  demo = `${edge.url}/77/x402/demo`;
});

const chain = () => publicClientFor(stack.devnet.url);
const fundedPayer = () => fundedPayerOn(stack.devnet.url);
const paid = async (payer: PrivateKeyAccount) => ({
  onChain: await authorizationUsedCount(stack.devnet.url, payer.address),
  rows: await settlementRowCount(stack.db.handle.db, payer.address),
});

/** The official client, adding `id` to every payment as the extension's documentation shows. */
function clientWithId(payer: PrivateKeyAccount, id: string): x402Client {
  const client = chain77X402Client(payer);
  client.onBeforePaymentCreation(async ({ paymentRequired }) => {
    paymentRequired.extensions ??= {};
    appendPaymentIdentifierToExtensions(paymentRequired.extensions, id);
  });
  return client;
}

describe("the demo declares the payment-identifier extension", () => {
  it("its 402 carries the official declaration, optional, and /supported names the extension", async () => {
    const response = await fetch(demo);
    expect(response.status).toBe(402);
    const quote = (await response.json()) as { extensions?: Record<string, unknown> };
    expect(quote.extensions?.[PAYMENT_IDENTIFIER]).toEqual(declarePaymentIdentifierExtension(false));
    const supported = await new HTTPFacilitatorClient({
      url: `${edge.url}/77/x402/facilitator`,
    }).getSupported();
    expect(supported.extensions).toContain(PAYMENT_IDENTIFIER);
  });
});

describe("@x402/fetch with the payment-identifier extension", () => {
  it("pays once for two presentations with the same id: one transaction on chain, the second answer equal to the first", async () => {
    // Mutation: settling every presentation as its own payment (settleChecked without
    // settleOncePerId) pays twice here: the second answer names another transaction.
    const payer = await fundedPayer();
    const before = await chain().getBalance({ address: payer.address });
    const id = generatePaymentId();
    const paidFetch = wrapFetchWithPayment(fetch, clientWithId(payer, id));

    const first = await paidFetch(demo);
    expect(first.status).toBe(200);
    const firstBody = await first.json();
    const firstSettlement = decodePaymentResponseHeader(first.headers.get("PAYMENT-RESPONSE")!);
    // The official client signs a fresh authorization for the second call (another nonce): the id
    // alone says it is the same payment.
    const second = await paidFetch(demo);
    expect(second.status).toBe(200);
    expect(await second.json()).toEqual(firstBody);
    expect(decodePaymentResponseHeader(second.headers.get("PAYMENT-RESPONSE")!)).toEqual(firstSettlement);
    expect(firstSettlement).toMatchObject({ success: true, payer: payer.address.toLowerCase() });

    expect(await paid(payer)).toEqual({ onChain: 1, rows: 1 });
    expect(before - (await chain().getBalance({ address: payer.address }))).toBe(AMOUNT * WEI_PER_UNIT);
  });

  it("the same id with another payload (another resource) is refused 409 payment_identifier_conflict, nothing settled", async () => {
    // Mutation: a fingerprint without the resource URL answers the stored 200 here.
    const payer = await fundedPayer();
    const id = generatePaymentId();
    const paidFetch = wrapFetchWithPayment(documented, clientWithId(payer, id));
    expect((await paidFetch(demo)).status).toBe(200);

    const other = await paidFetch(`${demo}?item=2`);
    expect(other.status).toBe(409);
    expect(await other.json()).toMatchObject({ error: X402_REASONS.paymentIdentifierConflict });
    expect(await paid(payer)).toEqual({ onChain: 1, rows: 1 });
  });

  it("a payment made for another resource under an id buys nothing at the demo: a fresh authorization claiming that resource under the id is 409, not the demo answered for the other's payment", async () => {
    // The envelope's resource is the payer's word, not signed: the demo binds an id to what it
    // sells itself. Mutation: binding by the envelope's resource.url answers this 200 for free.
    const payer = await fundedPayer();
    const id = generatePaymentId();
    const report = { url: "https://seller.example/report", description: "a report", mimeType: "text/plain" };
    // A seller settles its own sale of `report` through the facilitator, under the payer's id.
    const sale = { ...(await identifiedEnvelope(demo, payer, id)), resource: report };
    const sold = await fetch(`${edge.url}/77/x402/facilitator/settle`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ x402Version: 2, paymentPayload: sale, paymentRequirements: sale.accepted }),
    });
    expect(sold.status).toBe(200);

    const claimed = { ...(await identifiedEnvelope(demo, payer, id)), resource: report };
    const answer = await documented(demo, {
      headers: { "PAYMENT-SIGNATURE": Buffer.from(JSON.stringify(claimed)).toString("base64") },
    });
    expect(answer.status).toBe(409);
    expect(await answer.json()).toMatchObject({ error: X402_REASONS.paymentIdentifierConflict });
    expect(await paid(payer)).toEqual({ onChain: 1, rows: 1 });
  });

  it("another payer's same id is that payer's own payment", async () => {
    const id = generatePaymentId();
    const [a, b] = [await fundedPayer(), await fundedPayer()];
    expect((await wrapFetchWithPayment(fetch, clientWithId(a, id))(demo)).status).toBe(200);
    expect((await wrapFetchWithPayment(fetch, clientWithId(b, id))(demo)).status).toBe(200);
    expect([await paid(a), await paid(b)]).toEqual([
      { onChain: 1, rows: 1 },
      { onChain: 1, rows: 1 },
    ]);
  });
});

describe("the facilitator's /verify and /settle with a payment id", () => {
  const facilitator = () => `${edge.url}/77/x402/facilitator`;
  const post = async (route: "verify" | "settle", payment: PaymentPayload) => {
    const response = await documented(`${facilitator()}/${route}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        x402Version: 2,
        paymentPayload: payment,
        paymentRequirements: payment.accepted,
      }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it("a second authorization under the same id answers the stored settlement (200, its transaction); another request under it is 409 from verify and settle", async () => {
    const payer = await fundedPayer();
    const id = generatePaymentId("order_");
    const first = await post("settle", await identifiedEnvelope(demo, payer, id));
    expect(first).toMatchObject({ status: 200, body: { success: true } });

    const again = await post("settle", await identifiedEnvelope(demo, payer, id));
    expect(again).toEqual(first);

    const elsewhere = await identifiedEnvelope(`${demo}?item=3`, payer, id);
    expect(await post("verify", elsewhere)).toEqual({
      status: 409,
      body: {
        isValid: false,
        invalidReason: X402_REASONS.paymentIdentifierConflict,
        payer: payer.address.toLowerCase(),
      },
    });
    expect(await post("settle", elsewhere)).toMatchObject({
      status: 409,
      body: { success: false, errorReason: X402_REASONS.paymentIdentifierConflict, transaction: "" },
    });
    expect(await paid(payer)).toEqual({ onChain: 1, rows: 1 });
  });

  it("verify answers a retry under the id of a settled request as /settle does, valid, though the payer's balance no longer covers a second payment", async () => {
    // The official resource server verifies every paid request before settling it: a retry of a
    // purchase whose answer was lost (a fresh authorization under the same id) must pass verify,
    // or the payer, charged once, is never answered.
    const payer = await fundedPayerOn(stack.devnet.url, AMOUNT);
    const id = generatePaymentId("order_");
    const first = await post("settle", await identifiedEnvelope(demo, payer, id));
    expect(first).toMatchObject({ status: 200, body: { success: true } });

    const retry = await identifiedEnvelope(demo, payer, id);
    expect(await post("verify", retry)).toEqual({
      status: 200,
      body: { isValid: true, payer: payer.address.toLowerCase() },
    });
    expect(await post("settle", retry)).toEqual(first);
    expect(await paid(payer)).toEqual({ onChain: 1, rows: 1 });
  });

  it("a settled payment presented again under a payment id it was not settled under is told the nonce is used, never answered paid again", async () => {
    // The id is not signed: whoever holds a settled payment may add one, or change it.
    // Settled without an id, then presented under a fresh id, and under another.
    const payer = await fundedPayer();
    const payment = await envelope(demo, payer);
    const first = await post("settle", payment);
    expect(first).toMatchObject({ status: 200, body: { success: true } });
    const ids = [generatePaymentId(), generatePaymentId()];
    for (const id of ids) {
      expect(await post("settle", withPaymentId(payment, id))).toMatchObject({
        status: 400,
        body: { success: false, errorReason: X402_REASONS.nonceUsed, transaction: first.body.transaction },
      });
    }
    // Nor is that id then the paid request of a new authorization under it: that one is paid for.
    const fresh = await post("settle", await identifiedEnvelope(demo, payer, ids[0]!));
    expect(fresh).toMatchObject({ status: 200, body: { success: true } });
    expect(fresh.body.transaction).not.toBe(first.body.transaction);
    // Settled under an id, then presented under another.
    const other = await fundedPayer();
    const identifiedPayment = await identifiedEnvelope(demo, other, generatePaymentId());
    const settled = await post("settle", identifiedPayment);
    expect(settled).toMatchObject({ status: 200, body: { success: true } });
    expect(await post("settle", withPaymentId(identifiedPayment, generatePaymentId()))).toMatchObject({
      status: 400,
      body: { success: false, errorReason: X402_REASONS.nonceUsed, transaction: settled.body.transaction },
    });
    expect(await paid(payer)).toEqual({ onChain: 2, rows: 2 });
    expect(await paid(other)).toEqual({ onChain: 1, rows: 1 });
  });

  it("an id outside the extension's rules is refused invalid_payment_identifier, nothing settled", async () => {
    const payer = await fundedPayer();
    const settled = await post("settle", await identifiedEnvelope(demo, payer, "too-short"));
    expect(settled).toMatchObject({
      status: 400,
      body: { success: false, errorReason: X402_REASONS.invalidPaymentIdentifier },
    });
    expect(await paid(payer)).toEqual({ onChain: 0, rows: 0 });
  });

  it("a payment refused before anything was signed leaves its id free: the same request, paid once funded, settles", async () => {
    // Mutation: releasePaymentId doing nothing leaves the id bound to the refused authorization,
    // whose nonce has no settlement: the funded retry waits out the hold, and the demo's 60 s
    // authorization has expired by then.
    const payer = await fundedPayerOn(stack.devnet.url, AMOUNT - 1n);
    const id = generatePaymentId();
    const refused = await post("settle", await identifiedEnvelope(demo, payer, id));
    expect(refused.body).toMatchObject({ success: false, errorReason: X402_REASONS.insufficientBalance });
    await fund(stack.devnet.url, payer.address, AMOUNT * WEI_PER_UNIT);
    const started = Date.now();
    const settled = await post("settle", await identifiedEnvelope(demo, payer, id));
    expect(settled).toMatchObject({ status: 200, body: { success: true } });
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(await paid(payer)).toEqual({ onChain: 1, rows: 1 });
  });
});
