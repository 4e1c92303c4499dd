import { randomBytes } from "node:crypto";
import { encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentRequired } from "@x402/core/types";
import { sql } from "drizzle-orm";
import { type Address, getAddress, type Hex, verifyTypedData } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  fund,
  newAccount,
  publicClientFor,
  transferWithAuthorizationCalldata,
  usdc,
  walletClientFor,
} from "../../devnet/testing.ts";
import { chain77X402Client } from "../../scripts/lib/x402-client.ts";
import { payWithToken } from "../../scripts/lib/x402-token-payer.ts";
import { send } from "../../scripts/test/http.ts";
import { type MoneyStack, startMoneyStack } from "../../scripts/test/money-stack.ts";
import { startTestOrigin, type TestOrigin } from "../../scripts/test/origin.ts";
import { CAIP2_NETWORK, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../shared/constants.ts";
import { nativeTransferAuthDomain, TRANSFER_WITH_AUTHORIZATION_TYPES } from "../../shared/eip712.ts";
import type { X402AuthorizeResponse } from "../../shared/gateway-schemas.ts";
import { queryRows } from "../db/client.ts";
import type { SignerClient } from "../signer/types.ts";

// POST /agent/v1/x402/authorize against the real stack (origin, enclave, devnet, Postgres): the
// answer is what the official client would send, it recovers to the agent's wallet and settles on
// chain; refusals sign nothing; repeats and concurrent duplicates sign once.

const AMOUNT = 10_000n;
const PAY_TO = newAccount().address;
const MAX_TIMEOUT_SECONDS = 180;

/** SPEC "x402 objects": the quote of a chain-77 resource, as a 402 body carries it. */
function quote(overrides: Record<string, unknown> = {}, resourceUrl = "http://127.0.0.1/77/x402/demo") {
  return {
    x402Version: 2,
    error: "Payment required",
    resource: { url: resourceUrl, description: "demo resource", mimeType: "application/json" },
    accepts: [
      {
        scheme: "exact",
        network: CAIP2_NETWORK,
        amount: AMOUNT.toString(),
        asset: NATIVE_TRANSFER_AUTH_ADDRESS,
        payTo: PAY_TO.toLowerCase(),
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
        ...overrides,
      },
    ],
  };
}

const newNonce = (): Hex => `0x${randomBytes(32).toString("hex")}`;

// Each test makes its agent (keys, backup, drill, proof): on this shared VM that can take 20 s.
describe("x402 authorize (real stack)", { timeout: 120_000 }, () => {
  let stack: MoneyStack;
  let origin: TestOrigin;
  /** sign_x402_authorization requests that reached the enclave, through this test's origin. */
  let signRequests = 0;
  let chain: ReturnType<typeof publicClientFor>;

  beforeAll(async () => {
    // x402 on: the sealed terms (validity bound 180 s, the default), a funded settler, the switch.
    stack = await startMoneyStack({
      x402: { amountUnits: AMOUNT, payTo: PAY_TO.toLowerCase() as Address },
    });
    chain = publicClientFor(stack.devnet.url);
    // The real enclave client, counted: what reaches the enclave is what could be signed.
    const counted: SignerClient = {
      ...stack.signer,
      signX402Authorization: (params) => {
        signRequests++;
        return stack.signer.signX402Authorization(params);
      },
    };
    origin = await startTestOrigin({
      database: stack.db.handle,
      rpcUrl: stack.devnet.url,
      env: stack.originEnv,
      signer: counted,
    });
  }, 180_000);
  afterAll(async () => {
    await origin?.close();
    await stack?.close();
  });

  /** The answer with its exact bytes (`text`), as well as parsed. */
  const authorize = async (
    base: string,
    token: string,
    body: unknown,
  ): Promise<{ status: number; headers: Headers; text: string; body: unknown }> => {
    const response = await fetch(`${base}/agent/v1/x402/authorize`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, text, body: JSON.parse(text) };
  };
  const signedActions = async (agentId: string): Promise<number> => {
    const [row] = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as n from agent_actions
          where agent_id = ${agentId} and kind = 'x402' and (status = 'signed' or signed_payload is not null)`,
    );
    return row!.n;
  };

  it("answers the envelope the official client sends, signed by the agent's wallet, and it settles on chain", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const payment = quote();
    const nonce = newNonce();
    const response = await authorize(origin.base, agent.token, { payment_required: payment, nonce });
    expect(response.status).toBe(200);
    expect(response.headers.get("cache-control")).toBe("no-store");
    const body = response.body as X402AuthorizeResponse;
    const envelope = body.payment_payload;
    expect(Object.keys(body)).toEqual(["action_id", "payment_signature", "payment_payload", "valid_before"]);
    expect(envelope.payload.authorization).toMatchObject({
      from: getAddress(agent.wallet),
      to: PAY_TO,
      value: "10000",
      validAfter: "0",
      nonce,
    });
    expect(body.valid_before).toBe(envelope.payload.authorization.validBefore);
    const now = Math.floor(Date.now() / 1000);
    expect(Number(body.valid_before)).toBeGreaterThan(now);
    expect(Number(body.valid_before)).toBeLessThanOrEqual(now + 60);

    // The header value is x402 core's own encoding of the envelope.
    expect(body.payment_signature).toBe(encodePaymentSignatureHeader(envelope as never));
    // The official client, given the same quote (and, in its signer, our signature), writes the
    // same envelope once its random nonce and its clock's validBefore are set to ours.
    const official = await chain77X402Client({
      address: getAddress(agent.wallet),
      signTypedData: async () => envelope.payload.signature as Hex,
    }).createPaymentPayload(payment as PaymentRequired);
    const authorization = (official.payload as { authorization: Record<string, string> }).authorization;
    authorization.nonce = nonce;
    authorization.validBefore = body.valid_before;
    expect(encodePaymentSignatureHeader(official)).toBe(body.payment_signature);

    // The signature recovers to the agent's wallet under the quote's EIP-712 domain.
    const message = {
      from: envelope.payload.authorization.from as Address,
      to: envelope.payload.authorization.to as Address,
      value: BigInt(envelope.payload.authorization.value),
      validAfter: BigInt(envelope.payload.authorization.validAfter),
      validBefore: BigInt(envelope.payload.authorization.validBefore),
      nonce: envelope.payload.authorization.nonce as Hex,
    };
    expect(
      await verifyTypedData({
        address: agent.wallet,
        domain: nativeTransferAuthDomain(),
        types: TRANSFER_WITH_AUTHORIZATION_TYPES,
        primaryType: "TransferWithAuthorization",
        message,
        signature: envelope.payload.signature as Hex,
      }),
    ).toBe(true);

    // Settled straight on the devnet by a third account: the payer loses exactly the amount.
    const relayer = newAccount();
    await fund(stack.devnet.url, relayer.address, usdc(1n));
    const payerBefore = await chain.getBalance({ address: agent.wallet });
    const payToBefore = await chain.getBalance({ address: PAY_TO });
    const hash = await walletClientFor(stack.devnet.url, relayer).sendTransaction({
      to: NATIVE_TRANSFER_AUTH_ADDRESS,
      data: transferWithAuthorizationCalldata(message, envelope.payload.signature as Hex),
    });
    expect((await chain.waitForTransactionReceipt({ hash })).status).toBe("success");
    expect(payerBefore - (await chain.getBalance({ address: agent.wallet }))).toBe(AMOUNT * WEI_PER_UNIT);
    expect((await chain.getBalance({ address: PAY_TO })) - payToBefore).toBe(AMOUNT * WEI_PER_UNIT);

    // The action records it: kind x402, signed, the amount and payTo.
    const [action] = await queryRows<{
      kind: string;
      status: string;
      amount_units: string;
      to_address: string;
    }>(
      stack.db.handle.db,
      sql`select kind, status, amount_units::text, to_address from agent_actions where action_id = ${body.action_id}`,
    );
    expect(action).toEqual({
      kind: "x402",
      status: "signed",
      amount_units: "10000",
      to_address: PAY_TO.toLowerCase(),
    });
  });

  it("answers a repeat with the same bytes, and another quote under the same nonce with 409", async () => {
    const agent = await stack.newAgent();
    const body = { payment_required: quote(), nonce: newNonce() };
    const first = await authorize(origin.base, agent.token, body);
    expect(first.status).toBe(200);
    const before = signRequests;
    // Later, so a second signature would carry another validBefore.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const again = await authorize(origin.base, agent.token, body);
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text);
    expect(signRequests).toBe(before);
    // An authorization ends once signed (the payee settles it): its action reads as terminal.
    const actionId = (first.body as X402AuthorizeResponse).action_id;
    const action = await send(`${origin.base}/agent/v1/actions/${actionId}`, {
      headers: { authorization: `Bearer ${agent.token}` },
    });
    expect(action.status).toBe(200);
    expect(action.body).toMatchObject({ action_id: actionId, kind: "x402", status: "signed" });
    // The same nonce again, spelled in capitals with its default key: the same request.
    const shouted = await authorize(origin.base, agent.token, {
      ...body,
      nonce: body.nonce.toUpperCase().replace("0X", "0x"),
    });
    expect(shouted.text).toBe(first.text);
    // The resource URL is bound to the request: another URL under the same nonce conflicts.
    const elsewhere = await authorize(origin.base, agent.token, {
      payment_required: quote({}, "http://127.0.0.1/77/x402/other"),
      nonce: body.nonce,
    });
    expect(elsewhere.status).toBe(409);
    expect((elsewhere.body as { error: { code: string } }).error.code).toBe("idempotency_conflict");
    expect(await signedActions(agent.agentId)).toBe(1);
  });

  it("signs once for 30 concurrent identical requests, all answered with the same bytes", async () => {
    const agent = await stack.newAgent();
    const body = { payment_required: quote(), nonce: newNonce() };
    const before = signRequests;
    const responses = await Promise.all(
      Array.from({ length: 30 }, () => authorize(origin.base, agent.token, body)),
    );
    expect(responses.map((response) => response.status)).toEqual(responses.map(() => 200));
    expect(new Set(responses.map((response) => response.text)).size).toBe(1);
    expect(signRequests - before).toBe(1);
    expect(await signedActions(agent.agentId)).toBe(1);
  });

  it("refuses another amount, another payTo, a validity over the bound and an unsupported quote with 422, signing nothing", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const other = newAccount().address;
    const cases: Array<[string, unknown, string]> = [
      ["another amount", quote({ amount: "10001" }), "x402_amount_not_allowed"],
      ["the amount spelled otherwise", quote({ amount: "010000" }), "x402_amount_not_allowed"],
      ["another payTo", quote({ payTo: other }), "x402_pay_to_not_allowed"],
      [
        "a validity over the bound",
        quote({ maxTimeoutSeconds: MAX_TIMEOUT_SECONDS + 1 }),
        "x402_validity_too_long",
      ],
      ["another network", quote({ network: "eip155:8453" }), "x402_requirement_unsupported"],
      ["another scheme", quote({ scheme: "upto" }), "x402_requirement_unsupported"],
      ["another asset", quote({ asset: other }), "x402_requirement_unsupported"],
      [
        "a permit2 entry",
        quote({ extra: { name: "USDC", version: "2", assetTransferMethod: "permit2" } }),
        "x402_requirement_unsupported",
      ],
      [
        "another EIP-712 domain",
        quote({ extra: { name: "USD Coin", version: "2" } }),
        "x402_requirement_unsupported",
      ],
      ["x402 version 1", { ...quote(), x402Version: 1 }, "x402_requirement_unsupported"],
    ];
    const before = signRequests;
    for (const [name, paymentRequired, code] of cases) {
      const response = await authorize(origin.base, agent.token, {
        payment_required: paymentRequired,
        nonce: newNonce(),
      });
      const error = (response.body as { error?: Record<string, unknown> }).error;
      expect({ name, status: response.status, code: error?.code }).toEqual({ name, status: 422, code });
      // Nothing in a refusal speaks of transfer limits or the funding gate: they do not apply.
      expect(Object.keys(error ?? {}).sort()).toEqual(["code", "message", "request_id"]);
    }
    expect(signRequests).toBe(before);
    expect(await signedActions(agent.agentId)).toBe(0);
  });

  it("works with transfers and the faucet switched off, for a wallet the funding gate would refuse", async () => {
    const off = await startTestOrigin({
      database: stack.db.handle,
      rpcUrl: stack.devnet.url,
      env: { ...stack.originEnv, AGENT_TRANSFER_ENABLED: "false", AGENT_FAUCET_ENABLED: "false" },
      signer: stack.signer,
    });
    try {
      // No restore evidence and no identity proof: faucet and transfers would be refused by the gate.
      const agent = await stack.newAgent({ units: 1_000_000n, drilled: false, verified: false });
      const transfer = await send(`${off.base}/agent/v1/transfers`, {
        method: "POST",
        headers: { authorization: `Bearer ${agent.token}` },
        body: JSON.stringify({ idempotency_key: "k", to: newAccount().address, amount: "1" }),
      });
      expect(transfer.status).toBe(404);
      const response = await authorize(off.base, agent.token, {
        payment_required: quote(),
        nonce: newNonce(),
      });
      expect(response.status).toBe(200);
      const body = response.body as X402AuthorizeResponse;
      expect(body.payment_payload.payload.authorization.from).toBe(getAddress(agent.wallet));
    } finally {
      await off.close();
    }
  });

  it("lets an agent holding only its token pay the demo: 402, authorize, the paid retry, 200", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const before = await chain.getBalance({ address: agent.wallet });
    const paid = await payWithToken({ base: origin.base, token: agent.token });
    expect(paid.quote).toMatchObject({ amount: "10000", payTo: PAY_TO.toLowerCase() });
    expect(paid.status).toBe(200);
    expect(paid.settlement).toMatchObject({ success: true, network: CAIP2_NETWORK });
    const receipt = await chain.getTransactionReceipt({ hash: paid.settlement!.transaction as Hex });
    expect(receipt.status).toBe("success");
    // The settler paid the gas: the agent's wallet lost exactly the amount.
    expect(before - (await chain.getBalance({ address: agent.wallet }))).toBe(AMOUNT * WEI_PER_UNIT);
  });
});
