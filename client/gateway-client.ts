import type { CustomTransport } from "viem";
import { isTerminalAction } from "../shared/action-status.ts";
import { sleep } from "../shared/sleep.ts";
import {
  ACTION,
  type AnswerShape,
  BALANCE,
  NETWORK,
  POLICY,
  POLICY_CHECK,
  TOKEN_ROTATION,
} from "./answer-shapes.ts";
import {
  errorFromAction,
  GatewayError,
  RateLimited,
  ServiceUnavailable,
  SignerUnavailable,
  ValidationFailed,
} from "./errors.ts";
import { type EventsParams, followEvents } from "./events.ts";
import { callJson, type FetchLike, newIdempotencyKey } from "./request.ts";
import { gatewayTransport, rpcCall } from "./viem-transport.ts";
import type {
  ActionView,
  AgentEvent,
  AgentPolicyDocument,
  BalanceResponse,
  NetworkResponse,
  PolicyCheckResult,
  PolicyResponse,
  TokenRotation,
} from "./wire.ts";
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
  /**
   * Repeats of a faucet or transfer after no answer, a 5xx or a signer outage (SignerUnavailable,
   * ServiceUnavailable), always with the same key (default 2).
   */
  retries?: number;
  /**
   * The time (epoch milliseconds) by which a money call must have answered: a retry whose pause
   * would end later is not made, and the call throws the last error with its key at once. None by
   * default; a caller that is itself given up on (an MCP tool call) sets it.
   */
  retryDeadline?: number;
  /**
   * Once aborted, a money call makes no further attempt and waitForAction no further read: each
   * throws its last error at once. A caller that stops (an MCP host cancelling the tool call) sets
   * it, so that a retry never sends a request the caller gave up on.
   */
  stop?: AbortSignal;
};

/** The action, with the idempotency key it was requested under (repeat with it, never a new one). */
export type MoneyActionResult = ActionView & { idempotency_key: string };

/**
 * A money action the agent's spending policy holds for a person's approval (docs/agents.md#holds):
 * nothing signed, no budget used. `waitForAction` follows it: signed once an operator approves it,
 * PolicyDenied once it is rejected or `expires_at` passes.
 */
export type HeldAction = MoneyActionResult & { status: "held"; rule: string; expires_at: string };

/** Whether a money call's answer is held for approval rather than in flight. */
export function isHeld(action: MoneyActionResult): action is HeldAction {
  return action.status === "held";
}

/**
 * What POST /agent/v1/policy/check asks about: a transfer, or an x402 quote (the 402's body) as
 * authorize would get it.
 */
export type CheckPolicyParams =
  | { transfer: { to: string; amount: bigint | string } }
  | { x402: { paymentRequired: PaymentRequired } };

/**
 * A JSON merge patch of the policy document (RFC 7386: `null` removes a field, lists are
 * replaced); the agent may only tighten.
 */
export type PolicyPatch = {
  [field in keyof AgentPolicyDocument]?: AgentPolicyDocument[field] | null;
};

export type TransferParams = {
  to: string;
  /** 6-decimal units: 1 USDC = 1_000_000n. */
  amount: bigint | string;
  idempotencyKey?: string;
};

export type WaitForActionParams = {
  /** Default 60 s. */
  timeoutMs?: number;
  /**
   * The pause between two reads when the service answers a wait at once with the status unchanged
   * (a service without the action wait); default 500 ms.
   */
  intervalMs?: number;
};

export type ActionParams = {
  /**
   * Hold the request up to this many seconds (whole, 0 to 30) until the action's status changes
   * (GET /actions/{id}?wait=, docs/events.md#waiting-for-an-action); an ended action answers at once.
   */
  waitSeconds?: number;
};

export type GatewayClient = {
  network(): Promise<NetworkResponse>;
  balance(): Promise<BalanceResponse>;
  /** One allowlisted JSON-RPC call; a JSON-RPC error throws RpcError / RpcMethodNotAllowed. */
  rpc<T = unknown>(method: string, params?: readonly unknown[]): Promise<T>;
  /**
   * A faucet payout: resolves with the action only while it is in flight or once confirmed. A
   * refusal throws its class, the same on every repeat of the key; SignerUnavailable or
   * ServiceUnavailable after the built-in retries carries `idempotencyKey`: call again with it.
   */
  faucet(params?: { idempotencyKey?: string }): Promise<MoneyActionResult>;
  /**
   * A transfer; resolves and throws as faucet() does. A transfer the spending policy holds for
   * approval resolves too: the action with `status: "held"`, its `rule` and `expires_at`
   * (isHeld); one it refuses throws PolicyDenied (`rule`, `remaining`).
   */
  transfer(params: TransferParams): Promise<MoneyActionResult>;
  /**
   * Reads an action as it is, whatever its status (waitForAction turns a failure into an error);
   * with `waitSeconds`, once its status changes or the wait ends.
   */
  action(actionId: string, params?: ActionParams): Promise<ActionView>;
  /**
   * Follows the action until it ends, each request held by the service until the status changes
   * (`?wait=`, up to 25 s a request): resolves once `confirmed` (an x402 authorization once signed, the
   * payee settles it); throws the error of its class once `failed` or `reverted` (ActionFailed for
   * a revert, a chain refusal or an abandoned request; the refusal's own class otherwise),
   * PolicyDenied once a held action ends `rejected` or `expired`, and ServiceUnavailable
   * (`wait_timeout`) past the timeout. A read that gets no answer, a 5xx or a 429 is made again
   * (after the Retry-After) until the timeout. A held action waits like any other in flight: pass a
   * timeout up to its `expires_at` to wait for a person's decision.
   */
  waitForAction(actionId: string, params?: WaitForActionParams): Promise<ActionView>;
  /**
   * The agent's own events (GET /agent/v1/events, docs/events.md#from-the-client), each once, in
   * the service's order: `for await (const event of wallet.events({ after }))`. Reconnects after a
   * dropped connection with the last event's id, losing and repeating nothing; throws
   * TooManyStreams when a newer stream of the token took its place, and the error of its class on a
   * 4xx. `signal` ends it; leaving the loop closes the connection.
   */
  events(params?: EventsParams): AsyncIterable<AgentEvent>;
  /** GET /agent/v1/policy: the policy (null: none), its version, and each budget's use and reset. */
  policy(): Promise<PolicyResponse>;
  /**
   * PATCH /agent/v1/policy with a merge patch that may only tighten (lower a figure, remove a payee
   * or an allowed recipient, deny one, freeze); answers as policy(). A loosening throws
   * PolicyLooseningRequiresOperator and changes nothing.
   */
  updatePolicy(patch: PolicyPatch): Promise<PolicyResponse>;
  /**
   * POST /agent/v1/policy/check: what the request would meet now (`allow`, `hold` or `deny`, the
   * `rule` and what is `remaining` under it); signs and reserves nothing.
   */
  checkPolicy(params: CheckPolicyParams): Promise<PolicyCheckResult>;
  /**
   * Throws PolicyHeld when the spending policy holds the payment (`actionId`, `rule`, `expiresAt`):
   * once an operator approves it, the same call with the same idempotency key signs it.
   */
  authorizeX402(quote: PaymentRequired, params?: AuthorizeX402Params): Promise<X402Authorization>;
  /** As fetch, paying a 402 once; a payment the policy holds throws PolicyHeld (nothing was paid). */
  fetchWithPayment(
    url: string | URL,
    init?: RequestInit,
    options?: FetchWithPaymentOptions,
  ): Promise<Response>;
  /** A viem transport over /rpc with this client's token. */
  transport(): CustomTransport;
  /**
   * POST /agent/v1/token/rotate: a new token for the same identity (wallet, capabilities, actions
   * and limits stay), shown once; the old one fails from the next request on. This client uses the
   * new token from then on. Never retried: if the answer is lost, the old token no longer works
   * either, and only the service's operator can issue another. Store `token` before anything else.
   */
  rotateToken(): Promise<TokenRotation>;
};

/**
 * The agent's client of the gateway (docs/agents.md). Uses only fetch and Web Crypto: runs in Node, Workers, browsers.
 */
export function createGatewayClient(params: GatewayClientParams): GatewayClient {
  const fetchFn: FetchLike = params.fetch ?? globalThis.fetch.bind(globalThis);
  // The one holder of the token: rotateToken() replaces it for every later call of this client.
  const deps = { fetch: fetchFn, baseUrl: params.baseUrl, token: params.token };
  const retries = params.retries ?? 2;
  const get = async <T>(path: string, shape: AnswerShape<T>): Promise<T> =>
    (await callJson(fetchFn, params.baseUrl, { method: "GET", path, token: deps.token, shape })).body;
  const send = async <T>(
    method: "POST" | "PATCH",
    path: string,
    body: unknown,
    shape: AnswerShape<T>,
  ): Promise<T> =>
    (await callJson(fetchFn, params.baseUrl, { method, path, token: deps.token, body, shape })).body;

  // The same key on every attempt: the gateway answers a repeat with what the request came to, or
  // runs it again when nothing was signed, so a retry after a lost answer or a signer outage can
  // never move money twice.
  const postMoney = async (
    path: string,
    body: Record<string, unknown>,
    key: string,
  ): Promise<MoneyActionResult> => {
    for (let attempt = 0; ; attempt++) {
      try {
        const answer = await callJson(fetchFn, params.baseUrl, {
          method: "POST",
          path,
          token: deps.token,
          body: { ...body, idempotency_key: key },
          shape: ACTION,
        });
        // A gateway that answers an ended action as a 200 still does not make it a success.
        const failed = errorFromAction(answer.body);
        if (failed) throw failed;
        return { ...answer.body, idempotency_key: key };
      } catch (error) {
        if (error instanceof GatewayError) error.idempotencyKey ??= key;
        if (attempt >= retries || !retryable(error)) throw error;
        // Never sooner than a 503's Retry-After: a retry inside it meets the same outage, and
        // spends the retries while the service says when it will answer again.
        const pause = Math.max(250 * 2 ** attempt, (error.retryAfter ?? 0) * 1000);
        if (pause > MAX_RETRY_PAUSE_MS) throw error;
        if (params.retryDeadline !== undefined && Date.now() + pause >= params.retryDeadline) throw error;
        await sleep(pause, params.stop);
        // Stopped during the pause: the request it would send again was given up on.
        if (params.stop?.aborted) throw error;
      }
    }
  };

  const action = (actionId: string, read: ActionParams = {}): Promise<ActionView> =>
    get(
      `/agent/v1/actions/${encodeURIComponent(actionId)}${read.waitSeconds === undefined ? "" : `?wait=${read.waitSeconds}`}`,
      ACTION,
    );

  return {
    network: () => get("/agent/v1/network", NETWORK),
    balance: () => get("/agent/v1/balance", BALANCE),
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
      let previous: string | undefined;
      let dropped = 0;
      for (;;) {
        // Held by the service until the status changes, never past the caller's deadline.
        const waitSeconds = Math.min(
          Math.max(Math.ceil((deadline - Date.now()) / 1000), 0),
          WAIT_SECONDS_PER_REQUEST,
        );
        const asked = Date.now();
        let view: ActionView;
        try {
          view = await action(actionId, { waitSeconds });
          dropped = 0;
        } catch (error) {
          // A read is safe to repeat: a dropped connection, a 5xx or a 429 is waited out, up to
          // the caller's deadline, instead of ending a wait the action itself has not ended.
          const pause = readRetryPause(error, dropped++);
          if (pause === undefined || Date.now() + pause > deadline) throw error;
          await sleep(pause, params.stop);
          if (params.stop?.aborted) throw error;
          continue;
        }
        const failed = errorFromAction(view);
        if (failed) throw failed;
        if (isTerminalAction(view)) return view;
        if (Date.now() > deadline) {
          throw new ServiceUnavailable(`action ${actionId} is still ${view.status}`, {
            code: "wait_timeout",
          });
        }
        // Answered well before the wait with nothing changed: a service without the action wait
        // (its events off), which answers at once; pause as a poll would, instead of spinning.
        const early = Date.now() - asked < (waitSeconds * 1000) / 2;
        if (early && view.status === previous) await sleep(wait.intervalMs ?? 500);
        previous = view.status;
      }
    },
    events: (eventsParams) => followEvents(deps, eventsParams),
    policy: () => get("/agent/v1/policy", POLICY),
    updatePolicy: (patch) => send("PATCH", "/agent/v1/policy", patch, POLICY),
    checkPolicy: (check) =>
      send(
        "POST",
        "/agent/v1/policy/check",
        "transfer" in check
          ? { transfer: { to: check.transfer.to, amount: unitsString(check.transfer.amount) } }
          : { x402: { payment_required: check.x402.paymentRequired } },
        POLICY_CHECK,
      ),
    authorizeX402: (quote, authorize) => authorizeX402(deps, quote, authorize),
    fetchWithPayment: (url, init, options) => fetchWithPayment(deps, url, init, options),
    transport: () => gatewayTransport(deps),
    async rotateToken() {
      // Sent once, never retried: a lost answer leaves neither token working (docs/agents.md).
      const answer = await callJson(fetchFn, params.baseUrl, {
        method: "POST",
        path: "/agent/v1/token/rotate",
        token: deps.token,
        body: {},
        shape: TOKEN_ROTATION,
      });
      deps.token = answer.body.token;
      return answer.body;
    },
  };
}

/**
 * How long waitForAction asks the service to hold each request (docs/events.md#waiting-for-an-action
 * allows 30): under the 30 s idle limit of common proxies, with room for the answer to travel.
 */
const WAIT_SECONDS_PER_REQUEST = 25;

/** A money call's retry asked to wait longer than this is left to the caller, with its key. */
const MAX_RETRY_PAUSE_MS = 30_000;

/**
 * No answer, a signer outage or a 5xx: nothing was signed, or the answer was lost; the same key
 * runs the request again or answers what it did. Every other error is final for the key.
 */
function retryable(error: unknown): error is SignerUnavailable | ServiceUnavailable {
  return error instanceof SignerUnavailable || error instanceof ServiceUnavailable;
}

/**
 * How long to pause before reading an action again after `error`, the `attempt`th in a row; or
 * undefined when the error is final (a bad token, an unknown action).
 */
function readRetryPause(error: unknown, attempt: number): number | undefined {
  if (error instanceof RateLimited) return Math.max(error.retryAfter ?? 1, 1) * 1000;
  if (error instanceof ServiceUnavailable) {
    return Math.max(Math.min(250 * 2 ** attempt, 5_000), (error.retryAfter ?? 0) * 1000);
  }
  return undefined;
}

function unitsString(amount: bigint | string): string {
  if (typeof amount === "bigint") {
    if (amount <= 0n) throw new ValidationFailed("amount must be positive", { code: "validation_failed" });
    return amount.toString();
  }
  return amount;
}

/** The client's typed error anywhere in a cause chain (viem wraps transport errors). */
export function findGatewayError(error: unknown): GatewayError | undefined {
  for (let current = error, depth = 0; current && depth < 10; depth++) {
    if (current instanceof GatewayError) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
