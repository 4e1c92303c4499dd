import { randomUUID } from "node:crypto";
import type { PaymentRequired } from "@x402/core/types";
import {
  decodeSignedOffers,
  type EIP712SignedOffer,
  type EIP712SignedReceipt,
  extractOffersFromPaymentRequired,
  extractReceiptFromResponse,
  findAcceptsObjectFromSignedOffer,
  verifyOfferSignatureEIP712,
  verifyReceiptMatchesOffer,
  verifyReceiptSignatureEIP712,
} from "@x402/extensions/offer-receipt";
import { decodePaymentResponseHeader, wrapFetchWithPayment } from "@x402/fetch";
import { sql } from "drizzle-orm";
import type { Address, Hex } from "viem";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { newAccount, publicClientFor, rpc } from "../../../devnet/testing.ts";
import {
  HEADER_CLIENT_IP,
  HEADER_EDGE_SECRET,
  HEADER_QUOTE_REUSE,
  HEADER_REQUEST_URL,
  NATIVE_TRANSFER_AUTH_ADDRESS,
} from "../../../shared/constants.ts";
import { sleep } from "../../../shared/sleep.ts";
import { useStackEdge } from "../../../testing/edge.ts";
import { enclaveDown, type Fault } from "../../../testing/fault-scenario.ts";
import { startTestOrigin } from "../../../testing/origin.ts";
import { parsePrometheusText } from "../../../testing/prometheus.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { chain77X402Client } from "../../../testing/x402-official-client.ts";
import { expectRetryPaidOnce } from "../../../testing/x402-paid-once.ts";
import { envelope, fundedPayer, pay, paymentHeader } from "../../../testing/x402-payer.ts";
import { authorizationUsedCount } from "../../../testing/x402-settlements.ts";
import { queryRows } from "../../db/client.ts";
import { X402_REASONS } from "../reasons.ts";
import { QUOTE_REUSE_AT_MOST_SECONDS } from "./demo.ts";

// Offers and receipts (docs/x402.md#offers-and-receipts) through the edge, every part real: the
// demo is paid to the enclave's payee key, the official @x402/fetch client pays it unchanged, and
// the official offer-receipt functions verify the 402's offer and the 200's receipt offline
// against the payee's address; the receipt's transaction is the one on chain.
const EDGE_SECRET = "x402-offer-receipt-secret-0123456789abcdef0123456789";
const AMOUNT = 10_000n;
const ADMIN_TOKEN = "x402-offer-receipt-admin-0123456789abcdef0123456789";

/**
 * How long the origins' signer client waits for the enclave's answer: 2 s, not its 10 s
 * (SIGNER_REQUEST_TIMEOUT_MS), so that the receipt asked of a paused enclave is given up sooner.
 */
const SIGNER_WAIT_MS = 2_000;

const stack = useMoneyStack(
  {
    x402: { amountUnits: AMOUNT, payTo: "enclave-payee" },
    signerTimings: { requestTimeoutMs: SIGNER_WAIT_MS },
    env: {
      AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
      AGENT_X402_RECEIPT_TIMEOUT_MS: "60000",
      AGENT_ADMIN_API_TOKEN: ADMIN_TOKEN,
    },
  },
  { timeoutMs: 180_000 },
);
const edge = useStackEdge(stack, EDGE_SECRET);
let demo: string;

beforeAll(() => {
  demo = `${edge.url}/77/x402/demo`;
});

const chain = () => publicClientFor(stack.devnet.url);

describe("offers and receipts signed in the enclave by the payee key (through the edge)", () => {
  it("the 402 carries one offer per accepts entry, signed by the payee key over the quote's terms", async () => {
    const response = await fetch(demo);
    expect(response.status).toBe(402);
    const quote = (await response.json()) as PaymentRequired;
    const offers = extractOffersFromPaymentRequired(quote);
    expect(offers).toHaveLength(quote.accepts.length);
    const offer = offers[0] as EIP712SignedOffer;
    expect(offer.format).toBe("eip712");

    const verified = await verifyOfferSignatureEIP712(offer);
    expect(verified.signer.toLowerCase()).toBe(stack.payee.toLowerCase());
    expect(quote.accepts[0]!.payTo.toLowerCase()).toBe(stack.payee.toLowerCase());
    expect(findAcceptsObjectFromSignedOffer(offer, quote.accepts)).toEqual(quote.accepts[0]);
    const now = Math.floor(Date.now() / 1000);
    expect(verified.payload).toMatchObject({
      version: 1,
      resourceUrl: quote.resource.url,
      scheme: "exact",
      network: "eip155:77",
      asset: NATIVE_TRANSFER_AUTH_ADDRESS.toLowerCase(),
      amount: AMOUNT.toString(),
    });
    expect(verified.payload.validUntil).toBeGreaterThan(now);
    expect(verified.payload.validUntil).toBeLessThanOrEqual(now + quote.accepts[0]!.maxTimeoutSeconds + 5);
    // The header carries the same quote, offers included.
    const header = JSON.parse(Buffer.from(response.headers.get("PAYMENT-REQUIRED")!, "base64").toString());
    expect(header).toEqual(quote);
  });

  it("@x402/fetch pays once; the 200's receipt verifies offline against the payee and names the transaction on chain", async () => {
    const payer = await fundedPayer(stack.devnet.url);
    const offered = decodeSignedOffers(
      extractOffersFromPaymentRequired((await (await fetch(demo)).json()) as PaymentRequired),
    )[0]!;

    const response = await wrapFetchWithPayment(fetch, chain77X402Client(payer))(demo);
    expect(response.status).toBe(200);
    const settlement = decodePaymentResponseHeader(response.headers.get("PAYMENT-RESPONSE")!);
    expect(settlement.success).toBe(true);

    const receipt = extractReceiptFromResponse(response) as EIP712SignedReceipt | undefined;
    expect(receipt?.format).toBe("eip712");
    const verified = await verifyReceiptSignatureEIP712(receipt!);
    expect(verified.signer.toLowerCase()).toBe(stack.payee.toLowerCase());
    expect(verified.payload).toMatchObject({
      version: 1,
      network: "eip155:77",
      resourceUrl: offered.resourceUrl,
      payer: payer.address.toLowerCase(),
      transaction: settlement.transaction,
    });
    expect(verifyReceiptMatchesOffer(receipt!, offered, [payer.address])).toBe(true);

    // The receipt's transaction is the settlement on chain: mined, from the settler, to the
    // precompile, and it paid the payee the quoted amount.
    const mined = await chain().getTransactionReceipt({ hash: verified.payload.transaction as Hex });
    expect(mined.status).toBe("success");
    expect(mined.from.toLowerCase()).toBe(stack.settler!.toLowerCase());
    expect(mined.to?.toLowerCase()).toBe(NATIVE_TRANSFER_AUTH_ADDRESS.toLowerCase());
    const transferTopic = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
    const transfer = mined.logs.find((log) => log.topics[0] === transferTopic);
    expect(transfer?.topics[1]?.slice(-40)).toBe(payer.address.toLowerCase().slice(2));
    expect(transfer?.topics[2]?.slice(-40)).toBe(stack.payee.toLowerCase().slice(2));
    expect(BigInt(transfer!.data)).toBe(AMOUNT);
  });
});

describe("the unpaid quote, given by the edge while its offer is served", () => {
  /** The unpaid GETs of the demo the origin itself answered, from its metrics. */
  const quotedByOrigin = async (): Promise<number> => {
    const response = await fetch(`${stack.origin.url}/77/metrics`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(response.status).toBe(200);
    const metrics = parsePrometheusText(await response.text());
    return (
      metrics.value("origin_http_request_duration_seconds_count", {
        route: "/77/x402/demo",
        method: "GET",
        status: "402",
      }) ?? 0
    );
  };

  it("the origin quotes a URL once; the edge gives the same 402 to the next unpaid GETs, and @x402/fetch pays with it", async () => {
    const url = `${demo}?quote=${randomUUID()}`;
    const before = await quotedByOrigin();
    const first = await fetch(url);
    expect(first.status).toBe(402);
    const quote = (await first.json()) as PaymentRequired;
    expect(extractOffersFromPaymentRequired(quote)).toHaveLength(1);
    for (let i = 0; i < 3; i++) {
      const again = await fetch(url);
      expect(again.status).toBe(402);
      expect(await again.json()).toEqual(quote);
      expect(again.headers.get("PAYMENT-REQUIRED")).toBe(first.headers.get("PAYMENT-REQUIRED"));
      expect(again.headers.get(HEADER_QUOTE_REUSE)).toBeNull();
    }
    expect(await quotedByOrigin()).toBe(before + 1);

    // The official client's unpaid GET gets the edge's quote; its paid one reaches the origin.
    const payer = await fundedPayer(stack.devnet.url);
    const paid = await wrapFetchWithPayment(fetch, chain77X402Client(payer))(url);
    expect(paid.status).toBe(200);
    expect(decodePaymentResponseHeader(paid.headers.get("PAYMENT-RESPONSE")!).success).toBe(true);
    expect(await quotedByOrigin()).toBe(before + 1);
  });

  it("the origin says how long only to the edge, never past its offer, and only of an unpaid GET", async () => {
    const path = `/77/x402/demo?quote=${randomUUID()}`;
    const direct = await fetch(`${stack.origin.url}${path}`);
    expect(direct.status).toBe(402);
    expect(direct.headers.get(HEADER_QUOTE_REUSE)).toBeNull();
    const asEdge = {
      [HEADER_EDGE_SECRET]: EDGE_SECRET,
      [HEADER_CLIENT_IP]: "203.0.113.9",
      [HEADER_REQUEST_URL]: `https://edge.example${path}`,
    };
    // The offer for the edge's URL, signed at its first GET, is two seconds older at the second.
    const signing = await fetch(`${stack.origin.url}${path}`, { headers: asEdge });
    expect(Number(signing.headers.get(HEADER_QUOTE_REUSE))).toBeGreaterThan(0);
    await sleep(2_000);
    const viaEdge = await fetch(`${stack.origin.url}${path}`, { headers: asEdge });
    const seconds = Number(viaEdge.headers.get(HEADER_QUOTE_REUSE));
    const quote = (await viaEdge.json()) as PaymentRequired;
    const offer = extractOffersFromPaymentRequired(quote)[0]!;
    const { payload } = await verifyOfferSignatureEIP712(offer as EIP712SignedOffer);
    expect(seconds).toBeGreaterThanOrEqual(1);
    expect(seconds).toBeLessThanOrEqual(QUOTE_REUSE_AT_MOST_SECONDS);
    // The offer is served again for the first half of its validity, the edge no longer than that.
    const maxTimeout = quote.accepts[0]!.maxTimeoutSeconds;
    expect(Date.now() / 1000 + seconds).toBeLessThanOrEqual(payload.validUntil! - maxTimeout / 2 + 1);

    const wrongSecret = await fetch(`${stack.origin.url}${path}`, {
      headers: { ...asEdge, [HEADER_EDGE_SECRET]: `${EDGE_SECRET}x` },
    });
    expect(wrongSecret.status).toBe(402);
    expect(wrongSecret.headers.get(HEADER_QUOTE_REUSE)).toBeNull();
    const refusedPayment = await fetch(`${stack.origin.url}${path}`, {
      headers: { ...asEdge, "PAYMENT-SIGNATURE": "e30=" },
    });
    expect(refusedPayment.status).toBe(402);
    expect(refusedPayment.headers.get(HEADER_QUOTE_REUSE)).toBeNull();
  });
});

describe("unpaid GETs of a new URL each", () => {
  it("have the enclave sign no more offers for one client than its window allows; an offer already signed is still served", async () => {
    // Mutation: an offer signed for every URL not yet held (no window) signs all 30 here: a
    // client varying the query string has the enclave sign once per request, without limit.
    const origin = await startOriginLogging({ AGENT_X402_RATE_LIMIT_PER_MINUTE: "10" }, () => {});
    try {
      const offerOf = async (url: string) => {
        const response = await fetch(url);
        expect(response.status).toBe(402);
        const quote = (await response.json()) as PaymentRequired;
        return extractOffersFromPaymentRequired(quote)[0];
      };
      const known = `${origin.base}/x402/demo`;
      expect(await offerOf(known)).toBeDefined();
      const offers = [];
      for (let n = 0; n < 30; n++) offers.push(await offerOf(`${origin.base}/x402/demo?n=${n}`));
      expect(offers.filter((offer) => offer !== undefined).length).toBe(9);
      expect(await offerOf(known)).toBeDefined();
    } finally {
      await origin.close();
    }
  }, 120_000);
});

describe("an operator who turns offers and receipts off", () => {
  it("AGENT_X402_OFFER_RECEIPTS_DISABLED=true: the payee key's demo serves neither, says so at start-up, and is paid as before", async () => {
    // Mutation: ignoring the switch in origin/x402/router.ts serves the offer here.
    const lines: string[] = [];
    const origin = await startOriginLogging({ AGENT_X402_OFFER_RECEIPTS_DISABLED: "true" }, (line) =>
      lines.push(line),
    );
    try {
      const logged = lines.map((line) => JSON.parse(line) as { msg: string });
      expect(logged).toContainEqual(
        expect.objectContaining({
          msg: "x402 offers and receipts are off: AGENT_X402_OFFER_RECEIPTS_DISABLED is true",
        }),
      );
      const url = `${origin.base}/x402/demo`;
      const quote = (await (await fetch(url)).json()) as PaymentRequired;
      expect(quote.accepts[0]!.payTo.toLowerCase()).toBe(stack.payee.toLowerCase());
      expect(quote.extensions?.["offer-receipt"]).toBeUndefined();

      const payer = await fundedPayer(stack.devnet.url);
      const response = await wrapFetchWithPayment(fetch, chain77X402Client(payer))(url);
      expect(response.status).toBe(200);
      expect(decodePaymentResponseHeader(response.headers.get("PAYMENT-RESPONSE")!).success).toBe(true);
      expect(extractReceiptFromResponse(response)).toBeUndefined();
    } finally {
      await origin.close();
    }
  });
});

describe("a paid request whose receipt the enclave cannot sign", () => {
  /** The settler transaction of `payer`'s settlement, once stored and taken by the devnet's pool. */
  const broadcastOf = async (payer: Address): Promise<Hex | undefined> => {
    const [row] = await queryRows<{ tx_hash: Hex | null }>(
      stack.db.handle.db,
      sql`select tx_hash from x402_settlements where payer = ${payer.toLowerCase()}`,
    );
    if (!row?.tx_hash) return undefined;
    const pooled = await rpc(stack.devnet.url, "eth_getTransactionByHash", [row.tx_hash]);
    return pooled.result ? row.tx_hash : undefined;
  };

  /**
   * Pays the demo with the enclave gone between the settlement's signature and the receipt's: the
   * devnet holds the settlement until `fault` is on, then mines it. The paid answer, how long it
   * took from the mining, and the same payment presented again.
   */
  const payAcrossFault = async (fault: Fault) => {
    const payer = await fundedPayer(stack.devnet.url);
    const signature = paymentHeader(await envelope(demo, payer));
    expect(await rpc(stack.devnet.url, "dev_setAutomine", [false])).toMatchObject({ result: true });
    let faulted = false;
    try {
      const answered = pay(demo, signature);
      const transaction = await vi.waitUntil(() => broadcastOf(payer.address), {
        timeout: 30_000,
        interval: 50,
      });
      await fault.on();
      faulted = true;
      const minedAt = Date.now();
      expect(await rpc(stack.devnet.url, "dev_mine", [])).toMatchObject({ result: true });
      const paid = await answered;
      const tookMs = Date.now() - minedAt;
      const retry = await pay(demo, signature);
      return { payer, transaction, paid, tookMs, retry };
    } finally {
      if (faulted) await fault.off();
      await rpc(stack.devnet.url, "dev_setAutomine", [true]);
      await rpc(stack.devnet.url, "dev_mine", []);
    }
  };

  // The receipt is signed after the settlement's paid answer is taken (settle.ts), so a receipt
  // that cannot be signed must not cost the payer its answer, which a retry of the same payment no
  // longer gets. Mutation: offer-receipt.ts receiptExtension throwing where the signer refused
  // answers both tests 500 internal_error, the retry 402 nonce used: paid, and nothing delivered.
  const deliveredOnce = async ({
    payer,
    transaction,
    paid,
    retry,
  }: Awaited<ReturnType<typeof payAcrossFault>>) => {
    expect(paid.status, JSON.stringify(paid.body)).toBe(200);
    expect(paid.body).toMatchObject({ ok: true, transaction });
    expect(paid.response).toMatchObject({ success: true, transaction });
    expect(paid.response?.extensions).toBeUndefined();
    expect(retry.status, JSON.stringify(retry.body)).toBe(402);
    expect(retry.response).toMatchObject({
      success: false,
      errorReason: X402_REASONS.nonceUsed,
      transaction,
    });
    expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
  };

  it("enclave stopped after the settlement's signature: the 200 is delivered without a receipt, once; a retry is told the nonce is used", async () => {
    await deliveredOnce(await payAcrossFault(enclaveDown(stack.enclave)));
  }, 60_000);

  it("enclave paused (SIGSTOP) after the settlement's signature: the 200 is delivered without a receipt once the signer's wait ends; a retry is told the nonce is used", async () => {
    const pid = stack.enclave.pid()!;
    const outcome = await payAcrossFault({
      on: async () => process.kill(pid, "SIGSTOP"),
      off: async () => process.kill(pid, "SIGCONT"),
    });
    // The receipt's request waited out the signer client's timeout: the enclave was asked.
    expect(outcome.tookMs).toBeGreaterThanOrEqual(SIGNER_WAIT_MS - 100);
    await deliveredOnce(outcome);
  }, 60_000);
});

describe("a payer that leaves while its receipt is signed", () => {
  it("takes no paid answer: its retry of the same payment is paid, once, and the next told the nonce is used (straight to the origin)", async () => {
    // The settle takes the paid answer once mined; the receipt is asked for after, and the enclave,
    // paused, keeps it waiting. The payer leaves then. Mutation: demo.ts not giving the answer
    // back answers the retry 402 invalid_exact_evm_nonce_already_used: paid, and nothing delivered.
    const direct = `${stack.origin.base}/x402/demo`;
    const payer = await fundedPayer(stack.devnet.url);
    const signature = paymentHeader(await envelope(direct, payer));
    const pid = stack.enclave.pid()!;
    const taken = async () => {
      const [row] = await queryRows<{ tx_hash: Hex; taken: boolean }>(
        stack.db.handle.db,
        sql`select x.tx_hash, a.taken_at is not null as taken from x402_settlements x
            join x402_paid_answers a on a.settlement_id = x.id where x.payer = ${payer.address.toLowerCase()}`,
      );
      return row?.taken ? row.tx_hash : undefined;
    };
    expect(await rpc(stack.devnet.url, "dev_setAutomine", [false])).toMatchObject({ result: true });
    let paused = false;
    let transaction: Hex;
    try {
      const leaving = new AbortController();
      const first = fetch(direct, { headers: { "PAYMENT-SIGNATURE": signature }, signal: leaving.signal });
      await vi.waitUntil(
        async () =>
          (
            await queryRows(
              stack.db.handle.db,
              sql`select 1 from x402_settlements where payer = ${payer.address.toLowerCase()} and tx_hash is not null`,
            )
          ).length > 0,
        { timeout: 30_000, interval: 50 },
      );
      process.kill(pid, "SIGSTOP");
      paused = true;
      expect(await rpc(stack.devnet.url, "dev_mine", [])).toMatchObject({ result: true });
      // Mined, recorded and taken: the answer now waits on the receipt's signature.
      transaction = await vi.waitUntil(taken, { timeout: 30_000, interval: 50 });
      leaving.abort();
      await expect(first).rejects.toThrow();
      // The origin sees the connection close before the enclave answers.
      await sleep(300);
    } finally {
      if (paused) process.kill(pid, "SIGCONT");
      await rpc(stack.devnet.url, "dev_setAutomine", [true]);
    }
    // Until the origin, its receipt answered, has given the answer back; without that, this runs
    // out and the retry below shows what the payer then sees.
    await vi
      .waitUntil(async () => (await taken()) === undefined, { timeout: 10_000, interval: 50 })
      .catch(() => undefined);

    await expectRetryPaidOnce(direct, signature, {
      devnetUrl: stack.devnet.url,
      payer: payer.address,
      transaction: transaction!,
    });
  }, 60_000);
});

// Last in the file: it reseals the policy with another payTo, which the stack's own origin no
// longer matches.
describe("a node whose payTo is not the enclave's payee key", () => {
  it("serves no offers and no receipts, says so at start-up, and is paid as before", async () => {
    const elsewhere = newAccount().address.toLowerCase() as Address;
    const resealed = await stack.signer.configurePolicy(
      { ...stack.policy, x402PayTo: elsewhere },
      stack.authorities.policy,
    );
    expect(resealed.ok).toBe(true);
    const lines: string[] = [];
    const origin = await startOriginLogging({ AGENT_X402_PAY_TO: elsewhere }, (line) => lines.push(line));
    try {
      const warned = lines.map((line) => JSON.parse(line) as { level: number; msg: string });
      expect(warned).toContainEqual(
        expect.objectContaining({
          level: 40,
          msg: "x402 offers and receipts are off: AGENT_X402_PAY_TO is not the enclave's payee key",
        }),
      );
      const url = `${origin.base}/x402/demo`;
      const quote = (await (await fetch(url)).json()) as PaymentRequired;
      expect(quote.extensions?.["offer-receipt"]).toBeUndefined();
      expect(quote.accepts[0]!.payTo).toBe(elsewhere);

      const payer = await fundedPayer(stack.devnet.url);
      const response = await wrapFetchWithPayment(fetch, chain77X402Client(payer))(url);
      expect(response.status).toBe(200);
      expect(decodePaymentResponseHeader(response.headers.get("PAYMENT-RESPONSE")!).success).toBe(true);
      expect(extractReceiptFromResponse(response)).toBeUndefined();
    } finally {
      await origin.close();
    }
  });
});

async function startOriginLogging(
  env: Record<string, string>,
  onLogLine: (line: string) => void,
): Promise<{ base: string; close: () => Promise<void> }> {
  const started = await startTestOrigin({
    database: stack.db.handle,
    rpcUrl: stack.devnet.url,
    env: { ...stack.originEnv, ...env },
    onLogLine,
  });
  return { base: started.base, close: () => started.close() };
}
