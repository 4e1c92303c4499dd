import { ERROR_STATUS, type ErrorBody, type ErrorCode } from "../shared/error-codes.ts";

/** `req_` and 16 hex digits, the origin's request-id shape. */
export function newRequestId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return `req_${Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("")}`;
}

/**
 * A refusal made by the edge itself, in the gateway's one envelope (with any fields the code
 * carries, such as `retry_after`), with the status taken from the shared ERROR_STATUS table.
 */
export function errorResponse(
  code: ErrorCode,
  message: string,
  requestId: string,
  headers: Record<string, string> = {},
  fields: Record<string, string | number> = {},
): Response {
  const body: ErrorBody = { error: { ...fields, code, message, request_id: requestId } };
  return new Response(JSON.stringify(body), {
    status: ERROR_STATUS[code],
    headers: { ...headers, "content-type": "application/json", "x-request-id": requestId },
  });
}
