import { randomBytes } from "node:crypto";
import { HTTPFacilitatorClient, x402ResourceServer } from "@x402/core/server";
import type { PaymentPayload } from "@x402/core/types";
import { ExactEvmScheme as ExactEvmServer } from "@x402/evm/exact/server";
import { sql } from "drizzle-orm";
import type { Address, Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor, rpc } from "../../../devnet/testing.ts";
import { CAIP2_NETWORK, HEADER_CLIENT_IP, HEADER_EDGE_SECRET } from "../../../shared/constants.ts";
import { sleep } from "../../../shared/sleep.ts";
import { startCountingPassThrough } from "../../../testing/counting-pass-through.ts";
import { databaseBehindProxy } from "../../../testing/database.ts";
import { type EdgeHandle, startTestEdge } from "../../../testing/edge.ts";
import { freePort } from "../../../testing/free-port.ts";
import { send } from "../../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../../testing/origin.ts";
import { INSUFFICIENT_FUNDS_MESSAGE, startRpcRefusalProxy } from "../../../testing/rpc-refusal-proxy.ts";
import { useFixture, useMoneyStack } from "../../../testing/stack.ts";
import type { TcpProxy } from "../../../testing/tcp-proxy.ts";
import { relayerOf } from "../../../testing/x402-front-run.ts";
import {
  envelope,
  envelopeWithWindow,
  fundedPayer,
  paymentHeader,
  quote,
  withPaymentId,
} from "../../../testing/x402-payer.ts";
import { authorizationUsedCount, settlementRowCount } from "../../../testing/x402-settlements.ts";
import { queryRows } from "../../db/client.ts";
import { X402_REASONS } from "../reasons.ts";
import type { SettlementView } from "./settlement-view.ts";

// What a payer or a seller can learn of a settlement after its settle answer was lost or late
// (docs/x402.md#settlement-status), every part real and through the edge: the status routes, the
// pointer a settlement_pending answer carries, and the facilitator while the chain is out of reach.
// Payments are signed by `@x402/evm`'s own client; the official `@x402/core` facilitator client and
// resource server settle them.

const EDGE_SECRET = "x402-settlement-status-secret-0123456789abcdef0123";
const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;
/** Short, so that a receipt held back by the devnet outlasts it. */
const RECEIPT_TIMEOUT_MS = 1_500;
/**
 * AGENT_X402_VALIDITY_MARGIN_SECONDS, sealed in the stack's policy and given to its origins: short,
 * so that the tests of what a settlement answers once an authorization's window and this margin
 * have passed wait seconds less (the default is 6).
 */
const MARGIN_SECONDS = 2;
/**
 * What a presentation of a payment another holds waits beyond the receipt wait: 1 s, not 5, so
 * the tests that present a payment again while its mining is held wait 2.5 s, not 6.5.
 */
const HOLD_BEYOND_RECEIPT_MS = 1_000;

// The stack's own origin follows no transaction of its own (its tracker is slowed right down): the
// origins each block starts are the ones that settle, so a refused broadcast is not sent again
// behind the refusing pass-through's back.
const stack = useMoneyStack(
  {
    x402: { amountUnits: AMOUNT, payTo },
    policy: { x402ValidityMarginSeconds: MARGIN_SECONDS },
    tracker: { periodMs: 3_600_000 },
    env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET, AGENT_X402_RECEIPT_TIMEOUT_MS: String(RECEIPT_TIMEOUT_MS) },
    x402HoldBeyondReceiptMs: HOLD_BEYOND_RECEIPT_MS,
  },
  { timeoutMs: 180_000 },
);

const chain = () => publicClientFor(stack.devnet.url);

/** An origin on the stack with a tracker of its own, and an edge in front of it. */
async function originBehindEdge(
  env: Record<string, string> = {},
  rpcUrl?: string,
): Promise<{ origin: TestOrigin; edge: EdgeHandle; facilitator: string; close(): Promise<void> }> {
  const origin = await stack.startOrigin(env, { periodMs: 100, signedGraceMs: 500 }, rpcUrl);
  const edge = await startTestEdge({
    originUrl: origin.url,
    edgeSharedSecret: EDGE_SECRET,
    onLine: () => {},
  });
  return {
    origin,
    edge,
    facilitator: `${edge.url}/77/x402/facilitator`,
    async close() {
      await edge.stop();
      await origin.close();
    },
  };
}

/** A POST of `payload` to the facilitator's verify or settle, as any client on the network may. */
async function post(
  facilitator: string,
  route: "verify" | "settle",
  payload: PaymentPayload,
  signal?: AbortSignal,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${facilitator}/${route}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ x402Version: 2, paymentPayload: payload, paymentRequirements: payload.accepted }),
    ...(signal ? { signal } : {}),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** GET of a status URL: the status and the body. */
async function read(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const authorizationOf = (payload: PaymentPayload) =>
  (payload.payload as { authorization: { from: string; nonce: string } }).authorization;

/** The status URL of `payload`'s settlement at `facilitator`. */
function statusUrlAt(facilitator: string, payload: PaymentPayload): string {
  const { from, nonce } = authorizationOf(payload);
  return `${facilitator}/settlements/${from.toLowerCase()}/${nonce.toLowerCase()}`;
}

/** The settler transactions stored for a payment: its nonce is in their calldata. */
const settlerTransactions = async (payload: PaymentPayload) =>
  (
    await queryRows<{ tx_hash: string }>(
      stack.db.handle.db,
      sql`select tx_hash from outgoing_transactions
          where purpose = 'settlement' and position(${authorizationOf(payload).nonce.toLowerCase().slice(2)} in raw_tx) > 0`,
    )
  ).map((row) => row.tx_hash);

/** The devnet holds what it is sent until `mine` (dev_setAutomine false), then mines on arrival again. */
async function withMiningHeld<T>(steps: (mine: () => Promise<void>) => Promise<T>): Promise<T> {
  expect(await rpc(stack.devnet.url, "dev_setAutomine", [false])).toMatchObject({ result: true });
  const mine = async () => {
    expect(await rpc(stack.devnet.url, "dev_mine", [])).toMatchObject({ result: true });
  };
  try {
    return await steps(mine);
  } finally {
    await rpc(stack.devnet.url, "dev_setAutomine", [true]);
    await rpc(stack.devnet.url, "dev_mine", []);
  }
}

describe("through the edge, an origin whose chain mines when told", () => {
  let node: Awaited<ReturnType<typeof originBehindEdge>>;
  beforeAll(async () => {
    node = await originBehindEdge();
  }, 120_000);
  afterAll(async () => {
    await node?.close();
  });
  const statusUrl = (payload: PaymentPayload) => {
    const { from, nonce } = authorizationOf(payload);
    return `${node.facilitator}/settlements/${from.toLowerCase()}/${nonce.toLowerCase()}`;
  };

  it("says settled, with its transaction and block, for a payment whose settle answer never reached its caller", async () => {
    const payer = await fundedPayer(stack.devnet.url);
    const payload = await envelope(`${node.edge.url}/77/x402/demo`, payer);
    const url = statusUrl(payload);
    expect((await read(url)).status).toBe(404);
    await withMiningHeld(async (mine) => {
      // The caller gives up once its settlement is on its way: its answer is never read.
      const caller = new AbortController();
      const lost = post(node.facilitator, "settle", payload, caller.signal);
      lost.catch(() => {});
      await expect
        .poll(async () => (await read(url)).body.status, { timeout: 30_000, interval: 100 })
        .toBe("submitted");
      caller.abort();
      await expect(lost).rejects.toThrow();
      await mine();
    });
    await expect
      .poll(async () => (await read(url)).body.status, { timeout: 30_000, interval: 100 })
      .toBe("settled");
    const view = (await read(url)).body as SettlementView;
    const receipt = await chain().getTransactionReceipt({ hash: view.transaction as Hex });
    expect(receipt.status).toBe("success");
    expect(view).toEqual({
      status: "settled",
      payer: payer.address.toLowerCase(),
      payee: payTo,
      amount: AMOUNT.toString(),
      network: CAIP2_NETWORK,
      transaction: receipt.transactionHash,
      block_number: receipt.blockNumber.toString(),
      updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    // The same settlement by its transaction's hash.
    expect(await read(`${node.facilitator}/settlements/tx/${view.transaction}`)).toEqual({
      status: 200,
      body: view,
    });
    expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
  }, 120_000);

  it("answers a settle whose receipt is late 504 settlement_pending pointing at its status, which names the transaction, then says settled once mined; the client's retry is paid, once, and settles nothing twice", async () => {
    // Mutation: withStatusPointer returning the answer as it is leaves the pending answer with no
    // status URL (errorMessage undefined); settleStatus answering pending 200 makes the official
    // client return it rather than throw.
    const payer = await fundedPayer(stack.devnet.url);
    const payload = await envelope(`${node.edge.url}/77/x402/demo`, payer);
    const client = new HTTPFacilitatorClient({ url: node.facilitator });
    const { transaction, url } = await withMiningHeld(async (mine) => {
      const pending = await client.settle(payload, payload.accepted).then(
        (answer) => ({ answer, error: undefined }),
        (error: { errorReason?: string; transaction?: string; errorMessage?: string }) => ({
          answer: undefined,
          error,
        }),
      );
      expect(pending.answer).toBeUndefined();
      expect(pending.error).toMatchObject({
        errorReason: X402_REASONS.settlementPending,
        transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      });
      const transaction = pending.error!.transaction!;
      const url = pending.error!.errorMessage?.match(/https?:\/\/\S+/)?.[0];
      expect(url).toBe(statusUrl(payload));

      // The same answer as any client reads it: 504, the transaction, the URL in `extra`.
      const again = await post(node.facilitator, "settle", payload);
      expect(again).toMatchObject({
        status: 504,
        body: {
          success: false,
          errorReason: X402_REASONS.settlementPending,
          transaction,
          extra: { statusUrl: url },
        },
      });
      // The URL names the transaction while it waits to be mined.
      expect(await read(url!)).toMatchObject({
        status: 200,
        body: { status: "submitted", transaction, block_number: null, payer: payer.address.toLowerCase() },
      });
      await mine();
      return { transaction, url: url! };
    });
    await expect
      .poll(async () => (await read(url)).body.status, { timeout: 30_000, interval: 100 })
      .toBe("settled");
    const receipt = await chain().getTransactionReceipt({ hash: transaction as Hex });
    expect((await read(url)).body).toMatchObject({
      transaction,
      block_number: receipt.blockNumber.toString(),
    });

    // The official resource server presents the same payment again (its one retry after
    // settlement_pending): paid, by the same transaction. That retry was what the pending answers
    // owed: one more presentation is told the nonce is used, by that transaction, so a seller
    // delivers once. Mutation: answering every presentation of the settled payload as paid (as
    // before) makes the last settle succeed.
    const server = new x402ResourceServer(client).register(CAIP2_NETWORK, new ExactEvmServer());
    await server.initialize();
    expect(await server.settlePayment(payload, payload.accepted)).toMatchObject({
      success: true,
      transaction,
    });
    expect(await post(node.facilitator, "settle", payload)).toMatchObject({
      status: 400,
      body: { success: false, errorReason: X402_REASONS.nonceUsed, transaction },
    });
    expect(await settlerTransactions(payload)).toEqual([transaction]);
    expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
  }, 120_000);

  it("a payment an official seller's settle left pending is valid to that seller's verify when the payer presents it again, as its settle then answers it: paid, once", async () => {
    // The official resource server verifies each presentation before it settles it. A payer told
    // settlement_pending presents the same payment again, as the answer says; verify must not
    // refuse what settle owes (the paid answer), or the seller never serves a payment that settled.
    // Mutation: verify answering every claimed (from, nonce) nonce_already_used, as before, refuses
    // the retry while it is in flight and once it settled.
    const payer = await fundedPayer(stack.devnet.url);
    const payload = await envelope(`${node.edge.url}/77/x402/demo`, payer);
    const server = new x402ResourceServer(new HTTPFacilitatorClient({ url: node.facilitator })).register(
      CAIP2_NETWORK,
      new ExactEvmServer(),
    );
    await server.initialize();
    expect(await server.verifyPayment(payload, payload.accepted)).toMatchObject({ isValid: true });
    const transaction = await withMiningHeld(async (mine) => {
      // Its settle and the one retry the official server makes of a pending answer: both pending.
      const pending = (await server.settlePayment(payload, payload.accepted).catch((error) => error)) as {
        errorReason?: string;
        transaction?: string;
      };
      expect(pending).toMatchObject({
        errorReason: X402_REASONS.settlementPending,
        transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      });
      // The payer presents it again while it is mined.
      expect(await server.verifyPayment(payload, payload.accepted)).toEqual({
        isValid: true,
        payer: payer.address.toLowerCase(),
      });
      await mine();
      return pending.transaction!;
    });
    await expect
      .poll(async () => (await read(statusUrl(payload))).body.status, { timeout: 30_000, interval: 100 })
      .toBe("settled");
    expect(await server.verifyPayment(payload, payload.accepted)).toEqual({
      isValid: true,
      payer: payer.address.toLowerCase(),
    });
    expect(await server.settlePayment(payload, payload.accepted)).toMatchObject({
      success: true,
      transaction,
    });
    // Its one paid answer taken: a replay is refused at verify, and settles nothing.
    expect(await server.verifyPayment(payload, payload.accepted)).toMatchObject({
      isValid: false,
      invalidReason: X402_REASONS.nonceUsed,
    });
    expect(await settlerTransactions(payload)).toEqual([transaction]);
    expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
  }, 120_000);

  it("a settled payment presented again once its authorization's window has closed is answered from its settlement: the retry its pending answer asked for paid, once, then the nonce used by that transaction; never that the authorization expired", async () => {
    // A window closing while its settlement is pending is the usual case (validBefore is now + 60
    // for the official client): the retry comes when it comes. "Expired" tells a payer, or a seller,
    // that nothing was paid, and the payer pays again. Mutation: refusing every presentation past
    // validBefore (as before) answers each of these valid_before, the one owed its paid answer too.
    const payer = await fundedPayer(stack.devnet.url);
    const quoted = await quote(`${node.edge.url}/77/x402/demo`);
    const now = BigInt(Math.floor(Date.now() / 1000));
    // Settled while more than the margin is left: 4 s to spare.
    const validBefore = now + BigInt(MARGIN_SECONDS) + 4n;
    const payload = await envelopeWithWindow(quoted, payer, { validAfter: 0n, validBefore });
    const transaction = await withMiningHeld(async (mine) => {
      const pending = await post(node.facilitator, "settle", payload);
      expect(pending).toMatchObject({ status: 504, body: { errorReason: X402_REASONS.settlementPending } });
      await mine();
      return pending.body.transaction as string;
    });
    await expect
      .poll(async () => (await read(statusUrl(payload))).body.status, { timeout: 30_000, interval: 100 })
      .toBe("settled");
    // Past validBefore, by more than the margin.
    await sleep(Math.max(0, Number(validBefore + BigInt(MARGIN_SECONDS) + 1n) * 1000 - Date.now()));
    expect(await post(node.facilitator, "verify", payload)).toEqual({
      status: 200,
      body: { isValid: true, payer: payer.address.toLowerCase() },
    });
    expect(await post(node.facilitator, "settle", payload)).toMatchObject({
      status: 200,
      body: { success: true, transaction },
    });
    expect(await post(node.facilitator, "settle", payload)).toMatchObject({
      status: 400,
      body: { success: false, errorReason: X402_REASONS.nonceUsed, transaction },
    });
    const demo = await fetch(`${node.edge.url}/77/x402/demo`, {
      headers: { "PAYMENT-SIGNATURE": paymentHeader(payload) },
    });
    expect(demo.status).toBe(402);
    expect(
      JSON.parse(Buffer.from(demo.headers.get("payment-response") ?? "", "base64").toString() || "{}"),
    ).toMatchObject({ errorReason: X402_REASONS.nonceUsed, transaction });
    expect(await settlerTransactions(payload)).toEqual([transaction]);
  }, 120_000);

  /**
   * A payment presented under a payment id, answered 504 settlement_pending (mining held), then
   * settled; no presentation of it answered paid yet.
   */
  const settledAfterPendingUnderId = async () => {
    const payer = await fundedPayer(stack.devnet.url);
    const id = `pay_${randomBytes(12).toString("hex")}`;
    const payload = withPaymentId(await envelope(`${node.edge.url}/77/x402/demo`, payer), id);
    const transaction = await withMiningHeld(async (mine) => {
      const pending = await post(node.facilitator, "settle", payload);
      expect(pending).toMatchObject({
        status: 504,
        body: { success: false, errorReason: X402_REASONS.settlementPending },
      });
      await mine();
      return pending.body.transaction as string;
    });
    await expect
      .poll(async () => (await read(statusUrl(payload))).body.status, { timeout: 30_000, interval: 100 })
      .toBe("settled");
    return { payer, payload, transaction };
  };

  it("a pending settlement's paid answer goes once: its retry under its payment id takes it, and the same payload presented without the id is then told the nonce is used", async () => {
    // The id's presentation is the same request, answered paid whatever its payload; answered so,
    // it also took the one paid answer the pending answer owed. Mutation: answering the id as
    // paid without taking it answers the payload without the id 200 too: two paid answers for
    // one payment, and a seller delivers twice.
    const { payer, payload, transaction } = await settledAfterPendingUnderId();
    expect(await post(node.facilitator, "settle", payload)).toMatchObject({
      status: 200,
      body: { success: true, transaction },
    });
    const { extensions: _id, ...withoutId } = payload;
    expect(await post(node.facilitator, "settle", withoutId)).toMatchObject({
      status: 400,
      body: { success: false, errorReason: X402_REASONS.nonceUsed, transaction },
    });
    expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
  }, 120_000);

  it("a pending settlement claimed under a payment id owes its paid answer to the id: the same payload presented without the id first is told the nonce is used, and the id's retry is paid", async () => {
    // The reverse order of the test before: the id's presentations are answered paid whenever
    // they come, so the answer owed from the pending one is the id's. Mutation: letting a
    // presentation without the id take it answers it 200 and the id's retry 200 too: two paid
    // answers for one payment, and a seller delivers twice.
    const { payer, payload, transaction } = await settledAfterPendingUnderId();
    const { extensions: _id, ...withoutId } = payload;
    expect(await post(node.facilitator, "settle", withoutId)).toMatchObject({
      status: 400,
      body: { success: false, errorReason: X402_REASONS.nonceUsed, transaction },
    });
    expect(await post(node.facilitator, "settle", payload)).toMatchObject({
      status: 200,
      body: { success: true, transaction },
    });
    expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
  }, 120_000);

  it("the demo's settlement_pending carries the status URL and the transaction in PAYMENT-RESPONSE", async () => {
    const payer = await fundedPayer(stack.devnet.url);
    const demo = `${node.edge.url}/77/x402/demo`;
    const payload = await envelope(demo, payer);
    await withMiningHeld(async () => {
      const response = await fetch(demo, {
        headers: { "PAYMENT-SIGNATURE": Buffer.from(JSON.stringify(payload)).toString("base64") },
      });
      expect(response.status).toBe(402);
      const settlement = JSON.parse(
        Buffer.from(response.headers.get("payment-response")!, "base64").toString(),
      ) as Record<string, unknown>;
      expect(settlement).toMatchObject({
        errorReason: X402_REASONS.settlementPending,
        transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
        extra: { statusUrl: statusUrl(payload) },
      });
      expect(await read(statusUrl(payload))).toMatchObject({
        status: 200,
        body: { status: "submitted", transaction: settlement.transaction },
      });
    });
  }, 120_000);

  it("answers 404 for a payment never presented or an unknown transaction, 400 for a malformed key", async () => {
    const nonce = `0x${"5a".repeat(32)}`;
    const payer = newAccount().address;
    for (const url of [
      `${node.facilitator}/settlements/${payer}/${nonce}`,
      `${node.facilitator}/settlements/tx/0x${"6b".repeat(32)}`,
    ]) {
      expect(await read(url)).toMatchObject({ status: 404, body: { error: { code: "not_found" } } });
    }
    for (const url of [
      `${node.facilitator}/settlements/0x1234/${nonce}`,
      `${node.facilitator}/settlements/${payer}/0x1234`,
      `${node.facilitator}/settlements/${payer}/${nonce.replace("5a", "zz")}`,
      `${node.facilitator}/settlements/tx/0x${"6b".repeat(31)}`,
      `${node.facilitator}/settlements/tx/${nonce.slice(2)}`,
    ]) {
      expect(await read(url), url).toMatchObject({
        status: 400,
        body: { error: { code: "validation_failed" } },
      });
    }
  });
});

describe("a settlement the chain refused", () => {
  const proxy = useFixture(
    "refusing pass-through",
    () => startRpcRefusalProxy(stack.devnet.url),
    (refusing) => refusing.close(),
    { timeoutMs: 120_000 },
  );

  /**
   * `payload` settled at `facilitator` while the proxy refuses the settler's broadcasts: answered
   * settlement_pending, then failed once a filler took the settler's nonce; `meanwhile` runs while
   * ours is refused. Waited for in the database, so that no read of its status asks the chain.
   */
  async function refusedSettlement(
    facilitator: string,
    payload: PaymentPayload,
    meanwhile: () => Promise<void> = async () => {},
  ): Promise<string> {
    const settler = stack.settler!.toLowerCase();
    const refusing = proxy.refuseEvery((tx) => tx.from === settler && tx.to !== settler);
    try {
      const pending = await post(facilitator, "settle", payload);
      expect(pending).toMatchObject({ status: 504, body: { errorReason: X402_REASONS.settlementPending } });
      await refusing.first;
      await meanwhile();
      await expect
        .poll(() => settlementRow(payload), { timeout: 30_000, interval: 100 })
        .toMatchObject({
          status: "failed",
        });
      return (pending.body.extra as { statusUrl: string }).statusUrl;
    } finally {
      refusing.stop();
    }
  }

  /**
   * A fresh payer's payment to `node`'s demo, settled there while the proxy refuses the settler's
   * broadcasts and another relayer's transaction uses its authorization meanwhile (refusedSettlement):
   * ours failed, theirs paid the payee. The payer, the payment and its status URL.
   */
  async function refusedWhileRelayed(node: { edge: EdgeHandle; facilitator: string }) {
    const payer = await fundedPayer(stack.devnet.url);
    const payload = await envelope(`${node.edge.url}/77/x402/demo`, payer);
    const { relay } = await relayerOf(stack.devnet.url, payload);
    const url = await refusedSettlement(node.facilitator, payload, relay);
    return { payer, payload, url };
  }

  const settlementRow = async (payload: PaymentPayload) => {
    const { from, nonce } = authorizationOf(payload);
    const [row] = await queryRows<{ status: string; authorization_used_elsewhere: boolean | null }>(
      stack.db.handle.db,
      sql`select status, authorization_used_elsewhere from x402_settlements
          where payer = ${from.toLowerCase()} and nonce = ${nonce.toLowerCase()}`,
    );
    return row;
  };

  /** What a settle answers for a settlement that moved nothing while another transaction paid its payee. */
  const paidElsewhere = (transaction: string) =>
    `transaction ${transaction} moved nothing: another transaction used this authorization, and the payment reached its payee by that transaction, not by this settlement`;

  it("says failed, with the chain's reason, once a filler took the settler's nonce: nothing moved", async () => {
    const node = await originBehindEdge({}, proxy.url);
    try {
      const payer = await fundedPayer(stack.devnet.url);
      const payload = await envelope(`${node.edge.url}/77/x402/demo`, payer);
      const url = await refusedSettlement(node.facilitator, payload);
      const view = (await read(url)).body as SettlementView;
      expect(view).toMatchObject({
        status: "failed",
        transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
        block_number: null,
        authorization_used_elsewhere: false,
      });
      expect(view.reason).toMatch(new RegExp(`^${X402_REASONS.broadcastRefused}: `));
      expect(view.reason).toContain(INSUFFICIENT_FUNDS_MESSAGE);
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(0);
    } finally {
      await node.close();
    }
  }, 120_000);

  it("says failed, and that the authorization was used elsewhere, once another relayer's transaction used it while ours was refused: the payee was paid", async () => {
    // Anyone holding the payment can relay it (the seller it was sent to, say): ours never mined,
    // theirs paid the payee.
    const node = await originBehindEdge({}, proxy.url);
    try {
      const { payer, url } = await refusedWhileRelayed(node);
      expect((await read(url)).body).toMatchObject({
        status: "failed",
        block_number: null,
        authorization_used_elsewhere: true,
      });
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    } finally {
      await node.close();
    }
  }, 120_000);

  it("a later presentation of a failed settlement whose authorization another relayer used is told, once its status says so, that the payment reached the payee by that other transaction", async () => {
    // Mutation: answering a failed settlement with its reason alone (as it was; only a reverted one
    // said so) leaves the seller told broadcast_refused, as if the payer had not paid.
    const node = await originBehindEdge({}, proxy.url);
    try {
      const { payer, payload, url } = await refusedWhileRelayed(node);
      const view = (await read(url)).body;
      expect(view).toMatchObject({ status: "failed", authorization_used_elsewhere: true });
      expect(await post(node.facilitator, "settle", payload)).toEqual({
        status: 400,
        body: {
          success: false,
          errorReason: X402_REASONS.broadcastRefused,
          payer: payer.address.toLowerCase(),
          transaction: view.transaction,
          network: CAIP2_NETWORK,
          errorMessage: paidElsewhere(view.transaction as string),
        },
      });
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    } finally {
      await node.close();
    }
  }, 120_000);

  it("a later presentation of a failed settlement nobody asked the chain about asks it: told the payment reached the payee by another relayer's transaction, which the settlement then keeps; with the chain out of reach, answered by the settlement as it stands", async () => {
    // Mutation: answering from the row alone (as it was) leaves a settlement nobody asked about
    // answered broadcast_refused without a word of the payee being paid.
    const node = await originBehindEdge({}, proxy.url);
    const unreachable = await originBehindEdge(
      { CHAIN_RPC_TIMEOUT_MS: "1000" },
      `http://127.0.0.1:${await freePort()}`,
    );
    try {
      const { payer, payload } = await refusedWhileRelayed(node);
      expect(await settlementRow(payload)).toEqual({ status: "failed", authorization_used_elsewhere: null });
      const [transaction] = await settlerTransactions(payload);
      const refused = {
        success: false,
        errorReason: X402_REASONS.broadcastRefused,
        payer: payer.address.toLowerCase(),
        transaction,
        network: CAIP2_NETWORK,
      };

      expect(await post(unreachable.facilitator, "settle", payload)).toEqual({ status: 400, body: refused });
      expect(await settlementRow(payload)).toEqual({ status: "failed", authorization_used_elsewhere: null });

      expect(await post(node.facilitator, "settle", payload)).toEqual({
        status: 400,
        body: { ...refused, errorMessage: paidElsewhere(transaction!) },
      });
      expect(await settlementRow(payload)).toEqual({ status: "failed", authorization_used_elsewhere: true });
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    } finally {
      await unreachable.close();
      await node.close();
    }
  }, 120_000);

  it("x402.settlement.used_elsewhere: written once, when the node first records that another relayer's transaction used a failed settlement's authorization, though two origins learn it at once; its data the status route's answer", async () => {
    // Mutation: without migration 0045 (as it was) nothing follows the `failed` event, which says
    // null: a webhook subscriber never learns the payee was paid.
    const node = await originBehindEdge({}, proxy.url);
    const other = await stack.startOrigin({}, undefined, stack.devnet.url);
    try {
      const { payer, payload } = await refusedWhileRelayed(node);
      expect(await settlementRow(payload)).toEqual({ status: "failed", authorization_used_elsewhere: null });
      const { from, nonce } = authorizationOf(payload);
      const key = `settlements/${from.toLowerCase()}/${nonce.toLowerCase()}`;
      const eventsOf = () =>
        queryRows<{ type: string; data: SettlementView }>(
          stack.db.handle.db,
          sql`select type, data from events
              where type like 'x402.settlement.%' and data->>'payer' = ${from.toLowerCase()} order by id`,
        );

      // Nobody asked the chain yet: both origins do, several reads each, at once.
      const reads = await Promise.all(
        [node.facilitator, `${other.base}/x402/facilitator`].flatMap((facilitator) =>
          Array.from({ length: 4 }, () => read(`${facilitator}/${key}`)),
        ),
      );
      for (const answer of reads)
        expect(answer.body).toMatchObject({ status: "failed", authorization_used_elsewhere: true });
      // Learnt again later, by a presentation and another read: nothing more is written.
      expect((await post(node.facilitator, "settle", payload)).body).toMatchObject({
        errorMessage: paidElsewhere(reads[0]!.body.transaction as string),
      });
      const view = (await read(`${node.facilitator}/${key}`)).body;

      // After the claim (and `submitted`, when the tracker saw the broadcast before its refusal):
      const events = (await eventsOf()).filter((event) => event.type !== "x402.settlement.submitted");
      expect(events.map((event) => event.type)).toEqual([
        "x402.settlement.claimed",
        "x402.settlement.failed",
        "x402.settlement.used_elsewhere",
      ]);
      expect(events[1]!.data).toMatchObject({ status: "failed", authorization_used_elsewhere: null });
      expect(events[2]!.data).toEqual(view);
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    } finally {
      await other.close();
      await node.close();
    }
  }, 120_000);

  it("reads the chain for a settlement that moved nothing on each status read while its authorization is valid, and not once a read after its validBefore said it unused: that can no longer change", async () => {
    // Mutation: asking on every read (as it did) reads the chain three more times for the
    // expired one; taking any `false` past validBefore as final, even one read before it, says
    // the one relayed in the authorization's last seconds is still unused.
    const counting = await startCountingPassThrough(proxy.url);
    const node = await originBehindEdge({}, counting.url);
    try {
      const payer = await fundedPayer(stack.devnet.url);
      const quoted = await quote(`${node.edge.url}/77/x402/demo`);
      // Each settle must come while more than the margin (MARGIN_SECONDS) is left: the second is
      // sent about 2 s in (the first refusal done), so 10 s more than the margin leaves it 7 s to
      // spare on a slow machine (and the relay below, before validBefore, more).
      const validBefore = BigInt(Math.floor(Date.now() / 1000) + MARGIN_SECONDS + 10);
      const window = { validAfter: 0n, validBefore };
      const unused = await envelopeWithWindow(quoted, payer, window);
      const relayedLate = await envelopeWithWindow(quoted, payer, window);
      const unusedUrl = await refusedSettlement(node.facilitator, unused);
      const lateUrl = await refusedSettlement(node.facilitator, relayedLate);
      const storageReads = () => counting.callsOf("eth_getStorageAt");

      // While the authorizations are valid, each read asks the chain.
      let before = storageReads();
      expect((await read(unusedUrl)).body).toMatchObject({ authorization_used_elsewhere: false });
      expect((await read(lateUrl)).body).toMatchObject({ authorization_used_elsewhere: false });
      expect(storageReads()).toBe(before + 2);
      // Another relayer uses one of them in its last seconds, after its status said unused.
      await (await relayerOf(stack.devnet.url, relayedLate)).relay();
      expect(BigInt(Math.floor(Date.now() / 1000))).toBeLessThan(validBefore);

      // Past validBefore and the margin, the one relayed says so; the other is asked once more.
      // (AGENT_X402_VALIDITY_MARGIN_SECONDS, MARGIN_SECONDS as sealed: a block's time may run behind
      // ours). The database's clock is this machine's: a quarter second past that point is past it there.
      await sleep((Number(validBefore) + MARGIN_SECONDS) * 1000 + 250 - Date.now());
      expect((await read(lateUrl)).body).toMatchObject({ authorization_used_elsewhere: true });
      expect((await read(unusedUrl)).body).toMatchObject({ authorization_used_elsewhere: false });
      before = storageReads();
      for (let i = 0; i < 3; i++)
        expect((await read(unusedUrl)).body).toMatchObject({
          status: "failed",
          authorization_used_elsewhere: false,
        });
      expect(storageReads()).toBe(before);
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    } finally {
      await node.close();
      await counting.close();
    }
  }, 120_000);
});

describe("the chain out of reach", () => {
  it("supported still answers; verify and settle answer 503 chain_unavailable and store nothing; the payment settles once the chain answers", async () => {
    // An origin whose chain is a port nothing listens on.
    const closed = `http://127.0.0.1:${await freePort()}`;
    const node = await originBehindEdge({ CHAIN_RPC_TIMEOUT_MS: "1000" }, closed);
    try {
      const client = new HTTPFacilitatorClient({ url: node.facilitator });
      expect((await client.getSupported()).kinds).toEqual([
        expect.objectContaining({ x402Version: 2, scheme: "exact", network: CAIP2_NETWORK }),
      ]);
      const payer = await fundedPayer(stack.devnet.url);
      const payload = await envelope(`${node.edge.url}/77/x402/demo`, payer);
      expect(await post(node.facilitator, "verify", payload)).toEqual({
        status: 503,
        body: {
          isValid: false,
          invalidReason: X402_REASONS.chainUnavailable,
          payer: payer.address.toLowerCase(),
        },
      });
      expect(await post(node.facilitator, "settle", payload)).toMatchObject({
        status: 503,
        body: { success: false, errorReason: X402_REASONS.chainUnavailable, transaction: "" },
      });
      expect(await settlementRowCount(stack.db.handle.db, payer.address)).toBe(0);

      // Nothing was signed: the same payment settles at an origin that reaches the chain.
      const healthy = await originBehindEdge();
      try {
        expect(await post(healthy.facilitator, "settle", payload)).toMatchObject({
          status: 200,
          body: { success: true },
        });
      } finally {
        await healthy.close();
      }
    } finally {
      await node.close();
    }
  }, 120_000);
});

describe("the database out of reach", () => {
  /** An origin that reaches Postgres through a pass-through the test cuts (connections refused). */
  async function withDatabaseBehindProxy(
    steps: (parts: { origin: TestOrigin; proxy: TcpProxy }) => Promise<void>,
    env: Record<string, string> = {},
  ): Promise<void> {
    const { proxy, database } = await databaseBehindProxy(stack.db.url);
    const origin = await startTestOrigin({
      database,
      rpcUrl: stack.devnet.url,
      env: { ...stack.originEnv, ...env },
      workers: [],
    });
    try {
      await steps({ origin, proxy });
    } finally {
      proxy.restore();
      await origin.close();
      await database.close();
      await proxy.close();
    }
  }

  it("the status, discovery and paid demo routes answer 503 service_unavailable, as the served document declares; nothing is stored", async () => {
    await withDatabaseBehindProxy(async ({ origin, proxy }) => {
      const demo = `${origin.base}/x402/demo`;
      const payer = await fundedPayer(stack.devnet.url);
      const payload = await envelope(demo, payer);
      const { nonce } = authorizationOf(payload);
      proxy.cut("reset");
      // `send` checks each answer against the served document: an undeclared status fails here.
      const unavailable = async (url: string, headers: Record<string, string> = {}) => {
        const answer = await send(url, { headers });
        expect(answer.status, url).toBe(503);
        expect(answer.body, url).toMatchObject({ error: { code: "service_unavailable" } });
        expect(answer.headers["retry-after"], url).toBe("1");
      };
      const facilitator = `${origin.base}/x402/facilitator`;
      await unavailable(`${facilitator}/settlements/${payer.address.toLowerCase()}/${nonce}`);
      await unavailable(`${facilitator}/settlements/tx/0x${"22".repeat(32)}`);
      await unavailable(`${facilitator}/discovery/resources`);
      await unavailable(`${facilitator}/discovery/search?query=demo`);
      await unavailable(demo, { "PAYMENT-SIGNATURE": paymentHeader(payload) });
      proxy.restore();
      expect(await settlementRowCount(stack.db.handle.db, payer.address)).toBe(0);
    });
  }, 120_000);

  it("past an address's window of reads, the status and discovery routes answer 429 without reading the database; another address still reads it", async () => {
    // Mutation: router.ts not putting publicReadWindow in front of these routes answers the fifth
    // read 503 (it reads the database, which is cut) instead of 429.
    const READS = 4;
    await withDatabaseBehindProxy(
      async ({ origin, proxy }) => {
        const facilitator = `${origin.base}/x402/facilitator`;
        const from = (ip: string) => ({ [HEADER_EDGE_SECRET]: EDGE_SECRET, [HEADER_CLIENT_IP]: ip });
        const reader = "198.51.100.61";
        const reads = [
          `${facilitator}/discovery/resources`,
          `${facilitator}/discovery/search?query=demo`,
          `${facilitator}/settlements/tx/0x${"33".repeat(32)}`,
          `${facilitator}/settlements/0x${"44".repeat(20)}/0x${"55".repeat(32)}`,
        ];
        const statuses = [];
        for (const url of reads) statuses.push((await send(url, { headers: from(reader) })).status);
        expect(statuses).toEqual([200, 200, 404, 404]);
        proxy.cut("reset");
        // `send` checks each answer against the served document: an undeclared 429 fails here.
        for (const url of reads) {
          const refused = await send(url, { headers: from(reader) });
          expect(refused.status, url).toBe(429);
          expect(refused.body, url).toMatchObject({ error: { code: "rate_limited" } });
          // Until the window's first read leaves it: 60 s, less the time the reads took (a second
          // or more on a loaded machine).
          const { retry_after } = (refused.body as { error: { retry_after: number } }).error;
          expect(retry_after, url).toBeGreaterThanOrEqual(55);
          expect(retry_after, url).toBeLessThanOrEqual(60);
          expect(refused.headers["retry-after"], url).toBe(String(retry_after));
        }
        // Its own window: the same /24's next address reads, and finds the database cut.
        const other = await send(reads[0]!, { headers: from("198.51.100.62") });
        expect(other.status).toBe(503);
        expect(other.body).toMatchObject({ error: { code: "service_unavailable" } });
      },
      { AGENT_X402_READS_PER_MINUTE: String(READS) },
    );
  }, 120_000);

  it("verify and settle answer 503 service_unavailable in their own shapes, which the official client reads; the same payment settles once the database is back", async () => {
    await withDatabaseBehindProxy(async ({ origin, proxy }) => {
      const facilitator = `${origin.base}/x402/facilitator`;
      const payer = await fundedPayer(stack.devnet.url);
      const payload = await envelope(`${origin.base}/x402/demo`, payer);
      proxy.cut("reset");
      const from = payer.address.toLowerCase();
      for (const route of ["verify", "settle"] as const) {
        const response = await fetch(`${facilitator}/${route}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            x402Version: 2,
            paymentPayload: payload,
            paymentRequirements: payload.accepted,
          }),
        });
        expect(response.status, route).toBe(503);
        expect(response.headers.get("retry-after"), route).toBe("1");
        expect(await response.json(), route).toEqual(
          route === "verify"
            ? { isValid: false, invalidReason: X402_REASONS.serviceUnavailable, payer: from }
            : {
                success: false,
                errorReason: X402_REASONS.serviceUnavailable,
                payer: from,
                transaction: "",
                network: CAIP2_NETWORK,
              },
        );
      }
      // @x402/core reads an x402 body as a verdict it can hand its caller, a gateway envelope not.
      const client = new HTTPFacilitatorClient({ url: facilitator });
      await expect(client.verify(payload, payload.accepted)).rejects.toMatchObject({
        name: "VerifyError",
        statusCode: 503,
        invalidReason: X402_REASONS.serviceUnavailable,
      });
      await expect(client.settle(payload, payload.accepted)).rejects.toMatchObject({
        name: "SettleError",
        statusCode: 503,
        errorReason: X402_REASONS.serviceUnavailable,
      });
      proxy.restore();
      expect(await settlementRowCount(stack.db.handle.db, payer.address)).toBe(0);
      expect(await client.settle(payload, payload.accepted)).toMatchObject({ success: true, payer: from });
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    });
  }, 120_000);

  it("a settle that loses the database once its settlement is stored, its receipt late, asks for the same payment again, and that retry is paid, once", async () => {
    // The settle's answer after its batch committed needs the database no more (the paid answer a
    // retry redeems is owed from the statement that stored the settlement): it was 503
    // service_unavailable, "present the same payment again", with nothing owed, and the retry was
    // told the nonce is used: paid, nothing delivered. Mutation: storing the settlement without
    // its paid answer (and owing it only after the receipt wait, as before) answers the retry 400
    // invalid_exact_evm_nonce_already_used.
    // The settling origin's chain timeout is 1 s (5 s by default): the broadcast lease its lost
    // database leaves held runs out after 3 s (the floor) instead of 15 (store.ts broadcastLeaseMs),
    // and the tracker of the origin started below may record the receipt then.
    await withDatabaseBehindProxy(
      async ({ origin, proxy }) => {
        const facilitator = `${origin.base}/x402/facilitator`;
        const payer = await fundedPayer(stack.devnet.url);
        const payload = await envelope(`${origin.base}/x402/demo`, payer);
        const first = await withMiningHeld(async () => {
          const answer = post(facilitator, "settle", payload);
          // Stored (committed with its settler transaction) and on its way to the chain: the
          // database goes away while the settle waits for a receipt the devnet holds back.
          await expect
            .poll(() => settlerTransactions(payload), { timeout: 30_000, interval: 20 })
            .toHaveLength(1);
          proxy.cut("reset");
          const settled = await answer;
          proxy.restore();
          return settled;
        });
        const [transaction] = await settlerTransactions(payload);
        // Either way the answer asks for the same payment again, never for a new one.
        expect([503, 504]).toContain(first.status);
        expect([X402_REASONS.serviceUnavailable, X402_REASONS.settlementPending]).toContain(
          first.body.errorReason,
        );
        // Mined now; an origin with a tracker of its own records it.
        const node = await originBehindEdge();
        try {
          await expect
            .poll(async () => (await read(statusUrlAt(node.facilitator, payload))).body.status, {
              timeout: 30_000,
              interval: 100,
            })
            .toBe("settled");
        } finally {
          await node.close();
        }
        const retry = await post(facilitator, "settle", payload);
        expect(retry).toMatchObject({ status: 200, body: { success: true, transaction } });
        // The one paid answer the first one owed: any later presentation learns the nonce is used.
        expect(await post(facilitator, "settle", payload)).toMatchObject({
          status: 400,
          body: { success: false, errorReason: X402_REASONS.nonceUsed, transaction },
        });
        expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
      },
      { CHAIN_RPC_TIMEOUT_MS: "1000" },
    );
  }, 120_000);
});

describe("x402.settlement events", () => {
  it("writes one event per state a settlement with a transaction enters, its data the status route's answer, to the payee's agent; none for a payment refused unsigned", async () => {
    // Mutation: announcing a claim as it is inserted (an insert trigger, as the actions have)
    // announces the claims a batch refused and deleted; the update trigger without
    // `OR o.tx_id IS NULL` never says `claimed`.
    const node = await originBehindEdge();
    try {
      // The payee is an agent's wallet: a row of agent_identities for it (its key is never used,
      // nor held by the enclave: the row goes once the test is over).
      const [payee] = await queryRows<{ agent_id: string }>(
        stack.db.handle.db,
        sql`insert into agent_identities (assigned_wallet, agent_transfer_key_ref, capabilities, origin)
            values (${payTo}, ${randomBytes(32).toString("hex")}, ${"{read}"}::text[], 'operator')
            on conflict (assigned_wallet) do update set enabled = true returning agent_id::text`,
      );
      const eventsOf = (payer: Address) =>
        queryRows<{ agent_id: string | null; type: string; data: SettlementView }>(
          stack.db.handle.db,
          sql`select agent_id::text, type, data from events
              where type like 'x402.settlement.%' and data->>'payer' = ${payer.toLowerCase()} order by id`,
        );
      const payer = await fundedPayer(stack.devnet.url);
      const payload = await envelope(`${node.edge.url}/77/x402/demo`, payer);
      expect(await post(node.facilitator, "settle", payload)).toMatchObject({ status: 200 });
      const { from, nonce } = authorizationOf(payload);
      const view = (
        await read(`${node.facilitator}/settlements/${from.toLowerCase()}/${nonce.toLowerCase()}`)
      ).body as SettlementView;
      const events = await eventsOf(payer.address);
      const types = events.map((event) => event.type);
      // A chain that mines on arrival may take a settlement from claimed to settled in one write.
      expect([
        ["x402.settlement.claimed", "x402.settlement.settled"],
        ["x402.settlement.claimed", "x402.settlement.submitted", "x402.settlement.settled"],
      ]).toContainEqual(types);
      expect(events.every((event) => event.agent_id === payee!.agent_id)).toBe(true);
      expect(events.at(-1)!.data).toEqual(view);
      expect(events[0]!.data).toMatchObject({
        status: "claimed",
        transaction: view.transaction,
        block_number: null,
      });

      // Refused by the batch's checks (a balance too low): claimed and deleted in one transaction,
      // never announced.
      const poor = await fundedPayer(stack.devnet.url, AMOUNT - 1n);
      const refused = await post(
        node.facilitator,
        "settle",
        await envelope(`${node.edge.url}/77/x402/demo`, poor),
      );
      expect(refused).toMatchObject({ status: 400, body: { errorReason: X402_REASONS.insufficientBalance } });
      expect(await eventsOf(poor.address)).toEqual([]);
    } finally {
      // An identity whose key the enclave does not hold would keep later origins from starting.
      await stack.db.handle.db.execute(sql`delete from agent_identities where assigned_wallet = ${payTo}`);
      await node.close();
    }
  }, 120_000);
});

describe("with AGENT_X402_ENABLED off", () => {
  it("the status routes are 404 like every x402 route", async () => {
    const off = await stack.startOrigin({ AGENT_X402_ENABLED: "false" });
    try {
      const answers = await Promise.all([
        fetch(`${off.base}/x402/facilitator/settlements/${newAccount().address}/0x${"11".repeat(32)}`),
        fetch(`${off.base}/x402/facilitator/settlements/tx/0x${"11".repeat(32)}`),
      ]);
      expect(answers.map((answer) => answer.status)).toEqual([404, 404]);
    } finally {
      await off.close();
    }
  });
});
