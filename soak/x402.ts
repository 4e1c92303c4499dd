/**
 * x402 payments in the soak: payers, the kinds that pay `GET {base}/x402/demo` through the edge with
 * the official client (`@x402/fetch` over `@x402/evm`, unchanged), and the check that every
 * payment settled exactly once.
 *
 * A payer is anything that can pay the demo with a wrapped fetch. Today that is a funded viem
 * local account; a token-only agent that authorizes through the gateway and then pays is one more
 * payer maker and one more entry in `x402Kinds`.
 */

import { ExactEvmScheme } from "@x402/evm/exact/client";
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { sql } from "drizzle-orm";
import { type Address, getAddress, type Hex, parseEventLogs } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { payFromOperatorPool } from "../dev/operator-pool.ts";
import { NATIVE_TRANSFER_AUTH_ABI } from "../devnet/index.ts";
import { publicClientFor } from "../devnet/testing.ts";
import { type Db, queryRows } from "../origin/db/client.ts";
import { CAIP2_NETWORK, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../shared/constants.ts";
import { errorMessage } from "../shared/error-message.ts";
import { type Answer, answerOf, type EdgeClient } from "./edge-client.ts";
import type { LimitLine } from "./limits.ts";

export type SoakPayer = {
  /** The address whose money pays (the `from` of its authorizations). */
  address: Address;
  /**
   * The IP address it pays from, as the edge sees it: each payer its own (198.18.0.0/15, RFC
   * 2544's benchmarking range), as separate clients would be, so the origin's per-client x402
   * window (AGENT_X402_RATE_LIMIT_PER_MINUTE) counts each payer alone.
   */
  clientIp: string;
  /** `fetch` that pays a 402 and retries, as the official client does. */
  paidFetch: typeof fetch;
};

/** What the soak saw of its payments. */
export class PaymentObservations {
  /** Settler transactions named by the 200s' PAYMENT-RESPONSE, one per paid answer. */
  readonly paidTransactions: Hex[] = [];
  /** Payments that got no answer (timeout, reset): their settlement may have happened unseen. */
  unanswered = 0;

  record(answer: Answer, transaction: Hex | undefined): void {
    if (answer.status === 200 && transaction) this.paidTransactions.push(transaction);
    if (answer.status === 0) this.unanswered++;
  }
}

/** Each payer's starting money: far more than a run's payments (10000 units each). */
export const PAYER_UNITS = 20_000_000n;

/** `count` fresh viem local accounts, funded from the operator pool, each with its paying fetch. */
export async function makeAccountPayers(params: {
  devnetUrl: string;
  count: number;
  amountUnits: bigint;
}): Promise<SoakPayer[]> {
  const payers: SoakPayer[] = [];
  for (let i = 0; i < params.count; i++) {
    const account = privateKeyToAccount(generatePrivateKey());
    await payFromOperatorPool(params.devnetUrl, account.address, PAYER_UNITS * WEI_PER_UNIT);
    const client = x402Client.fromConfig({
      schemes: [{ network: CAIP2_NETWORK, client: new ExactEvmScheme(account) }],
      spendControls: {
        allowedAssets: [
          {
            network: CAIP2_NETWORK,
            asset: NATIVE_TRANSFER_AUTH_ADDRESS,
            maxAmountPerPayment: params.amountUnits.toString(),
          },
        ],
      },
    });
    payers.push({
      address: account.address,
      clientIp: `198.18.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`,
      paidFetch: wrapFetchWithPayment(fetch, client),
    });
  }
  return payers;
}

/** Long enough for a settlement under load (the demo answers once the receipt is in). */
const PAY_TIMEOUT_MS = 60_000;

/** One paid request for the demo resource by `payer`, through the edge. */
export async function payDemo(
  edge: EdgeClient,
  payer: SoakPayer,
  seen: PaymentObservations,
): Promise<Answer> {
  let answer: Answer;
  let transaction: Hex | undefined;
  try {
    const response = await payer.paidFetch(edge.url("/x402/demo"), {
      headers: { "cf-connecting-ip": payer.clientIp },
      signal: AbortSignal.timeout(PAY_TIMEOUT_MS),
    });
    const header = response.headers.get("PAYMENT-RESPONSE");
    if (header) transaction = decodePaymentResponseHeader(header).transaction as Hex;
    answer = await answerOf(response);
  } catch (error) {
    answer = { status: 0, body: errorMessage(error) };
  }
  seen.record(answer, transaction);
  return answer;
}

/**
 * "Every payment settled once": the settled rows equal the 200s (plus at most the payments that
 * got no answer, which may have settled unseen), each 200 names its own settler transaction, and
 * the chain holds one `AuthorizationUsed` per settled row.
 */
export async function settledOnceLine(params: {
  db: Db;
  devnetUrl: string;
  payers: readonly Address[];
  seen: PaymentObservations;
}): Promise<LimitLine> {
  const { seen } = params;
  const rows = await queryRows<{ status: string; count: string }>(
    params.db,
    sql`select status, count(*)::text as count from x402_settlements group by status order by status`,
  );
  const settled = Number(rows.find((row) => row.status === "settled")?.count ?? 0);
  const logs = await publicClientFor(params.devnetUrl).getLogs({
    address: NATIVE_TRANSFER_AUTH_ADDRESS,
    fromBlock: 0n,
    toBlock: "latest",
  });
  const payers = new Set(params.payers.map((address) => getAddress(address)));
  const used = parseEventLogs({ abi: NATIVE_TRANSFER_AUTH_ABI, eventName: "AuthorizationUsed", logs }).filter(
    (log) => payers.has(getAddress(log.args.authorizer)),
  );
  const usedOnce = new Set(used.map((log) => `${log.args.authorizer}:${log.args.nonce}`)).size;
  const paid = seen.paidTransactions.length;
  const distinct = new Set(seen.paidTransactions).size;
  const rowText = rows.map((row) => `${row.count} ${row.status}`).join(", ") || "none";
  return {
    name: "x402: every payment settled once",
    expected:
      "settlement rows = 200s, one distinct settler transaction per 200, one AuthorizationUsed per payment",
    observed: `${paid} paid (200), ${distinct} distinct transactions; rows: ${rowText}; ${used.length} AuthorizationUsed (${usedOnce} distinct authorizations); ${seen.unanswered} unanswered`,
    held:
      distinct === paid &&
      used.length === usedOnce &&
      used.length === settled &&
      settled >= paid &&
      settled <= paid + seen.unanswered,
    exercised: paid > 0,
  };
}
