import { randomBytes } from "node:crypto";
import { encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentRequired } from "@x402/core/types";
import { declarePaymentIdentifierExtension } from "@x402/extensions/payment-identifier";
import { sql } from "drizzle-orm";
import { type Address, type Hex, verifyTypedData } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { payWithToken } from "../../../dev/x402-token-payer.ts";
import {
  fund,
  newAccount,
  publicClientFor,
  transferWithAuthorizationCalldata,
  usdc,
  walletClientFor,
} from "../../../devnet/testing.ts";
import { CAIP2_NETWORK, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../../shared/constants.ts";
import { nativeTransferAuthDomain, TRANSFER_WITH_AUTHORIZATION_TYPES } from "../../../shared/eip712.ts";
import type { X402AuthorizeResponse } from "../../../shared/gateway-schemas.ts";
import { sleep } from "../../../shared/sleep.ts";
import { enclaveDown, underFault } from "../../../testing/fault-scenario.ts";
import { send } from "../../../testing/http.ts";
import type { StackAgent } from "../../../testing/money-stack.ts";
import { startTestOrigin } from "../../../testing/origin.ts";
import { useMoneyStack, useStackOrigin } from "../../../testing/stack.ts";
import { chain77X402Client } from "../../../testing/x402-official-client.ts";
import { sellerQuote } from "../../../testing/x402-quote.ts";
import { requestHash } from "../../agent-actions/repository.ts";
import { queryRows } from "../../db/client.ts";
import type { SignerClient } from "../../signer/types.ts";
import { legacyKeys } from "./authorize-legacy-keys.ts";

// POST /agent/v1/x402/authorize against the real stack (origin, enclave, devnet, Postgres): the
// answer is what the official client would send, it recovers to the agent's wallet and settles on
// chain; refusals sign nothing; repeats and concurrent duplicates sign once.

const AMOUNT = 10_000n;
const PAY_TO = newAccount().address;
const MAX_TIMEOUT_SECONDS = 180;

/** The quote of a chain-77 resource, as a 402 body carries it (docs/x402.md#the-demo-and-the-facilitator). */
const quote = (overrides: Record<string, unknown> = {}, resourceUrl = "http://127.0.0.1/77/x402/demo") =>
  sellerQuote({ payTo: PAY_TO.toLowerCase(), amount: AMOUNT, url: resourceUrl }, overrides);

const newNonce = (): Hex => `0x${randomBytes(32).toString("hex")}`;

/** A checksummed address with its first letter's case turned: the same 20 bytes, not its EIP-55 form. */
function offChecksum(address: string): string {
  const at = address.slice(2).search(/[a-fA-F]/) + 2;
  const letter = address[at]!;
  const turned = letter === letter.toUpperCase() ? letter.toLowerCase() : letter.toUpperCase();
  return address.slice(0, at) + turned + address.slice(at + 1);
}

/** Adjacent concurrent blocks run at once; each block's tests run as it marks them. */
const BESIDE = { concurrent: true } as const;

// Each test makes its agent (keys, backup, drill, proof): on this shared VM that can take 20 s.
describe("x402 authorize (real stack)", { timeout: 120_000 }, () => {
  // x402 on: the sealed terms (validity bound 180 s, the default), a funded settler, the switch.
  const stack = useMoneyStack(
    { x402: { amountUnits: AMOUNT, payTo: PAY_TO.toLowerCase() as Address } },
    { timeoutMs: 180_000 },
  );
  /**
   * sign_x402_authorization requests that reached the enclave through this file's origins, by the
   * wallet they sign for: each test counts its own agent's, so that tests may run beside each other.
   */
  const signRequests = new Map<string, number>();
  const signRequestsOf = (agent: StackAgent): number => signRequests.get(agent.wallet.toLowerCase()) ?? 0;
  let chain: ReturnType<typeof publicClientFor>;
  let counted: SignerClient;

  beforeAll(async () => {
    chain = publicClientFor(stack.devnet.url);
    // The real enclave client, counted: what reaches the enclave is what could be signed.
    counted = {
      ...stack.signer,
      signX402Authorization: (params) => {
        const wallet = params.from.toLowerCase();
        signRequests.set(wallet, (signRequests.get(wallet) ?? 0) + 1);
        return stack.signer.signX402Authorization(params);
      },
    };
  }, 180_000);
  const origin = useStackOrigin("origin", stack, () => ({ signer: counted }), { timeoutMs: 180_000 });
  // Another host's origin, its clock a second ahead of this one's: a skew no single machine makes.
  const aheadOrigin = useStackOrigin(
    "ahead origin",
    stack,
    () => ({ signer: counted, clock: { now: () => new Date(Date.now() + 1_000) } }),
    { timeoutMs: 180_000 },
  );

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
  /** Settles an envelope at our own facilitator, as a payee would, against the entry it accepted. */
  const settleAtFacilitator = async (
    envelope: X402AuthorizeResponse["payment_payload"],
  ): Promise<{ success: boolean; transaction: string }> => {
    const settled = await fetch(`${origin.base}/x402/facilitator/settle`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        x402Version: 2,
        paymentPayload: envelope,
        paymentRequirements: envelope.accepted,
      }),
    });
    return (await settled.json()) as { success: boolean; transaction: string };
  };
  const signedActions = async (agentId: string): Promise<number> => {
    const [row] = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as n from agent_actions
          where agent_id = ${agentId} and kind = 'x402' and (status = 'signed' or signed_payload is not null)`,
    );
    return row!.n;
  };

  // The tests that wait out a validity or a window's end run beside the others (vitest runs
  // adjacent concurrent blocks at once), the first block's beside each other too, the others'
  // in turn: each test has its own agent, and counts only its agent's signatures
  // (docs/performance.md, "The test suite").
  describe("waits for an authorization's end, or a window's", BESIDE, () => {
    it("without a nonce or key, the same quote once its authorization can no longer pay is a new purchase: a new authorization, itself answered again while valid", async () => {
      // Mutation: a derived key that does not move on past a spent purchase (the agent, the
      // resource and the quote alone) answers the expired authorization here for good.
      const agent = await stack.newAgent({ units: 1_000_000n });
      // The shortest validity the enclave signs: more than its sealed margin (6 s).
      const brief = quote({ maxTimeoutSeconds: 8 });
      const before = signRequestsOf(agent);
      const first = await authorize(origin.base, agent.token, { payment_required: brief });
      expect(first.status, first.text).toBe(200);
      const firstValidBefore = Number((first.body as X402AuthorizeResponse).valid_before);
      // Past its validity (whole seconds: the next second after validBefore).
      await sleep(Math.max(0, (firstValidBefore + 1) * 1000 - Date.now()));
      const second = await authorize(origin.base, agent.token, { payment_required: brief });
      expect(second.status).toBe(200);
      expect(second.headers.get("idempotency-key")).not.toBe(first.headers.get("idempotency-key"));
      const secondBody = second.body as X402AuthorizeResponse;
      expect(secondBody.payment_payload.payload.authorization.nonce).not.toBe(
        (first.body as X402AuthorizeResponse).payment_payload.payload.authorization.nonce,
      );
      expect(Number(secondBody.valid_before)).toBeGreaterThan(firstValidBefore);
      // A retry of the second while it is valid answers it.
      const retry = await authorize(origin.base, agent.token, { payment_required: brief });
      expect(retry.text).toBe(second.text);
      expect(signRequestsOf(agent) - before).toBe(2);
    });

    it("without a nonce or key, an authorization in its last margin seconds is spent, as the facilitator counts it: the same quote then gets a new one", async () => {
      // Mutation: spent() back to `validBefore <= now` answers the first authorization again here,
      // one no facilitator settles any more.
      const agent = await stack.newAgent({ units: 1_000_000n });
      const brief = quote({ maxTimeoutSeconds: 10 });
      const first = await authorize(origin.base, agent.token, { payment_required: brief });
      expect(first.status, first.text).toBe(200);
      const firstBody = first.body as X402AuthorizeResponse;
      // The first whole second at which less than the margin (6 s) is left: still valid on the chain.
      const tooLate = Number(firstBody.valid_before) - 6 + 1;
      await sleep(Math.max(0, tooLate * 1000 - Date.now()));
      // The facilitator refuses it from here on (settle-window.ts, the one rule both apply).
      const second = await authorize(origin.base, agent.token, { payment_required: brief });
      expect(second.status, second.text).toBe(200);
      expect(Math.floor(Date.now() / 1000)).toBeLessThan(Number(firstBody.valid_before));
      expect((second.body as X402AuthorizeResponse).action_id).not.toBe(firstBody.action_id);
      expect(Number((second.body as X402AuthorizeResponse).valid_before)).toBeGreaterThan(
        Number(firstBody.valid_before),
      );
    });

    it("without a nonce or key, requests for one quote sent together to two origins whose clocks differ sign one authorization", async () => {
      // Mutation: a key that depends on the time of the request (a window of the quote's timeout, as
      // before) signs two here: the origin already past a window's end chooses apart from the other
      // before either has claimed its action.
      const agent = await stack.newAgent({ units: 1_000_000n });
      // Connections opened beforehand, so that the requests reach the origins together.
      const bases = [origin.base, aheadOrigin.base];
      await Promise.all(
        bases.flatMap((base) =>
          Array.from({ length: 8 }, () => fetch(`${base}/health`).then((r) => r.text())),
        ),
      );
      // The quote's timeout whose window ends soonest, of 12 to 16 s: at least 12, so that the
      // authorization signed stays more than the margin (6 s) from its end, by the clock a second
      // ahead, for 5 s after the requests are sent.
      const earliest = Date.now() + 600;
      const [timeout, windowEnd] = [12, 13, 14, 15, 16]
        .map((each) => [each, Math.ceil(earliest / (each * 1000)) * each * 1000] as const)
        .reduce((soonest, each) => (each[1] < soonest[1] ? each : soonest));
      const brief = quote({ maxTimeoutSeconds: timeout });
      // Half a second before that window's end by this origin's clock, past it by the other's.
      await sleep(windowEnd - 500 - Date.now());
      const before = signRequestsOf(agent);
      const answers = await Promise.all(
        bases.flatMap((base) =>
          Array.from({ length: 8 }, () => authorize(base, agent.token, { payment_required: brief })),
        ),
      );
      for (const each of answers) expect(each.status, each.text).toBe(200);
      expect(new Set(answers.map((each) => each.headers.get("idempotency-key"))).size).toBe(1);
      expect(new Set(answers.map((each) => each.text)).size).toBe(1);
      expect(signRequestsOf(agent) - before).toBe(1);
    });
  });

  describe("waits for a second purchase across a window", BESIDE, () => {
    it.sequential("without a nonce or key, a second purchase of the same quote is answered again while it can pay, also past the quote's timeout since the first, never signed anew", async () => {
      // Mutation: keys by a window of the quote's timeout with only the previous window's first key
      // tried (as before) signs a third authorization here, while the second is valid for 9 to
      // 11 s more: two that can pay for one purchase.
      const agent = await stack.newAgent({ units: 1_000_000n });
      // The first purchase in the first 2.5 s of a window of the timeout, so that the second, once
      // the first is spent (its last margin seconds, timeout - 5 s on), falls in the same window
      // with 2.5 s to spare. The timeout, 14 to 16 s, is the one whose such start comes soonest
      // (its end counted): at least 14, so that the retry finds the second 3 s past the margin.
      const now = Date.now();
      const [timeout, startAt] = [14, 15, 16]
        .map((each) => {
          const into = now % (each * 1000);
          const start = into > 2_500 ? now - into + each * 1000 + 100 : into < 100 ? now - into + 100 : now;
          return [each, start] as const;
        })
        .reduce((soonest, each) =>
          each[1] + each[0] * 1000 < soonest[1] + soonest[0] * 1000 ? each : soonest,
        );
      const brief = quote({ maxTimeoutSeconds: timeout });
      const windowOf = (ms: number) => Math.floor(ms / 1000 / timeout);
      await sleep(Math.max(0, startAt - Date.now()));
      const startedIn = windowOf(Date.now());
      const before = signRequestsOf(agent);
      const first = await authorize(origin.base, agent.token, { payment_required: brief });
      expect(first.status, first.text).toBe(200);
      const firstValidBefore = Number((first.body as X402AuthorizeResponse).valid_before);
      await sleep(Math.max(0, (firstValidBefore - 6 + 1) * 1000 - Date.now()));
      const second = await authorize(origin.base, agent.token, { payment_required: brief });
      expect(second.status, second.text).toBe(200);
      expect(second.headers.get("idempotency-key")).not.toBe(first.headers.get("idempotency-key"));
      expect(windowOf(Date.now()), "the second purchase fell in the next window").toBe(startedIn);
      // Its answer lost, the agent asks again once the first's validity (the quote's timeout) is
      // over: the next window has begun, and the second can pay timeout - 5 s more (3 to 5 s past
      // the margin).
      await sleep(firstValidBefore * 1000 + 100 - Date.now());
      const retry = await authorize(origin.base, agent.token, { payment_required: brief });
      expect(windowOf(Date.now()), "the retry fell in the next window").toBe(startedIn + 1);
      const secondValidBefore = Number((second.body as X402AuthorizeResponse).valid_before);
      expect(secondValidBefore - Math.floor(Date.now() / 1000), "the second can still pay").toBeGreaterThan(
        6,
      );
      expect(retry.headers.get("idempotency-key")).toBe(second.headers.get("idempotency-key"));
      expect(retry.text).toBe(second.text);
      expect(signRequestsOf(agent) - before).toBe(2);
    });
  });

  describe("beside the waits", BESIDE, () => {
    it.sequential("without a nonce or key, the same quote again answers the first authorization (same bytes, one enclave signature); the envelope names the payment by the derived key; another resource is another payment", async () => {
      // Mutation: deriving the key with anything that differs per call (a fresh nonce's `x402:` key,
      // as before) signs twice here.
      const agent = await stack.newAgent({ units: 1_000_000n });
      const declared = {
        ...quote(),
        extensions: { "payment-identifier": declarePaymentIdentifierExtension(false) },
      };
      const before = signRequestsOf(agent);
      const first = await authorize(origin.base, agent.token, { payment_required: declared });
      expect(first.status).toBe(200);
      const key = first.headers.get("idempotency-key");
      expect(key).toMatch(/^x402-[0-9a-f]{64}$/);
      // A 402 answering a refused retry adds `error`: still the same quote.
      const again = await authorize(origin.base, agent.token, {
        payment_required: { ...declared, error: "x" },
      });
      expect(again.text).toBe(first.text);
      expect(signRequestsOf(agent) - before).toBe(1);
      const envelope = (first.body as { payment_payload: { extensions: Record<string, { info: unknown }> } })
        .payment_payload;
      expect(envelope.extensions["payment-identifier"]!.info).toEqual({ required: false, id: key });

      const elsewhere = await authorize(origin.base, agent.token, {
        payment_required: quote({}, "http://127.0.0.1/77/x402/other"),
      });
      expect(elsewhere.status).toBe(200);
      expect(elsewhere.headers.get("idempotency-key")).not.toBe(key);
      expect(signRequestsOf(agent) - before).toBe(2);
      expect(await signedActions(agent.agentId)).toBe(2);
    });

    it.sequential("without a nonce or key, a purchase made before migration 0044, under the key of its time's window, is answered again while it can pay", async () => {
      // Mutation: chooseDerivedKey without the keys of authorize-legacy-keys.ts signs a second here.
      const agent = await stack.newAgent({ units: 1_000_000n });
      // What an origin before 0044 stored: the action under this window's first key, no purchase
      // recorded; the same as a request naming that key, whose nonce and payment id follow from it.
      const [, , , , , , , , windowKey] = legacyKeys({
        agentId: agent.agentId,
        quote: quote(),
        nowSeconds: Math.floor(Date.now() / 1000),
      });
      const before = signRequestsOf(agent);
      const made = await authorize(origin.base, agent.token, {
        payment_required: quote(),
        idempotency_key: windowKey,
      });
      expect(made.status, made.text).toBe(200);
      const retry = await authorize(origin.base, agent.token, { payment_required: quote() });
      expect(retry.headers.get("idempotency-key")).toBe(windowKey);
      expect(retry.text).toBe(made.text);
      expect(signRequestsOf(agent) - before).toBe(1);
    });

    it.sequential("answers the envelope the official client sends, signed by the agent's wallet, and it settles on chain", async () => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      // A checksummed payTo, as the official client writes it (it checksums what it copies; we copy as given).
      const payment = quote({ payTo: PAY_TO });
      const nonce = newNonce();
      const response = await authorize(origin.base, agent.token, { payment_required: payment, nonce });
      expect(response.status).toBe(200);
      expect(response.headers.get("cache-control")).toBe("no-store");
      const body = response.body as X402AuthorizeResponse;
      const envelope = body.payment_payload;
      expect(Object.keys(body)).toEqual([
        "action_id",
        "payment_signature",
        "payment_payload",
        "valid_before",
      ]);
      expect(envelope.payload.authorization).toMatchObject({
        from: agent.wallet,
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
        address: agent.wallet as Address,
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

    it.sequential("answers a repeat with the same bytes, and another quote under the same nonce with 409", async () => {
      const agent = await stack.newAgent();
      const body = { payment_required: quote(), nonce: newNonce() };
      const first = await authorize(origin.base, agent.token, body);
      expect(first.status).toBe(200);
      const before = signRequestsOf(agent);
      // Later, so a second signature would carry another validBefore.
      await sleep(1_100);
      const again = await authorize(origin.base, agent.token, body);
      expect(again.status).toBe(200);
      expect(again.text).toBe(first.text);
      expect(signRequestsOf(agent)).toBe(before);
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

    it.sequential("copies payTo from the quote as the quote wrote it, checksummed or lower case, and from as the wallet is written; each settles at the facilitator", async () => {
      // Mutation: paymentAuthorization checksumming its addresses (as the official client does)
      // answers the lowercase quote with a checksummed `to`, and `from` checksummed.
      const agent = await stack.newAgent({ units: 1_000_000n });
      const network = await send(`${origin.base}/agent/v1/network`, {
        headers: { authorization: `Bearer ${agent.token}` },
      });
      const wallet = (network.body as { agent: { assigned_wallet: string } }).agent.assigned_wallet;
      for (const payTo of [PAY_TO, PAY_TO.toLowerCase()]) {
        const response = await authorize(origin.base, agent.token, {
          payment_required: quote({ payTo }),
          nonce: newNonce(),
        });
        expect(response.status, response.text).toBe(200);
        const envelope = (response.body as X402AuthorizeResponse).payment_payload;
        expect(envelope.payload.authorization.to).toBe(payTo);
        expect((envelope.accepted as { payTo: string }).payTo).toBe(payTo);
        expect(envelope.payload.authorization.from).toBe(wallet);
        // The payee's facilitator (ours) settles it as it stands.
        const answer = await settleAtFacilitator(envelope);
        expect(answer, payTo).toMatchObject({ success: true });
        expect((await chain.getTransactionReceipt({ hash: answer.transaction as Hex })).status).toBe(
          "success",
        );
      }
    });

    it.sequential("takes a quote whose resource description and MIME type and whose extensions are null, as x402's own schemas do: null extensions are none, and it settles at the facilitator", async () => {
      // Mutation: the quote schema's mimeType, description or extensions back to `.optional()`
      // answers 400; copiedParts keeping a null `extensions` puts `extensions: null` in the envelope
      // and makes the quote without them another request (409).
      const agent = await stack.newAgent({ units: 1_000_000n });
      const base = quote();
      const nulled = {
        ...base,
        resource: { ...base.resource, description: null, mimeType: null },
        extensions: null,
      };
      const nonce = newNonce();
      const response = await authorize(origin.base, agent.token, { payment_required: nulled, nonce });
      expect(response.status, response.text).toBe(200);
      const envelope = (response.body as X402AuthorizeResponse).payment_payload;
      expect(Object.hasOwn(envelope, "extensions")).toBe(false);
      expect(envelope.resource).toEqual(nulled.resource);
      // The same quote with no extensions at all is the same request: the same bytes again.
      const { extensions: _, ...without } = nulled;
      const again = await authorize(origin.base, agent.token, { payment_required: without, nonce });
      expect(again.text).toBe(response.text);
      expect(await settleAtFacilitator(envelope)).toMatchObject({ success: true });
    });

    it.sequential("signs once for 30 concurrent identical requests, all answered with the same bytes", async () => {
      const agent = await stack.newAgent();
      const body = { payment_required: quote(), nonce: newNonce() };
      const before = signRequestsOf(agent);
      const responses = await Promise.all(
        Array.from({ length: 30 }, () => authorize(origin.base, agent.token, body)),
      );
      expect(responses.map((response) => response.status)).toEqual(responses.map(() => 200));
      expect(new Set(responses.map((response) => response.text)).size).toBe(1);
      expect(signRequestsOf(agent) - before).toBe(1);
      expect(await signedActions(agent.agentId)).toBe(1);
    });

    it.sequential("refuses another amount, another payTo, a validity over the bound and an unsupported quote with 422, signing nothing", async () => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const other = newAccount().address;
      const cases: Array<[string, unknown, string]> = [
        ["another amount", quote({ amount: "10001" }), "x402_amount_not_allowed"],
        ["the amount spelled otherwise", quote({ amount: "010000" }), "x402_amount_not_allowed"],
        ["another payTo", quote({ payTo: other }), "x402_pay_to_not_allowed"],
        // Mutation: payTo read by a lenient isAddress signs this one, which the official client's
        // getAddress refuses to pay: a letter's case off from the checksum is a mistyped address.
        [
          "the payTo with a letter's case off its checksum",
          quote({ payTo: offChecksum(PAY_TO) }),
          "x402_pay_to_not_allowed",
        ],
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
      const before = signRequestsOf(agent);
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
      // The amount as a JSON number: the message says so, where it read "exactly 10000 units …;
      // the quote asks for 10000", the allowed amount twice.
      const numeric = await authorize(origin.base, agent.token, {
        payment_required: quote({ amount: Number(AMOUNT) }),
        nonce: newNonce(),
      });
      expect({ status: numeric.status, body: numeric.body }).toMatchObject({
        status: 422,
        body: {
          error: {
            code: "x402_amount_not_allowed",
            message: `this node authorizes exactly ${AMOUNT} units per payment (AGENT_X402_AMOUNT); the quote asks for ${AMOUNT} (a number, not a string)`,
          },
        },
      });
      expect(signRequestsOf(agent)).toBe(before);
      expect(await signedActions(agent.agentId)).toBe(0);
    });

    it.sequential("refuses a quote valid no longer than the validity margin (6 s) with 422 x402_requirement_unsupported, before the enclave, where it was answered x402_validity_too_long: no facilitator settles such an authorization", async () => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const before = signRequestsOf(agent);
      // Valid the margin itself, an authorization has the margin left only in the second it is
      // signed: the enclave refused it whenever its clock had turned the second since the origin's
      // read (x402_validity_too_long), and signed it otherwise, for a seller who could not settle it.
      for (const maxTimeoutSeconds of [5, 6]) {
        const response = await authorize(origin.base, agent.token, {
          payment_required: quote({ maxTimeoutSeconds }),
          nonce: newNonce(),
        });
        const error = (response.body as { error?: { code?: string; message?: string } }).error;
        expect({ maxTimeoutSeconds, status: response.status, code: error?.code }).toEqual({
          maxTimeoutSeconds,
          status: 422,
          code: "x402_requirement_unsupported",
        });
        expect(error?.message).toContain("longer than 6 s");
        // The check call answers what authorize does.
        const check = await fetch(`${origin.base}/agent/v1/policy/check`, {
          method: "POST",
          headers: { authorization: `Bearer ${agent.token}`, "content-type": "application/json" },
          body: JSON.stringify({ x402: { payment_required: quote({ maxTimeoutSeconds }) } }),
        });
        expect(await check.json()).toMatchObject({
          decision: "deny",
          rule: "node.x402_requirement_unsupported",
        });
      }
      expect(signRequestsOf(agent)).toBe(before);
      expect(await signedActions(agent.agentId)).toBe(0);
      // A second past the margin it is signed.
      const pastMargin = await authorize(origin.base, agent.token, {
        payment_required: quote({ maxTimeoutSeconds: 7 }),
        nonce: newNonce(),
      });
      expect(pastMargin.status).toBe(200);
    });

    it.sequential("works with transfers and the faucet switched off, for a wallet the funding gate would refuse", async () => {
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
        expect(body.payment_payload.payload.authorization.from).toBe(agent.wallet);
      } finally {
        await off.close();
      }
    });

    it.sequential("lets an agent holding only its token pay the demo: 402, authorize, the paid retry, 200", async () => {
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

    it.sequential("stores the signature, not the quote: a repeat rebuilds the same bytes from its own body; the quote's keys in another order are another payload", async () => {
      const agent = await stack.newAgent();
      // A quote with extensions of a few KiB, as bazaar's schemas or sign-in-with-x's message are.
      const payment = {
        ...quote(),
        extensions: {
          bazaar: { info: { input: { type: "http", method: "GET" } }, schema: { pad: "s".repeat(3_000) } },
        },
      };
      const body = { payment_required: payment, nonce: newNonce() };
      const first = await authorize(origin.base, agent.token, body);
      expect(first.status).toBe(200);
      const actionId = (first.body as X402AuthorizeResponse).action_id;
      const [row] = await queryRows<{ signed_payload: Record<string, unknown>; bytes: number }>(
        stack.db.handle.db,
        sql`select signed_payload, pg_column_size(signed_payload) as bytes from agent_actions where action_id = ${actionId}`,
      );
      expect(Object.keys(row!.signed_payload).sort()).toEqual(["authorization", "signature"]);
      expect(row!.bytes).toBeLessThan(600);
      const again = await authorize(origin.base, agent.token, body);
      expect(again.text).toBe(first.text);
      // The same fields with the resource's keys reversed would build other bytes: a conflict.
      const resource = payment.resource as Record<string, unknown>;
      const reordered = Object.fromEntries(Object.entries(resource).reverse());
      const conflict = await authorize(origin.base, agent.token, {
        ...body,
        payment_required: { ...payment, resource: reordered },
      });
      expect(conflict.status).toBe(409);
    });

    it.sequential("answers a repeat whose quote carries another signed offer, or none, with the same authorization, in an envelope with that offer; another extension is another payload; a row hashed with its offer whole is still answered", async () => {
      // Mutation: the request hash binding the offer-receipt extension (as before) answers the
      // second request 409; without the former hashes, the last one 409.
      const agent = await stack.newAgent();
      const offered = (offer: string) => ({
        ...quote(),
        extensions: { "offer-receipt": { info: { offers: [{ format: "eip712", signature: offer }] } } },
      });
      const nonce = newNonce();
      const first = await authorize(origin.base, agent.token, { payment_required: offered("0x01"), nonce });
      expect(first.status, first.text).toBe(200);
      const before = signRequestsOf(agent);
      const again = await authorize(origin.base, agent.token, { payment_required: offered("0x02"), nonce });
      expect(again.status, again.text).toBe(200);
      const envelopeOf = (each: { body: unknown }) => (each.body as X402AuthorizeResponse).payment_payload;
      const againEnvelope = envelopeOf(again);
      expect(againEnvelope.payload).toEqual(envelopeOf(first).payload);
      expect(againEnvelope.extensions).toEqual(offered("0x02").extensions);
      // A quote served without an offer (its client past the node's window of offers): the same.
      const bare = await authorize(origin.base, agent.token, { payment_required: quote(), nonce });
      expect(bare.status, bare.text).toBe(200);
      expect(envelopeOf(bare).payload).toEqual(envelopeOf(first).payload);
      const other = await authorize(origin.base, agent.token, {
        payment_required: { ...offered("0x02"), extensions: { ...offered("0x02").extensions, bazaar: {} } },
        nonce,
      });
      expect(other.status).toBe(409);
      // The row as the previous version hashed it: the extensions whole, the offer in them.
      const whole = offered("0x01");
      await stack.db.handle.db.execute(
        sql`update agent_actions set request_hash = ${requestHash("x402", {
          nonce,
          resource: JSON.stringify(whole.resource),
          accepted: JSON.stringify(whole.accepts[0]),
          extensions: JSON.stringify(whole.extensions),
        })} where action_id = ${(first.body as X402AuthorizeResponse).action_id}`,
      );
      const stored = await authorize(origin.base, agent.token, { payment_required: whole, nonce });
      expect(stored.text).toBe(first.text);
      expect(signRequestsOf(agent)).toBe(before);
    });

    it.sequential("answers a row stored before only the signature was (the whole header value) with its stored bytes", async () => {
      const agent = await stack.newAgent();
      const body = { payment_required: quote(), nonce: newNonce() };
      const first = await authorize(origin.base, agent.token, body);
      expect(first.status).toBe(200);
      const { action_id: actionId, payment_signature: header } = first.body as X402AuthorizeResponse;
      // The row as the previous version wrote it: the header value, and the request hash of the
      // quote's parts with their keys sorted.
      const sorted = (value: unknown): string =>
        JSON.stringify(value, (_key, inner: unknown) =>
          inner !== null && typeof inner === "object" && !Array.isArray(inner)
            ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
            : inner,
        );
      const legacyHash = requestHash("x402", {
        nonce: body.nonce,
        resource: sorted(body.payment_required.resource),
        accepted: sorted(body.payment_required.accepts[0]),
        extensions: null,
      });
      await stack.db.handle.db.execute(
        sql`update agent_actions set signed_payload = ${JSON.stringify({ payment_signature: header })}::jsonb,
              request_hash = ${legacyHash}
            where action_id = ${actionId}`,
      );
      const before = signRequestsOf(agent);
      const again = await authorize(origin.base, agent.token, body);
      expect(again.text).toBe(first.text);
      expect(signRequestsOf(agent)).toBe(before);
    });

    it.sequential("refuses a quote past its bounds with 400, writing and signing nothing", async () => {
      const agent = await stack.newAgent();
      const entry = quote().accepts[0]!;
      const cases: Array<[string, unknown]> = [
        ["extensions over 16 KiB", { ...quote(), extensions: { pad: "e".repeat(17 * 1024) } }],
        ["an accepts entry over 4 KiB", quote({ extra: { ...entry.extra, pad: "a".repeat(4 * 1024) } })],
        ["17 accepts entries", { ...quote(), accepts: Array.from({ length: 17 }, () => entry) }],
        [
          "a description over 2048 characters",
          { ...quote(), resource: { url: "http://127.0.0.1/x", description: "d".repeat(2_049) } },
        ],
        [
          "a resource over 6 KiB",
          { ...quote(), resource: { url: "http://127.0.0.1/x", note: "n".repeat(6 * 1024) } },
        ],
        [
          "a mimeType over 256 characters",
          { ...quote(), resource: { url: "http://127.0.0.1/x", mimeType: "m".repeat(257) } },
        ],
      ];
      const before = signRequestsOf(agent);
      for (const [name, paymentRequired] of cases) {
        const response = await authorize(origin.base, agent.token, {
          payment_required: paymentRequired,
          nonce: newNonce(),
        });
        const error = (response.body as { error?: { code?: string } }).error;
        expect({ name, status: response.status, code: error?.code }).toEqual({
          name,
          status: 400,
          code: "validation_failed",
        });
      }
      expect(signRequestsOf(agent)).toBe(before);
      const [row] = await queryRows<{ n: number }>(
        stack.db.handle.db,
        sql`select count(*)::int as n from agent_actions where agent_id = ${agent.agentId}`,
      );
      expect(row!.n).toBe(0);
    });
  });

  // After those, one at a time: each changes what every test shares (the enclave stopped, with an
  // origin that abandons any action half a second old; the sealed transfer limits lowered; the
  // database's size measured), or has an origin of its own for the day's limit.
  it("answers a repeat of an authorization the sweep abandoned 409 abandoned, as a transfer's, and signs nothing", async () => {
    // Mutation: authorize.ts without endedRefusal (the shell running the ended action again)
    // answers 409 idempotency_conflict.
    const quick = await stack.startOrigin({}, { abandonAfterMs: 500 });
    try {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const body = { payment_required: quote(), nonce: newNonce() };
      await underFault(enclaveDown(stack.enclave), async () => {
        const down = await authorize(quick.base, agent.token, body);
        expect(down.status).toBe(503);
      });
      const actionOf = async () => {
        const [row] = await queryRows<{ action_id: string; status: string; error_code: string | null }>(
          stack.db.handle.db,
          sql`select action_id, status, error_code from agent_actions where agent_id = ${agent.agentId} and kind = 'x402'`,
        );
        return row;
      };
      await expect
        .poll(async () => (await actionOf())?.status, { timeout: 30_000, interval: 100 })
        .toBe("failed");
      expect(await actionOf()).toMatchObject({ error_code: "abandoned" });
      const repeat = await authorize(quick.base, agent.token, body);
      expect(repeat.status).toBe(409);
      expect(repeat.body).toMatchObject({
        error: {
          code: "abandoned",
          message: expect.stringMatching(/nothing signed for it was kept or sent.*new idempotency_key/),
          action_id: (await actionOf())!.action_id,
        },
      });
      expect(await signedActions(agent.agentId)).toBe(0);
    } finally {
      await quick.close();
    }
  });

  it("keeps authorizing after the transfer limits are lowered below its amount and the day's transfer budget is spent", async () => {
    // Lowering the transfer quotas neither disables x402 nor limits it
    // (docs/api.md#x402-stands-apart-from-transfers). Sealed and configured alike (the node refuses
    // to start otherwise): 1000 units per transfer and a day, fees included, against an x402 amount
    // of 10000.
    const lowered = { ...stack.policy, perTxLimitUnits: 1_000n, dailyLimitUnits: 1_000n };
    expect((await stack.signer.configurePolicy(lowered, stack.authorities.policy)).ok).toBe(true);
    try {
      const low = await startTestOrigin({
        database: stack.db.handle,
        rpcUrl: stack.devnet.url,
        env: { ...stack.originEnv, AGENT_TRANSFER_PER_TX_LIMIT: "1000", AGENT_TRANSFER_DAILY_LIMIT: "1000" },
        signer: stack.signer,
      });
      try {
        const agent = await stack.newAgent({ units: 1_000_000n });
        const transfer = (amount: string) =>
          send(`${low.base}/agent/v1/transfers`, {
            method: "POST",
            headers: { authorization: `Bearer ${agent.token}` },
            body: JSON.stringify({ idempotency_key: newNonce(), to: newAccount().address, amount }),
          });
        // 900 spent, whatever its fee turns out to be; 200 more is within the per-transfer limit
        // and over the day's.
        const spent = await transfer("900");
        expect(spent.status, JSON.stringify(spent.body)).toBe(202);
        const over = await transfer("200");
        expect(over.status, JSON.stringify(over.body)).toBe(403);
        expect(over.body).toMatchObject({ error: { code: "limit_exceeded", limit: "daily" } });
        for (let i = 0; i < 2; i++) {
          const response = await authorize(low.base, agent.token, {
            payment_required: quote(),
            nonce: newNonce(),
          });
          expect(response.status, response.text).toBe(200);
          const body = response.body as X402AuthorizeResponse;
          expect(body.payment_payload.payload.authorization).toMatchObject({
            from: agent.wallet,
            value: String(AMOUNT),
          });
        }
      } finally {
        await low.close();
      }
    } finally {
      expect((await stack.signer.configurePolicy(stack.policy, stack.authorities.policy)).ok).toBe(true);
    }
  });

  it("600 authorize calls with 32 KiB quotes from an empty wallet's token store none of the quotes: the actions' tables, the event log and the rest of the database each grow by less than 1 MB", async () => {
    // A token with nothing in its wallet, as a free public registration gives.
    const agent = await stack.newAgent();
    const db = stack.db.handle.db;
    const sizes = async () => {
      const [row] = await queryRows<{ database: string; tables: string; events: string }>(
        db,
        sql`select pg_database_size(current_database())::text as database,
              (pg_total_relation_size('agent_actions') + pg_total_relation_size('x402_daily_authorizations'))::text as tables,
              pg_total_relation_size('events')::text as events`,
      );
      return { database: Number(row!.database), tables: Number(row!.tables), events: Number(row!.events) };
    };
    const entry = quote().accepts[0]!;
    // Random characters, which no compression of a stored value would shrink.
    const noise = (chars: number): string => randomBytes(chars).toString("base64url").slice(0, chars);
    // Half over the bounds (refused), half as large as they allow, about 31 KiB each (accepted).
    const oversized = () => ({ ...quote(), extensions: { pad: noise(30 * 1024 + 512) } });
    const largest = () => ({
      ...quote(),
      // The quote's own `error` is not copied into the envelope: only the body's bound holds it.
      error: `Payment required ${noise(2_800)}`,
      resource: {
        url: `http://127.0.0.1/77/x402/demo?${noise(2_000)}`,
        mimeType: "application/json",
        description: noise(2_048),
      },
      accepts: [
        entry,
        ...Array.from({ length: 2 }, () => ({ ...entry, network: "eip155:8453", pad: noise(3_700) })),
      ],
      extensions: { pad: noise(16 * 1024 - 20) },
    });
    const before = await sizes();
    const statuses: Record<number, number> = {};
    const bodies = Array.from({ length: 600 }, (_, i) => ({
      payment_required: i % 2 === 0 ? oversized() : largest(),
      nonce: newNonce(),
    }));
    expect(JSON.stringify(bodies[0]).length).toBeGreaterThan(31 * 1024);
    expect(JSON.stringify(bodies[1]).length).toBeGreaterThan(31 * 1024);
    for (let i = 0; i < bodies.length; i += 8) {
      const answers = await Promise.all(
        bodies.slice(i, i + 8).map((body) => authorize(origin.base, agent.token, body)),
      );
      for (const answer of answers) statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
    }
    expect(statuses).toEqual({ 200: 300, 400: 300 });
    const after = await sizes();
    // A stored quote would be about 31 KiB a call, 9 MB for the 300 accepted. What each accepted
    // call does store: its action and daily count (about 1.6 KB), and its two events with their
    // indexes (about 2 KB), which together took the whole database just past 1 MB.
    const events = after.events - before.events;
    expect(after.tables - before.tables).toBeLessThan(1024 * 1024);
    expect(events).toBeLessThan(1024 * 1024);
    expect(after.database - before.database - events).toBeLessThan(1024 * 1024);
  }, 300_000);

  describe("AGENT_X402_DAILY_LIMIT", () => {
    const LIMIT = 3;
    const limited = useStackOrigin("origin with a daily limit", stack, () => ({
      env: { AGENT_X402_DAILY_LIMIT: String(LIMIT) },
      signer: counted,
    }));
    const actions = async (agentId: string): Promise<number> => {
      const [row] = await queryRows<{ n: number }>(
        stack.db.handle.db,
        sql`select count(*)::int as n from agent_actions where agent_id = ${agentId} and kind = 'x402'`,
      );
      return row!.n;
    };

    it("past the day's limit: 429 x402_daily_limit until the next UTC day, nothing written or signed; a repeat of a signed one is still answered", async () => {
      const agent = await stack.newAgent();
      const bodies = Array.from({ length: LIMIT + 1 }, () => ({
        payment_required: quote(),
        nonce: newNonce(),
      }));
      const firsts = [];
      for (const body of bodies.slice(0, LIMIT)) {
        const answer = await authorize(limited.base, agent.token, body);
        expect(answer.status).toBe(200);
        firsts.push(answer);
      }
      const signedBefore = signRequestsOf(agent);
      const refused = await authorize(limited.base, agent.token, bodies[LIMIT]);
      expect(refused.status).toBe(429);
      const error = (refused.body as { error: { code: string; retry_after: number } }).error;
      expect(error.code).toBe("x402_daily_limit");
      const now = new Date();
      const toMidnight = Math.ceil(
        (Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000,
      );
      expect(Math.abs(error.retry_after - toMidnight)).toBeLessThanOrEqual(5);
      expect(refused.headers.get("retry-after")).toBe(String(error.retry_after));
      expect(signRequestsOf(agent)).toBe(signedBefore);
      expect(await actions(agent.agentId)).toBe(LIMIT);
      // A repeat of one signed today is its stored answer, not a new authorization.
      const repeat = await authorize(limited.base, agent.token, bodies[0]);
      expect(repeat.text).toBe(firsts[0]!.text);
      expect(signRequestsOf(agent)).toBe(signedBefore);
    });

    it("holds under concurrency: 10 distinct authorizations at once sign exactly the limit", async () => {
      const agent = await stack.newAgent();
      const signedBefore = signRequestsOf(agent);
      const answers = await Promise.all(
        Array.from({ length: 10 }, () =>
          authorize(limited.base, agent.token, { payment_required: quote(), nonce: newNonce() }),
        ),
      );
      const codes = answers.map((answer) =>
        answer.status === 200
          ? "200"
          : `${answer.status} ${(answer.body as { error: { code: string } }).error.code}`,
      );
      expect(codes.filter((code) => code === "200")).toHaveLength(LIMIT);
      expect(codes.filter((code) => code === "429 x402_daily_limit")).toHaveLength(10 - LIMIT);
      expect(signRequestsOf(agent) - signedBefore).toBe(LIMIT);
    });
  });
});
