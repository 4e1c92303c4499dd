import { HTTPFacilitatorClient, x402ResourceServer } from "@x402/core/server";
import type { PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { ExactEvmScheme as ExactEvmServer } from "@x402/evm/exact/server";
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { paymentMiddleware } from "@x402/hono";
import { sql } from "drizzle-orm";
import { Hono } from "hono";
import type { Address, Hex, PrivateKeyAccount } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import { DEV_OPERATOR_POOL_PRIVATE_KEY } from "../../../devnet/index.ts";
import {
  highS,
  newAccount,
  publicClientFor,
  transferWithAuthorizationCalldata,
  walletClientFor,
} from "../../../devnet/testing.ts";
import { CAIP2_NETWORK, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../../shared/constants.ts";
import { useStackEdge } from "../../../testing/edge.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { chain77X402Client } from "../../../testing/x402-official-client.ts";
import {
  envelope as envelopeFor,
  fundedPayer as fundedPayerOn,
  pay as payDemo,
  paymentHeader,
  quote as quoteOf,
} from "../../../testing/x402-payer.ts";
import { DEMO_EXTRA } from "../../../testing/x402-quote.ts";
import { authorizationUsedCount } from "../../../testing/x402-settlements.ts";
import { queryRows } from "../../db/client.ts";
import { X402_REASONS } from "../reasons.ts";

// x402 authorize, verification and settlement (docs/x402.md) against the real stack (devnet,
// enclave, Postgres, the origin, the edge in Miniflare), paid and checked with the official x402
// packages unchanged.
const EDGE_SECRET = "x402-edge-secret-0123456789abcdef0123456789abcdef";
const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

const stack = useMoneyStack(
  {
    x402: { amountUnits: AMOUNT, payTo },
    // A generous receipt wait: on a loaded machine 100 settlements at once can take longer than the
    // default 10 s, and the acceptance is 100 paid answers (a late receipt is settlement_pending,
    // which x402-faults.int.test.ts proves on its own).
    env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET, AGENT_X402_RECEIPT_TIMEOUT_MS: "80000" },
  },
  { timeoutMs: 120_000 },
);
const edge = useStackEdge(stack, EDGE_SECRET, {}, { timeoutMs: 120_000 });
let demo: string;

beforeAll(() => {
  demo = `${stack.origin.base}/x402/demo`;
});

const chain = () => publicClientFor(stack.devnet.url);
const fundedPayer = (units?: bigint) => fundedPayerOn(stack.devnet.url, units);
const quote = () => quoteOf(demo);
const envelope = (account: PrivateKeyAccount, change?: (a: PaymentRequirements) => PaymentRequirements) =>
  envelopeFor(demo, account, change);
const header = paymentHeader;
const pay = (signature: string) => payDemo(demo, signature);
const authorizationUsedLogs = (payer: Address) => authorizationUsedCount(stack.devnet.url, payer);

describe("GET /x402/demo", () => {
  it("answers an unpaid request with the spec's quote in the body and, Base64, in PAYMENT-REQUIRED", async () => {
    const response = await fetch(`${edge.url}/77/x402/demo`);
    expect(response.status).toBe(402);
    const body = await response.json();
    expect(body).toEqual({
      x402Version: 2,
      resource: {
        url: expect.stringContaining("/77/x402/demo"),
        mimeType: "application/json",
        description: expect.any(String),
      },
      accepts: [
        {
          scheme: "exact",
          network: "eip155:77",
          asset: NATIVE_TRANSFER_AUTH_ADDRESS.toLowerCase(),
          amount: "10000",
          payTo,
          maxTimeoutSeconds: 60,
          extra: {
            assetTransferMethod: "eip3009",
            paymentFlow: "authorization",
            kind: "native",
            name: "USDC",
            version: "2",
            decimals: 6,
            symbol: "USDC",
          },
        },
      ],
      // A payment id is welcome, not required (docs/x402.md#payment-identifiers).
      extensions: { "payment-identifier": { info: { required: false }, schema: expect.any(Object) } },
    });
    expect(JSON.parse(Buffer.from(response.headers.get("PAYMENT-REQUIRED")!, "base64").toString())).toEqual(
      body,
    );
  });

  it("@x402/fetch with a funded viem account pays through the edge: 200 after a 0x1 receipt, exactly 10000 units", async () => {
    const payer = await fundedPayer();
    const before = await chain().getBalance({ address: payer.address });
    const client = x402Client.fromConfig({
      schemes: [{ network: CAIP2_NETWORK, client: new ExactEvmScheme(payer) }],
      spendControls: {
        allowedAssets: [
          { network: CAIP2_NETWORK, asset: NATIVE_TRANSFER_AUTH_ADDRESS, maxAmountPerPayment: "10000" },
        ],
      },
    });
    const paidFetch = wrapFetchWithPayment(fetch, client);
    const response = await paidFetch(`${edge.url}/77/x402/demo`);
    expect(response.status).toBe(200);
    const settlement = decodePaymentResponseHeader(response.headers.get("PAYMENT-RESPONSE")!);
    expect(settlement).toMatchObject({
      success: true,
      network: "eip155:77",
      payer: payer.address.toLowerCase(),
    });
    const receipt = await chain().getTransactionReceipt({ hash: settlement.transaction as Hex });
    expect(receipt.status).toBe("success");
    expect(before - (await chain().getBalance({ address: payer.address }))).toBe(AMOUNT * WEI_PER_UNIT);
    const [row] = await queryRows<{ status: string; tx_hash: string }>(
      stack.db.handle.db,
      sql`select status, tx_hash from x402_settlements where payer = ${payer.address.toLowerCase()}`,
    );
    expect(row).toEqual({ status: "settled", tx_hash: settlement.transaction });
  });

  it("a HEAD, whose answer has no body, settles nothing: @x402/fetch's paid HEAD is answered the quote and pays nothing; the payment it would have spent buys the GET's answer", async () => {
    // A HEAD is answered as the GET without its body: were its payment settled, the payer would be
    // charged and its one paid answer taken, with the content never delivered.
    const payer = await fundedPayer();
    const before = await chain().getBalance({ address: payer.address });
    const paidFetch = wrapFetchWithPayment(fetch, chain77X402Client(payer));
    const viaEdge = `${edge.url}/77/x402/demo`;
    const head = await paidFetch(viaEdge, { method: "HEAD" });
    expect(head.status).toBe(402);
    expect(head.headers.get("PAYMENT-RESPONSE")).toBeNull();
    const signature = header(await envelope(payer));
    const direct = await fetch(demo, { method: "HEAD", headers: { "PAYMENT-SIGNATURE": signature } });
    expect(direct.status).toBe(402);
    expect(direct.headers.get("PAYMENT-REQUIRED")).not.toBeNull();
    expect(await authorizationUsedLogs(payer.address)).toBe(0);
    expect(await chain().getBalance({ address: payer.address })).toBe(before);
    // The same payment, sent with a GET, is settled and answered with the content, once.
    const answer = await pay(signature);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ ok: true, transaction: answer.response!.transaction });
    expect(await authorizationUsedLogs(payer.address)).toBe(1);
    expect(before - (await chain().getBalance({ address: payer.address }))).toBe(AMOUNT * WEI_PER_UNIT);
  });

  it("@x402/fetch with its default spend controls refuses the chain-77 demo (not a default asset) and pays nothing; docs/x402.md's allowedAssets step is what lets it pay", async () => {
    const payer = await fundedPayer();
    const before = await chain().getBalance({ address: payer.address });
    const schemes = [{ network: CAIP2_NETWORK as `${string}:${string}`, client: new ExactEvmScheme(payer) }];
    const demo = `${edge.url}/77/x402/demo`;
    const byDefault = wrapFetchWithPayment(fetch, x402Client.fromConfig({ schemes }));
    await expect(byDefault(demo)).rejects.toThrow(
      /rejected by spendControls: only default assets or entries in spendControls.allowedAssets are allowed/,
    );
    const [{ count } = { count: -1 }] = await queryRows<{ count: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as count from x402_settlements where payer = ${payer.address.toLowerCase()}`,
    );
    expect(count).toBe(0);
    expect(await chain().getBalance({ address: payer.address })).toBe(before);

    const allowed = wrapFetchWithPayment(
      fetch,
      x402Client.fromConfig({
        schemes,
        spendControls: {
          allowedAssets: [
            { network: CAIP2_NETWORK, asset: NATIVE_TRANSFER_AUTH_ADDRESS, maxAmountPerPayment: "10000" },
          ],
        },
      }),
    );
    expect((await allowed(demo)).status).toBe(200);
    expect(before - (await chain().getBalance({ address: payer.address }))).toBe(AMOUNT * WEI_PER_UNIT);
  });

  it("50 concurrent presentations of one PAYMENT-SIGNATURE: one settlement on chain, one answered paid, 49 told the nonce is used by it, and so is a later one; the same authorization under another signature encoding too", async () => {
    // A settled payment is answered as paid once, so the demo serves one answer for one payment
    // (docs/x402.md): the presentation that settled it; the others, concurrent or later, learn only
    // that its nonce is used, and by which transaction. Mutation: answering every presentation of
    // the settled payload as paid (as before) fails the first expectation with 50 paid.
    const payer = await fundedPayer();
    const payment = await envelope(payer);
    const signature = header(payment);
    const answers = await Promise.all(Array.from({ length: 50 }, () => pay(signature)));
    expect(tally(answers.map((answer) => `${answer.status} ${answer.body.error ?? "paid"}`))).toEqual({
      "200 paid": 1,
      [`402 ${X402_REASONS.nonceUsed}`]: 49,
    });
    const transactions = new Set(answers.map((answer) => answer.response!.transaction));
    expect(transactions.size).toBe(1);
    const [transaction] = [...transactions];
    expect(await authorizationUsedLogs(payer.address)).toBe(1);
    const later = await pay(signature);
    expect(later.status).toBe(402);
    expect(later.response).toMatchObject({
      success: false,
      errorReason: X402_REASONS.nonceUsed,
      transaction,
    });
    // Another payload for the same (from, nonce): the same signature with v as 0/1 instead of 27/28
    // (both verify), so not the payment that settled. It learns only that the nonce is used, and by
    // which transaction.
    const payload = payment.payload as { signature: string };
    const v = Number.parseInt(payload.signature.slice(-2), 16);
    const reencoded = `${payload.signature.slice(0, -2)}${(v - 27).toString(16).padStart(2, "0")}`;
    const other = await pay(header({ ...payment, payload: { ...payload, signature: reencoded } }));
    expect(other.status).toBe(402);
    expect(other.response).toMatchObject({
      success: false,
      transaction,
      errorReason: X402_REASONS.nonceUsed,
    });
    expect(await authorizationUsedLogs(payer.address)).toBe(1);
  });

  it("100 concurrent distinct payments: 100 settlements, 100 distinct settler nonces, every receipt 0x1", async () => {
    const payers = await Promise.all(Array.from({ length: 100 }, () => fundedPayer()));
    const signatures = await Promise.all(payers.map(async (payer) => header(await envelope(payer))));
    const answers = await Promise.all(signatures.map((signature) => pay(signature)));
    // Counted by status and reason, so a failure says what came back instead of a bare array.
    expect(tally(answers.map((answer) => `${answer.status} ${answer.body.error ?? "paid"}`))).toEqual({
      "200 paid": 100,
    });
    const rows = await queryRows<{ status: string; settler_nonce: string; tx_hash: string }>(
      stack.db.handle.db,
      sql`select status, settler_nonce::text, tx_hash from x402_settlements
          where payer = any(${`{${payers.map((p) => p.address.toLowerCase()).join(",")}}`}::text[])`,
    );
    expect(rows).toHaveLength(100);
    expect(new Set(rows.map((row) => row.settler_nonce)).size).toBe(100);
    expect(tally(rows.map((row) => row.status))).toEqual({ settled: 100 });
    const receipts = await Promise.all(
      rows.map((row) => chain().getTransactionReceipt({ hash: row.tx_hash as Hex })),
    );
    expect(tally(receipts.map((receipt) => receipt.status))).toEqual({ success: 100 });
  }, 240_000);

  it("payments the chain's facts refuse, among concurrent ones: each refused with its reason, its claim released, the rest settled on consecutive settler nonces", async () => {
    const funded = await Promise.all(Array.from({ length: 8 }, () => fundedPayer()));
    const short = await Promise.all(Array.from({ length: 4 }, () => fundedPayer(9_999n)));
    const payers = [...funded, ...short];
    const signatures = await Promise.all(payers.map(async (payer) => header(await envelope(payer))));
    const answers = await Promise.all(signatures.map((signature) => pay(signature)));
    expect(tally(answers.map((answer) => `${answer.status} ${answer.body.error ?? "paid"}`))).toEqual({
      "200 paid": 8,
      [`402 ${X402_REASONS.insufficientBalance}`]: 4,
    });
    const rows = await queryRows<{ status: string; settler_nonce: string }>(
      stack.db.handle.db,
      sql`select status, settler_nonce::text from x402_settlements
          where payer = any(${`{${payers.map((p) => p.address.toLowerCase()).join(",")}}`}::text[])`,
    );
    expect(tally(rows.map((row) => row.status))).toEqual({ settled: 8 });
    const nonces = rows.map((row) => Number(row.settler_nonce)).sort((a, b) => a - b);
    expect(nonces.at(-1)! - nonces[0]!).toBe(7);
  });

  it("a settle the chain's facts refuse (balance short, nonce used elsewhere): 402 with PAYMENT-RESPONSE naming the reason, no transaction", async () => {
    const short = header(await envelope(await fundedPayer(9_999n)));
    const spent = await envelope(await fundedPayer());
    await settleElsewhere(spent.payload as { signature: Hex; authorization: Record<string, string> });
    for (const [signature, reason] of [
      [short, X402_REASONS.insufficientBalance],
      [header(spent), X402_REASONS.nonceUsed],
    ] as const) {
      const answer = await pay(signature);
      expect(answer.status, reason).toBe(402);
      expect(answer.body.error, reason).toBe(reason);
      expect(answer.response, reason).toMatchObject({
        success: false,
        errorReason: reason,
        transaction: "",
        network: "eip155:77",
      });
    }
  });

  it("a signature whose v is 0 or 1 settles with receipt 0x1: the enclave's calldata carries it as 27 or 28", async () => {
    for (const parity of ["00", "01"]) {
      let payload = await envelope(await fundedPayer());
      // Signatures whose v is 27 + parity, until one has the parity wanted.
      while (
        (payload.payload as { signature: Hex }).signature.slice(-2) !== (parity === "00" ? "1b" : "1c")
      ) {
        payload = await envelope(await fundedPayer());
      }
      const signature = (payload.payload as { signature: Hex }).signature;
      const answer = await pay(
        header({
          ...payload,
          payload: { ...payload.payload, signature: `${signature.slice(0, -2)}${parity}` },
        }),
      );
      expect(answer.status, `v = ${parity}: ${JSON.stringify(answer.body)}`).toBe(200);
      const receipt = await chain().getTransactionReceipt({ hash: answer.response!.transaction as Hex });
      expect(receipt.status).toBe("success");
    }
  });

  describe("refuses with a reason and settles nothing", () => {
    const now = () => BigInt(Math.floor(Date.now() / 1000));
    const cases: [string, string, () => Promise<string>][] = [
      ["not Base64", X402_REASONS.invalidPayloadBase64, async () => "%%%not-base64%%%"],
      ["not JSON", X402_REASONS.invalidPayloadJson, async () => Buffer.from("{not json").toString("base64")],
      [
        "no resource.url",
        X402_REASONS.invalidPayload,
        async () => {
          const payload = await envelope(await fundedPayer());
          return header({ ...payload, resource: { mimeType: "application/json" } });
        },
      ],
      [
        "no accepted",
        X402_REASONS.invalidPayload,
        async () => {
          const { accepted: _, ...payload } = await envelope(await fundedPayer());
          return header(payload);
        },
      ],
      [
        "x402Version 1",
        X402_REASONS.invalidX402Version,
        async () => header({ ...(await envelope(await fundedPayer())), x402Version: 1 }),
      ],
      [
        "another network",
        X402_REASONS.networkMismatch,
        async () => {
          const payload = await envelope(await fundedPayer());
          return header({ ...payload, accepted: { ...payload.accepted, network: "eip155:8453" } });
        },
      ],
      [
        "another asset",
        X402_REASONS.assetMismatch,
        async () => {
          const payload = await envelope(await fundedPayer());
          return header({
            ...payload,
            accepted: { ...payload.accepted, asset: "0x036cbd53842c5426634e7929541ec2318f3dcf7e" },
          });
        },
      ],
      [
        "another payTo",
        X402_REASONS.recipientMismatch,
        async () => {
          const payload = await envelope(await fundedPayer(), (a) => ({ ...a, payTo: newAccount().address }));
          return header(payload);
        },
      ],
      [
        "another amount",
        X402_REASONS.valueMismatch,
        async () => {
          const payload = await envelope(await fundedPayer(), (a) => ({ ...a, amount: "9999" }));
          return header(payload);
        },
      ],
      [
        "validBefore too far",
        X402_REASONS.validityTooLong,
        async () => {
          const payload = await envelope(await fundedPayer(), (a) => ({ ...a, maxTimeoutSeconds: 3_600 }));
          return header(payload);
        },
      ],
      [
        "expired",
        X402_REASONS.validBefore,
        async () => signedBy(await fundedPayer(), { validAfter: 0n, validBefore: now() - 10n }),
      ],
      [
        "not yet valid",
        X402_REASONS.validAfter,
        async () => signedBy(await fundedPayer(), { validAfter: now() + 30n, validBefore: now() + 50n }),
      ],
      [
        "valid from this very second (validAfter = now: mined in a block of this second, it reverts)",
        X402_REASONS.validAfter,
        async () => signedBy(await fundedPayer(), { validAfter: now(), validBefore: now() + 50n }),
      ],
      [
        "validBefore one second ahead (inside the margin: mined a second later, it reverts)",
        X402_REASONS.validBefore,
        async () => signedBy(await fundedPayer(), { validAfter: 0n, validBefore: now() + 1n }),
      ],
      [
        "a bad signature",
        X402_REASONS.signature,
        async () => {
          const payload = await envelope(await fundedPayer());
          const other = await envelope(newAccount());
          const forged = {
            ...payload,
            payload: { ...payload.payload, signature: (other.payload as { signature: string }).signature },
          };
          return header(forged);
        },
      ],
      [
        "a high-S signature",
        X402_REASONS.signatureHighS,
        async () => {
          const payload = await envelope(await fundedPayer());
          return header({
            ...payload,
            payload: {
              ...payload.payload,
              signature: highS((payload.payload as { signature: Hex }).signature),
            },
          });
        },
      ],
      [
        "from = the operator pool",
        X402_REASONS.payerNotAllowed,
        async () => header(await envelope(privateKeyToAccount(DEV_OPERATOR_POOL_PRIVATE_KEY))),
      ],
      [
        "a payer without the balance",
        X402_REASONS.insufficientBalance,
        async () => header(await envelope(await fundedPayer(9_999n))),
      ],
      [
        "an authorization another relayer already settled on chain",
        X402_REASONS.nonceUsed,
        async () => {
          const payload = await envelope(await fundedPayer());
          await settleElsewhere(payload.payload as { signature: Hex; authorization: Record<string, string> });
          return header(payload);
        },
      ],
    ];
    for (const [name, reason, make] of cases) {
      it(name, async () => {
        const settlementsBefore = await countSettlements();
        const answer = await pay(await make());
        expect(answer.status).toBe(402);
        expect(answer.body.error).toBe(reason);
        expect(await countSettlements()).toBe(settlementsBefore);
      });
    }

    async function signedBy(
      account: PrivateKeyAccount,
      window: { validAfter: bigint; validBefore: bigint },
    ): Promise<string> {
      const { resource, accepted } = await quote();
      const nonce = `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}` as Hex;
      const authorization = { from: account.address, to: payTo, value: AMOUNT, nonce, ...window };
      const signature = await account.signTypedData({
        domain: { name: "USDC", version: "2", chainId: 77, verifyingContract: NATIVE_TRANSFER_AUTH_ADDRESS },
        types: {
          TransferWithAuthorization: [
            { name: "from", type: "address" },
            { name: "to", type: "address" },
            { name: "value", type: "uint256" },
            { name: "validAfter", type: "uint256" },
            { name: "validBefore", type: "uint256" },
            { name: "nonce", type: "bytes32" },
          ],
        },
        primaryType: "TransferWithAuthorization",
        message: authorization,
      });
      return header({
        x402Version: 2,
        resource,
        accepted,
        payload: {
          signature,
          authorization: {
            ...authorization,
            value: String(AMOUNT),
            validAfter: String(window.validAfter),
            validBefore: String(window.validBefore),
          },
        },
      });
    }
  });
});

describe("facilitator", () => {
  it("@x402/core's HTTPFacilitatorClient lists, verifies and settles against ours unchanged", async () => {
    const facilitator = new HTTPFacilitatorClient({ url: `${edge.url}/77/x402/facilitator` });
    const supported = await facilitator.getSupported();
    expect(supported.kinds).toEqual([
      expect.objectContaining({ x402Version: 2, scheme: "exact", network: "eip155:77" }),
    ]);
    const payer = await fundedPayer();
    const payload = await envelope(payer);
    const verified = await facilitator.verify(payload, payload.accepted);
    expect(verified).toMatchObject({ isValid: true, payer: payer.address.toLowerCase() });
    const settled = await facilitator.settle(payload, payload.accepted);
    expect(settled).toMatchObject({
      success: true,
      network: "eip155:77",
      payer: payer.address.toLowerCase(),
    });
    expect((await chain().getTransactionReceipt({ hash: settled.transaction as Hex })).status).toBe(
      "success",
    );
    // The settle's answer lost and asked again: the same transaction, nothing signed again.
    const again = await facilitator
      .settle(payload, payload.accepted)
      .catch((error: { errorReason?: string; transaction?: string }) => error);
    expect(again).toMatchObject({ transaction: settled.transaction });
    expect(await authorizationUsedLogs(payer.address)).toBe(1);
    const reverify = await facilitator
      .verify(payload, payload.accepted)
      .catch((error: { invalidReason?: string }) => error);
    expect(reverify).toMatchObject({ invalidReason: X402_REASONS.nonceUsed });
  });

  it("an official @x402/hono seller over ours serves one of three concurrent requests carrying one payment, and neither a replay nor another resource presenting the same authorization", async () => {
    // The seller delivers on a settle answered success, so a settled payment must be answered
    // success once (docs/x402.md#after-settlement_pending-retry-the-same-payment). Mutation:
    // answering every presentation of the settled payload as paid serves both requests.
    const client = new HTTPFacilitatorClient({ url: `${edge.url}/77/x402/facilitator` });
    const server = new x402ResourceServer(client).register(CAIP2_NETWORK, new ExactEvmServer());
    const accepts = {
      scheme: "exact",
      network: CAIP2_NETWORK,
      payTo,
      price: { amount: AMOUNT.toString(), asset: NATIVE_TRANSFER_AUTH_ADDRESS, extra: { ...DEMO_EXTRA } },
      maxTimeoutSeconds: 60,
    } as const;
    const seller = new Hono();
    seller.use(
      paymentMiddleware(
        { "GET /article": { accepts, description: "an article", mimeType: "application/json" } },
        server,
      ),
    );
    // The middleware runs the handler before it settles, and answers 402 instead when the settle fails.
    seller.get("/article", (c) => c.json({ article: "paid for" }));
    const article = "http://seller.test/article";
    const unpaid = await seller.fetch(new Request(article));
    expect(unpaid.status).toBe(402);
    const required = JSON.parse(
      Buffer.from(unpaid.headers.get("PAYMENT-REQUIRED")!, "base64").toString(),
    ) as {
      resource: unknown;
      accepts: PaymentRequirements[];
    };
    const payer = await fundedPayer();
    const accepted = required.accepts[0]!;
    const created = await new ExactEvmScheme(payer).createPaymentPayload(2, accepted);
    const payment = { x402Version: 2, resource: required.resource, accepted, payload: created.payload };
    const paid = () =>
      seller.fetch(new Request(article, { headers: { "PAYMENT-SIGNATURE": header(payment) } }));
    const answers = await Promise.all([paid(), paid(), paid()]);
    const delivered = async (answer: Response) =>
      `${answer.status} ${(await answer.text()).includes("paid for")}`;
    expect((await Promise.all(answers.map(delivered))).sort()).toEqual([
      "200 true",
      "402 false",
      "402 false",
    ]);
    expect(await delivered(await paid())).toBe("402 false");
    expect(await authorizationUsedLogs(payer.address)).toBe(1);
    // The same authorization presented to the facilitator for another resource: not a second sale.
    const elsewhere = {
      ...payment,
      resource: { url: "https://seller.example/b", description: "b", mimeType: "text/plain" },
    };
    const settled = await client
      .settle(elsewhere as never, accepted)
      .catch((error: { errorReason?: string; transaction?: string }) => error);
    expect(settled).toMatchObject({ errorReason: X402_REASONS.nonceUsed });
  });

  it("the official client on a host whose clock is 20 s ahead pays the demo: its validBefore, by its own clock, is not refused as too long", async () => {
    // Mutation: checking validBefore against our clock to the second (as it did) answers this
    // payment 402 invalid_exact_evm_payload_authorization_validity_too_long.
    const payer = await fundedPayer();
    const { resource, accepted } = await quote();
    // The client reads Date.now() for its window before it signs; only that read is moved ahead.
    const realNow = Date.now;
    Date.now = () => realNow() + 20_000;
    let created: Awaited<ReturnType<ExactEvmScheme["createPaymentPayload"]>>;
    try {
      created = await new ExactEvmScheme(payer).createPaymentPayload(2, accepted);
    } finally {
      Date.now = realNow;
    }
    const paid = await pay(header({ x402Version: 2, resource, accepted, payload: created.payload }));
    expect(paid.status, JSON.stringify(paid.response)).toBe(200);
    expect(await authorizationUsedLogs(payer.address)).toBe(1);
  });

  it('refuses a body whose own x402Version is not 2 (1, absent, the string "2"): verify invalid, settle settles nothing', async () => {
    const payload = await envelope(await fundedPayer());
    const call = async (path: string, version: unknown) => {
      const body: Record<string, unknown> = {
        paymentPayload: payload,
        paymentRequirements: payload.accepted,
      };
      if (version !== undefined) body.x402Version = version;
      const response = await fetch(`${stack.origin.base}/x402/facilitator/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const settlementsBefore = await countSettlements();
    for (const version of [1, undefined, "2"]) {
      expect(await call("verify", version), String(version)).toEqual({
        status: 200,
        body: { isValid: false, invalidReason: X402_REASONS.invalidX402Version, payer: expect.any(String) },
      });
      expect(await call("settle", version), String(version)).toMatchObject({
        status: 400,
        body: { success: false, errorReason: X402_REASONS.invalidX402Version, transaction: "" },
      });
    }
    expect(await countSettlements()).toBe(settlementsBefore);
    // The same payment under version 2 is valid: only the version was refused.
    expect((await call("verify", 2)).body).toMatchObject({ isValid: true });
  });

  it("refuses a body over 64 KiB with 413 in its own shape, before reading it whole", async () => {
    for (const path of ["verify", "settle"]) {
      const response = await fetch(`${stack.origin.base}/x402/facilitator/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: `{"pad":"${"x".repeat(70 * 1024)}"}`,
      });
      expect(response.status, path).toBe(413);
      const answer = (await response.json()) as Record<string, unknown>;
      expect(answer.invalidReason ?? answer.errorReason, path).toBe(X402_REASONS.invalidPayload);
    }
  });

  // Found by the fuzz suite: a settle whose JSON body is `null` was a 500.
  it("a JSON body that is no object (null, a number, an array): failure data (verify 200, settle 400), never a 5xx", async () => {
    for (const body of ["null", "1", '"x"', "[]"]) {
      for (const [path, status, failure] of [
        ["verify", 200, { isValid: false, invalidReason: X402_REASONS.invalidPayloadJson }],
        ["settle", 400, { success: false, errorReason: X402_REASONS.invalidPayloadJson }],
      ] as const) {
        const response = await fetch(`${stack.origin.base}/x402/facilitator/${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        });
        expect(response.status, `${path} ${body}`).toBe(status);
        expect(await response.json(), `${path} ${body}`).toMatchObject(failure);
      }
    }
  });
});

describe("with AGENT_X402_ENABLED off", () => {
  it("every x402 route is 404 (the demo, the facilitator, authorize), amount and payTo still configured", async () => {
    const off = await stack.startOrigin({ AGENT_X402_ENABLED: "false" });
    const agent = await stack.newAgent();
    const answers = await Promise.all([
      fetch(`${off.base}/x402/demo`),
      fetch(`${off.base}/x402/facilitator/supported`),
      fetch(`${off.base}/x402/facilitator/verify`, { method: "POST", body: "{}" }),
      fetch(`${off.base}/x402/facilitator/settle`, { method: "POST", body: "{}" }),
      fetch(`${off.base}/agent/v1/x402/authorize`, {
        method: "POST",
        headers: { authorization: `Bearer ${agent.token}`, "content-type": "application/json" },
        body: JSON.stringify({ payment_required: await quote(), nonce: `0x${"11".repeat(32)}` }),
      }),
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([404, 404, 404, 404, 404]);
    // The same routes on the stack's own origin (switch on) answer: the switch is what closed them.
    expect((await fetch(`${stack.origin.base}/x402/facilitator/supported`)).status).toBe(200);
  });
});

/** How many times each value occurs: a failed expectation then shows every kind that came back. */
function tally(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

/** Sends the payment's transferWithAuthorization straight to the chain from a relayer of its own. */
async function settleElsewhere(payment: { signature: Hex; authorization: Record<string, string> }) {
  const relayer = await fundedPayer();
  const a = payment.authorization;
  const authorization = {
    from: a.from as Address,
    to: a.to as Address,
    value: BigInt(a.value!),
    validAfter: BigInt(a.validAfter!),
    validBefore: BigInt(a.validBefore!),
    nonce: a.nonce as Hex,
  };
  const hash = await walletClientFor(stack.devnet.url, relayer).sendTransaction({
    to: NATIVE_TRANSFER_AUTH_ADDRESS,
    data: transferWithAuthorizationCalldata(authorization, payment.signature),
  });
  expect((await chain().waitForTransactionReceipt({ hash })).status).toBe("success");
}

async function countSettlements(): Promise<number> {
  const [row] = await queryRows<{ n: number }>(
    stack.db.handle.db,
    sql`select count(*)::int as n from x402_settlements`,
  );
  return row!.n;
}
