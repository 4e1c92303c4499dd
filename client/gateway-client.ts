import type { CustomTransport } from "viem";
import {
  type ActionView,
  type BalanceResponse,
  isTerminalAction,
  type NetworkResponse,
} from "../shared/gateway-schemas.ts";
import { GatewayError, ServiceUnavailable, SignerUnavailable, ValidationFailed } from "./errors.ts";
import { callJson, type FetchLike, newIdempotencyKey } from "./request.ts";
import { gatewayTransport, rpcCall } from "./viem-transport.ts";
import {
  type AuthorizeX402Params,
  authorizeX402,
  type FetchWithPaymentOptions,
  fetchWithPayment,
  type PaymentRequired,
  type X402Authorization,
} from "./x402.ts";

export type GatewayClientParams = {
  /** The service's base URL, chain segment included: `https://host/77`. */
  baseUrl: string;
  /** The agent's bearer token (`agt_…`). Sent only in the Authorization header. */
  token: string;
  /** Defaults to the global fetch (Node 18+, Workers, browsers). */
  fetch?: FetchLike;
  /** Repeats of a faucet or transfer after no answer or a signer outage, same key (default 2). */
  retries?: number;
};

/** The action, with the idempotency key it was requested under (repeat with it, never a new one). */
export type MoneyActionResult = ActionView & { idempotency_key: string };

export type TransferParams = {
  to: string;
  /** 6-decimal units: 1 USDC = 1_000_000n. */
  amount: bigint | string;
  idempotencyKey?: string;
};

export type WaitForActionParams = {
  /** Default 60 s. */
  timeoutMs?: number;
  /** Default 500 ms. */
  intervalMs?: number;
};

export type GatewayClient = {
  network(): Promise<NetworkResponse>;
  balance(): Promise<BalanceResponse>;
  /** One allowlisted JSON-RPC call; a JSON-RPC error throws RpcError / RpcMethodNotAllowed. */
  rpc<T = unknown>(method: string, params?: readonly unknown[]): Promise<T>;
  faucet(params?: { idempotencyKey?: string }): Promise<MoneyActionResult>;
  transfer(params: TransferParams): Promise<MoneyActionResult>;
  action(actionId: string): Promise<ActionView>;
  /**
   * Polls until the action ends (SPEC: confirmed, failed or reverted; an x402 authorization ends
   * once signed, the payee settles it); throws ServiceUnavailable (`wait_timeout`) past the timeout.
   */
  waitForAction(actionId: string, params?: WaitForActionParams): Promise<ActionView>;
  authorizeX402(quote: PaymentRequired, params?: AuthorizeX402Params): Promise<X402Authorization>;
  fetchWithPayment(
    url: string | URL,
    init?: RequestInit,
    options?: FetchWithPaymentOptions,
  ): Promise<Response>;
  /** A viem transport over /rpc with this client's token. */
  transport(): CustomTransport;
};

/** The agent's client of the gateway (issue 17). Uses only fetch and Web Crypto: runs in Node, Workers, browsers. */
export function createGatewayClient(params: GatewayClientParams): GatewayClient {
  const fetchFn: FetchLike = params.fetch ?? globalThis.fetch.bind(globalThis);
  const deps = { fetch: fetchFn, baseUrl: params.baseUrl, token: params.token };
  const retries = params.retries ?? 2;
  const get = async <T>(path: string): Promise<T> =>
    (await callJson<T>(fetchFn, params.baseUrl, { method: "GET", path, token: params.token })).body;

  // The same key on every attempt: the gateway answers a repeat with the stored action, so a retry
  // after a lost answer or a signer outage can never move money twice.
  const postMoney = async (
    path: string,
    body: Record<string, unknown>,
    key: string,
  ): Promise<MoneyActionResult> => {
    for (let attempt = 0; ; attempt++) {
      try {
        const answer = await callJson<ActionView>(fetchFn, params.baseUrl, {
          method: "POST",
          path,
          token: params.token,
          body: { ...body, idempotency_key: key },
        });
        return { ...answer.body, idempotency_key: key };
      } catch (error) {
        if (attempt >= retries || !retryable(error)) throw error;
        await sleep(250 * 2 ** attempt);
      }
    }
  };

  const action = (actionId: string): Promise<ActionView> =>
    get(`/agent/v1/actions/${encodeURIComponent(actionId)}`);

  return {
    network: () => get("/agent/v1/network"),
    balance: () => get("/agent/v1/balance"),
    rpc: (method, rpcParams) => rpcCall(deps, method, rpcParams),
    faucet: (faucetParams = {}) =>
      postMoney("/agent/v1/faucet", {}, faucetParams.idempotencyKey ?? newIdempotencyKey("faucet")),
    transfer: (transfer) =>
      postMoney(
        "/agent/v1/transfers",
        { to: transfer.to, amount: unitsString(transfer.amount) },
        transfer.idempotencyKey ?? newIdempotencyKey("transfer"),
      ),
    action,
    async waitForAction(actionId, wait = {}) {
      const deadline = Date.now() + (wait.timeoutMs ?? 60_000);
      for (;;) {
        const view = await action(actionId);
        if (isTerminalAction(view)) return view;
        if (Date.now() > deadline) {
          throw new ServiceUnavailable(`action ${actionId} is still ${view.status}`, {
            code: "wait_timeout",
          });
        }
        await sleep(wait.intervalMs ?? 500);
      }
    },
    authorizeX402: (quote, authorize) => authorizeX402(deps, quote, authorize),
    fetchWithPayment: (url, init, options) => fetchWithPayment(deps, url, init, options),
    transport: () => gatewayTransport(deps),
  };
}

/** No answer, a signer outage or a 5xx: nothing or the same thing happened; the same key is safe. */
function retryable(error: unknown): boolean {
  return error instanceof SignerUnavailable || error instanceof ServiceUnavailable;
}

function unitsString(amount: bigint | string): string {
  if (typeof amount === "bigint") {
    if (amount <= 0n) throw new ValidationFailed("amount must be positive", { code: "validation_failed" });
    return amount.toString();
  }
  return amount;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The client's typed error anywhere in a cause chain (viem wraps transport errors). */
export function findGatewayError(error: unknown): GatewayError | undefined {
  for (let current = error, depth = 0; current && depth < 10; depth++) {
    if (current instanceof GatewayError) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
