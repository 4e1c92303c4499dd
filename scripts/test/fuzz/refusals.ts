/**
 * What the fuzz suite accepts as an answer: no 5xx beyond the ones the spec gives the route, and
 * every refusal in its route's wire format (STYLE "Errors: three wire formats") with its code's
 * status from the one table.
 */
import { ERROR_STATUS } from "../../../shared/error-codes.ts";
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

/** x402 surfaces: the 402 quote, or an object with a reason (refined when the x402 routes land). */
function x402Problem(response: TestResponse): string | null {
  if (!isObject(response.body)) return "not a JSON object";
  if (response.status === 402)
    return Array.isArray(response.body.accepts) && response.body.x402Version === 2
      ? null
      : "402 without a quote";
  return envelopeProblem(response) === null ||
    "invalidReason" in response.body ||
    "errorReason" in response.body
    ? null
    : "no x402 reason";
}

/** Why this answer breaks the properties, or null when it does not. */
export function answerProblem(route: FuzzRoute, response: TestResponse): string | null {
  if (response.status >= 500) {
    const code =
      isObject(response.body) && isObject(response.body.error) ? response.body.error.code : undefined;
    if (!route.allowed5xx?.includes(code as never))
      return `5xx: ${response.status} ${JSON.stringify(response.body)}`;
  }
  if (response.status < 400) {
    if (route.refusal !== "jsonrpc" || response.status !== 200) return null;
    const items = Array.isArray(response.body) ? response.body : [response.body];
    for (const item of items) {
      const problem = jsonRpcProblem(item);
      if (problem) return `${problem}: ${JSON.stringify(item).slice(0, 300)}`;
    }
    return null;
  }
  if (route.refusal === "x402") {
    const problem = x402Problem(response);
    return problem && `${problem}: ${response.status} ${JSON.stringify(response.body).slice(0, 300)}`;
  }
  // /rpc: an oversize body is refused 413 in JSON-RPC form; every other refusal is the envelope.
  if (route.refusal === "jsonrpc" && response.status === 413) {
    const problem = jsonRpcProblem(response.body);
    return problem && `413 ${problem}`;
  }
  const problem = envelopeProblem(response);
  return problem && `${problem}: ${response.status} ${JSON.stringify(response.body).slice(0, 300)}`;
}
