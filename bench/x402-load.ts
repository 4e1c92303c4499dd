/**
 * Load for bench:x402: payers paying concurrently, each payment timed from its start
 * to its answer, and the ways of paying the bench compares (the official client over HTTP, an
 * agent through our client and the gateway, or a bare settlement straight to the devnet).
 */
import { appendPaymentIdentifierToExtensions, generatePaymentId } from "@x402/extensions/payment-identifier";
import { wrapFetchWithPayment } from "@x402/fetch";
import { type Hex, parseGwei } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { createGatewayClient, type FetchLike } from "../client/index.ts";
import { transferAuthorization, transferWithAuthorizationCalldata } from "../devnet/testing.ts";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";
import { nativeTransferAuthDomain, TRANSFER_WITH_AUTHORIZATION_TYPES } from "../shared/eip712.ts";
import { errorMessage } from "../shared/error-message.ts";
import { quantile } from "../testing/measure/stats.ts";
import { chain77X402Client } from "../testing/x402-official-client.ts";

/** One payment: resolves to null when it went through, else to why it did not. */
export type Pay = () => Promise<string | null>;

export type LoadResult = {
  /** Latencies of the payments that went through, ascending, in ms. */
  latenciesMs: number[];
  failed: number;
  /** The first few distinct failure reasons. */
  reasons: string[];
  elapsedMs: number;
};

export type LoadParams = {
  /** One `Pay` per concurrent payer. */
  payers: Pay[];
  /** Stop starting payments after this long… */
  seconds?: number;
  /** …or after this many payments in all. */
  total?: number;
};

/** Every payer pays back to back until the time or the count runs out. */
export async function runLoad(params: LoadParams): Promise<LoadResult> {
  const latenciesMs: number[] = [];
  const reasons = new Set<string>();
  let failed = 0;
  let started = 0;
  const begin = performance.now();
  const until = params.seconds === undefined ? Number.POSITIVE_INFINITY : begin + params.seconds * 1000;
  const more = (): boolean =>
    performance.now() < until && (params.total === undefined || started < params.total);
  await Promise.all(
    params.payers.map(async (pay) => {
      while (more()) {
        started++;
        const t0 = performance.now();
        const failure = await pay().catch((error: unknown) => errorMessage(error));
        if (failure === null) latenciesMs.push(performance.now() - t0);
        else {
          failed++;
          if (reasons.size < 3) reasons.add(failure.slice(0, 160));
        }
      }
    }),
  );
  latenciesMs.sort((a, b) => a - b);
  return { latenciesMs, failed, reasons: [...reasons], elapsedMs: performance.now() - begin };
}

export type LoadSummary = { p50: number; p99: number; perSecond: number; paid: number; failed: number };

export function summarize(result: LoadResult): LoadSummary {
  return {
    p50: quantile(result.latenciesMs, 0.5),
    p99: quantile(result.latenciesMs, 0.99),
    perSecond: result.latenciesMs.length / (result.elapsedMs / 1000),
    paid: result.latenciesMs.length,
    failed: result.failed,
  };
}

/**
 * A paid GET through the official client (`@x402/fetch` over x402Client with the exact EVM
 * scheme): the unpaid GET, its 402, the signature, the paid retry, up to the 200.
 */
export function fetchPayer(
  url: string,
  account: PrivateKeyAccount,
  headers: Record<string, string> = {},
  options: { paymentIds?: boolean } = {},
): Pay {
  const client = chain77X402Client(account);
  // A new id for each payment, added as the payment-identifier extension's documentation shows.
  if (options.paymentIds) {
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      paymentRequired.extensions ??= {};
      appendPaymentIdentifierToExtensions(paymentRequired.extensions, generatePaymentId());
    });
  }
  const paidFetch = wrapFetchWithPayment(fetch, client);
  return async () => {
    const response = await paidFetch(url, { headers });
    const body = await response.text();
    return response.status === 200
      ? null
      : `${response.status} ${body || response.headers.get("payment-response") || ""}`;
  };
}

/** fetch from one client address: `ip` stands in for Cloudflare's CF-Connecting-IP. */
export function fetchFromIp(ip: string): FetchLike {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set("cf-connecting-ip", ip);
    return fetch(input, { ...init, headers });
  };
}

/**
 * A paid GET by an agent that holds only its token: our client's fetchWithPayment, which asks
 * the gateway's POST /x402/authorize to sign each quote (under the agent's spending policy, if it
 * has one) and presents the payment, from the client address `ip`.
 */
export function agentPayer(params: { url: string; baseUrl: string; token: string; ip: string }): Pay {
  const wallet = createGatewayClient({
    baseUrl: params.baseUrl,
    token: params.token,
    fetch: fetchFromIp(params.ip),
  });
  return async () => {
    // Each call a new purchase: without a key, the gateway would take the same quote again for a
    // retry of the first payment (docs/x402.md#payment-identifiers).
    const response = await wallet.fetchWithPayment(
      params.url,
      {},
      { idempotencyKey: `x402-${crypto.randomUUID()}` },
    );
    const body = await response.text();
    return response.status === 200 ? null : `${response.status} ${body}`;
  };
}

const FEES = { maxFeePerGas: parseGwei("3"), maxPriorityFeePerGas: parseGwei("1"), gas: 120_000n };

/**
 * The chain floor: the payer signs an authorization, a relayer of its own (a local nonce count,
 * no lookups) sends `transferWithAuthorization` straight to the devnet, and the receipt is read.
 * The devnet answers eth_sendRawTransaction once the block is in, so one receipt read follows.
 */
export function bareSettlementPayer(params: {
  devnetUrl: string;
  payer: PrivateKeyAccount;
  relayer: PrivateKeyAccount;
  payTo: Hex;
  amountUnits: bigint;
}): Pay {
  let nonce = 0;
  const call = async (method: string, args: unknown[]): Promise<{ result?: unknown; error?: unknown }> => {
    const response = await fetch(params.devnetUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: args }),
    });
    return (await response.json()) as { result?: unknown; error?: unknown };
  };
  return async () => {
    const authorization = transferAuthorization(params.payer.address, params.payTo, params.amountUnits, {
      validBefore: BigInt(Math.floor(Date.now() / 1000) + 60),
    });
    const signature = await params.payer.signTypedData({
      domain: nativeTransferAuthDomain(),
      types: TRANSFER_WITH_AUTHORIZATION_TYPES,
      primaryType: "TransferWithAuthorization",
      message: authorization,
    });
    const raw = await params.relayer.signTransaction({
      chainId: CHAIN_ID,
      type: "eip1559",
      to: NATIVE_TRANSFER_AUTH_ADDRESS,
      data: transferWithAuthorizationCalldata(authorization, signature),
      nonce: nonce++,
      ...FEES,
    });
    const sent = await call("eth_sendRawTransaction", [raw]);
    if (typeof sent.result !== "string") return `send: ${JSON.stringify(sent.error)}`;
    const receipt = await call("eth_getTransactionReceipt", [sent.result]);
    const status = (receipt.result as { status?: string } | null)?.status;
    return status === "0x1" ? null : `receipt status ${status ?? "missing"}`;
  };
}
