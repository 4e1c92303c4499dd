/**
 * What the fuzz suite accepts as an answer: no 5xx beyond the ones the spec gives the route, and
 * every refusal in its route's wire format (the gateway's error envelope, x402's own shapes, or JSON-RPC)
 * with its code's status from the one table.
 */
import { decodePaymentResponseHeader } from "@x402/fetch";
import { X402_REASONS } from "../../origin/x402/reasons.ts";
import { ERROR_STATUS } from "../../shared/error-codes.ts";
import type { TestResponse } from "../http.ts";
import type { FuzzRoute } from "./routes.ts";

const isObject = (value: unknown): value is Record<string, unknown> =>
  !!value && typeof value === "object" && !Array.isArray(value);

/** The gateway/registration/console envelope, its code in the table and its status the table's. */
export function envelopeProblem(response: TestResponse): string | null {
  const error = isObject(response.body) ? response.body.error : undefined;
  if (!isObject(error)) return "no {error: {…}} envelope";
  const { code, message, request_id: requestId } = error;
  if (typeof code !== "string" || !(code in ERROR_STATUS)) return `unknown code ${JSON.stringify(code)}`;
  if (typeof message !== "string" || message === "") return "no message";
  if (typeof requestId !== "string" || !requestId.startsWith("req_")) return "no request_id";
  const status = ERROR_STATUS[code as keyof typeof ERROR_STATUS];
  if (status !== response.status)
    return `code ${code} is ${status} in the table, answered ${response.status}`;
  return null;
}

/** One JSON-RPC 2.0 response object: a result or an error {code: integer, message}. */
function jsonRpcProblem(item: unknown): string | null {
  if (!isObject(item) || item.jsonrpc !== "2.0" || !("id" in item)) return "not a JSON-RPC 2.0 response";
  if ("error" in item) {
    const error = item.error;
    if (!isObject(error) || !Number.isInteger(error.code) || typeof error.message !== "string")
      return "a JSON-RPC error without an integer code and a message";
    return null;
  }
  return "result" in item ? null : "neither result nor error";
}

const X402_REASON_SET = new Set<unknown>(Object.values(X402_REASONS));
const PENDING = X402_REASONS.settlementPending;
const SETTLE_UNAVAILABLE = new Set<unknown>([
  X402_REASONS.chainUnavailable,
  X402_REASONS.unexpectedSettleError,
]);

/** A 429 of the x402 surfaces' per-client window: rate_limited, with Retry-After. */
function x402RateLimitProblem(response: TestResponse, reason: unknown): string | null {
  if (reason !== X402_REASONS.rateLimited) return `429 with ${JSON.stringify(reason)}, not rate_limited`;
  return /^\d+$/.test(String(response.headers["retry-after"] ?? "")) ? null : "429 without Retry-After";
}

/**
 * The demo resource: a 402 carries the quote (x402 v2, its requirements) and, when a payment was
 * presented, the reason it was refused; a 200 is the paid answer with its PAYMENT-RESPONSE; a 429
 * (a paid retry past the client's window) the quote with rate_limited.
 */
function x402ResourceProblem(response: TestResponse, paymentPresented: boolean): string | null {
  if (!isObject(response.body)) return "not a JSON object";
  if (response.status === 200)
    return response.body.ok === true && typeof response.headers["payment-response"] === "string"
      ? null
      : "200 without the paid answer and its PAYMENT-RESPONSE";
  if (response.status === 429 && paymentPresented) {
    if (!Array.isArray(response.body.accepts) || response.body.x402Version !== 2)
      return "429 without a quote";
    return x402RateLimitProblem(response, response.body.error);
  }
  if (response.status !== 402) return `${response.status}, not 402`;
  if (!Array.isArray(response.body.accepts) || response.body.x402Version !== 2) return "402 without a quote";
  if (paymentPresented && !X402_REASON_SET.has(response.body.error)) return "402 without a reason";
  return null;
}

/**
 * The status URL of a payment accepted but not yet mined: the demo's 402 or the facilitator's 504
 * `settlement_pending` (docs/x402.md#after-settlement_pending-retry-the-same-payment). Such an answer
 * is no refusal: a settlement is in flight, which the URL must know (run.ts reads it).
 */
export function pendingStatusUrl(route: FuzzRoute, response: TestResponse): string | undefined {
  const body = isObject(response.body) ? response.body : {};
  let answer: unknown;
  if (route.refusal === "x402_settle" && response.status === 504) answer = body;
  else if (route.refusal === "x402_resource" && response.status === 402 && body.error === PENDING) {
    const header = response.headers["payment-response"];
    try {
      answer = typeof header === "string" ? decodePaymentResponseHeader(header) : undefined;
    } catch {
      return undefined;
    }
  }
  if (!isObject(answer) || answer.success !== false || answer.errorReason !== PENDING) return undefined;
  const statusUrl = isObject(answer.extra) ? answer.extra.statusUrl : undefined;
  return typeof statusUrl === "string" ? statusUrl : undefined;
}

/**
 * The facilitator: verify's `{isValid, invalidReason}`, a failure being data with 200 (as the
 * reference one answers), and settle's `{success, errorReason}`, whose 200 is a settlement only (a
 * failure is 400, or 503 for the chain or the signer out of reach, nothing signed, or 504
 * `settlement_pending` with its status URL); a body that is not JSON is a 400 in the same shape, and
 * a client past its window a 429.
 */
function facilitatorProblem(route: FuzzRoute, response: TestResponse): string | null {
  const body = response.body;
  if (!isObject(body)) return "not a JSON object";
  const [flag, reason] =
    route.refusal === "x402_verify" ? ["isValid", "invalidReason"] : ["success", "errorReason"];
  if (response.status === 429)
    return body[flag] === false ? x402RateLimitProblem(response, body[reason]) : `429 with ${flag} not false`;
  if (route.refusal === "x402_settle" && response.status === 503)
    return body.success === false && SETTLE_UNAVAILABLE.has(body.errorReason)
      ? null
      : "503 without success: false and chain_unavailable or unexpected_settle_error";
  if (route.refusal === "x402_settle" && response.status === 504)
    return pendingStatusUrl(route, response) ? null : "504 without settlement_pending and its statusUrl";
  if (response.status !== 200 && response.status !== 400)
    return `${response.status}, not 200, 400, 429${route.refusal === "x402_settle" ? ", 503 or 504" : ""}`;
  if (body[flag] === true) return response.status === 200 ? null : `400 with ${flag}: true`;
  if (route.refusal === "x402_settle" && response.status === 200) return "200 with success: false";
  if (body[flag] !== false) return `no boolean ${flag}`;
  return X402_REASON_SET.has(body[reason]) ? null : `${flag}: false without a known ${reason}`;
}

/** Whether the answer refuses the request: an error status, or a facilitator's failure data. */
export function isRefusal(route: FuzzRoute, response: TestResponse): boolean {
  if (pendingStatusUrl(route, response)) return false;
  if (response.status >= 400) return true;
  const body = isObject(response.body) ? response.body : {};
  if (route.refusal === "x402_verify") return body.isValid !== true;
  if (route.refusal === "x402_settle") return body.success !== true;
  return false;
}

/** Why this answer breaks the properties, or null when it does not. */
export function answerProblem(
  route: FuzzRoute,
  response: TestResponse,
  request: { headers: Record<string, string> } = { headers: {} },
): string | null {
  // The facilitator's settle has 5xx of its own, judged with its shape below.
  if (response.status >= 500 && route.refusal !== "x402_settle") {
    const code =
      isObject(response.body) && isObject(response.body.error) ? response.body.error.code : undefined;
    if (!route.allowed5xx?.includes(code as never))
      return `5xx: ${response.status} ${JSON.stringify(response.body)}`;
  }
  const x402 =
    route.refusal === "x402_resource"
      ? x402ResourceProblem(response, "payment-signature" in request.headers)
      : route.refusal === "x402_verify" || route.refusal === "x402_settle"
        ? facilitatorProblem(route, response)
        : undefined;
  if (x402 !== undefined)
    return x402 && `${x402}: ${response.status} ${JSON.stringify(response.body).slice(0, 300)}`;
  if (response.status < 400) {
    if (route.refusal !== "jsonrpc") return null;
    // Notifications only: JSON-RPC 2.0 answers nothing (docs/api.md#json-rpc-on-agentv1rpc).
    if (response.status === 204) return response.body === "" ? null : "204 with a body";
    if (response.status !== 200) return `${response.status}, not 200 or 204`;
    if (Array.isArray(response.body) && response.body.length === 0) return "an empty array answered";
    const items = Array.isArray(response.body) ? response.body : [response.body];
    for (const item of items) {
      const problem = jsonRpcProblem(item);
      if (problem) return `${problem}: ${JSON.stringify(item).slice(0, 300)}`;
    }
    return null;
  }
  // /rpc: an oversize body is refused 413 in JSON-RPC form; every other refusal is the envelope.
  if (route.refusal === "jsonrpc" && response.status === 413) {
    const problem = jsonRpcProblem(response.body);
    return problem && `413 ${problem}`;
  }
  const problem = envelopeProblem(response);
  return problem && `${problem}: ${response.status} ${JSON.stringify(response.body).slice(0, 300)}`;
}
