/** Types and shared pieces of the route table (operations.ts): one descriptor per endpoint. */
import type * as z from "zod";
import { errorBodySchema } from "../../shared/gateway-schemas.ts";
import type { CapabilityName } from "../capability.ts";

export type HttpMethod = "get" | "post" | "patch" | "delete";
export type SecurityName = "agentToken" | "adminApiToken" | "registrationAdminToken" | "consoleSession";

/** A named schema becomes `#/components/schemas/{name}`. */
export type NamedSchema = { name: string; schema: z.ZodType };

export type ResponseSpec = {
  description: string;
  /** application/json unless `contentType` says otherwise. */
  body?: NamedSchema | { array: NamedSchema } | { oneOf: Array<NamedSchema | { array: NamedSchema }> };
  /** A body that is not JSON (HTML, CSS, the Prometheus text format). */
  contentType?: string;
  /** Any JSON object: a body whose schema lives outside this repository (x402's own shapes). */
  freeForm?: true;
  /**
   * Response headers the answer carries; a `required` one is on every such answer
   * (testing/openapi-check.ts checks real answers for it).
   */
  headers?: Record<string, { description: string; required: boolean }>;
};

export type Operation = {
  method: HttpMethod;
  /** Relative to {base}, OpenAPI style: `/agent/v1/actions/{action_id}`. */
  path: string;
  operationId: string;
  /** The capability that builds the route's handler (compose.ts); it mounts it with route.ts. */
  capability: CapabilityName;
  summary: string;
  tag: "agent" | "registration" | "x402" | "webhooks" | "console" | "operations";
  /** Every listed scheme is required together (an AND); none = public. */
  security: SecurityName[];
  requestBody?: NamedSchema | { oneOf: Array<NamedSchema | { array: NamedSchema }> } | { freeForm: true };
  /** Extra request headers the route requires. */
  headers?: Array<{ name: string; description: string; required: boolean }>;
  /** Query parameters the route reads; `integer` with its bounds, or a string. */
  query?: Array<{
    name: string;
    description: string;
    schema:
      | { type: "integer"; minimum: number; maximum: number }
      | { type: "string"; pattern?: string; enum?: readonly string[] };
  }>;
  responses: Record<number, ResponseSpec>;
};

const error: NamedSchema = { name: "Error", schema: errorBodySchema };
export const errorResponse = (description: string): ResponseSpec => ({ description, body: error });

/** `Retry-After` on a 429: seconds to wait (the body's `retry_after` says the same). */
export const RETRY_AFTER = (required: boolean, description = "seconds to wait before retrying") => ({
  "Retry-After": { description, required },
});
/**
 * The console's 429 (origin/console/admin-auth.ts, origin/console/session.ts): every one names its
 * wait in `Retry-After`, as the gateway's do.
 */
export const adminRateLimited = (description: string): ResponseSpec => ({
  ...errorResponse(description),
  headers: RETRY_AFTER(true),
});
/** An answer that holds a secret shown once (a token) is never stored by a cache on the way. */
export const NO_STORE = { "Cache-Control": { description: "`no-store`", required: true } };

/** The edge answers 502 itself when the origin does not (edge-worker/proxy.ts). */
export const EDGE_502 =
  "upstream_unavailable: the chain did not answer, or the edge could not reach the origin";

/**
 * A route that reads the database while it does not answer (origin/app.ts): nothing was stored,
 * and the answer carries `Retry-After: 1`.
 */
export const DATABASE_503 = errorResponse(
  "service_unavailable: the database did not answer; nothing was stored, ask again shortly (Retry-After)",
);

/** The window of the facilitator's public reads (origin/x402/payee/client-limit.ts). */
export const PUBLIC_READS_429: ResponseSpec = {
  ...errorResponse(
    "rate_limited: AGENT_X402_READS_PER_MINUTE reads of discovery and settlement status from this address (IPv4, IPv6 /64) this minute; `retry_after` in seconds",
  ),
  headers: RETRY_AFTER(true),
};

/** A JSON body over the route's limit, refused before it is read in full. */
export const PAYLOAD_TOO_LARGE = errorResponse("payload_too_large: the body is over this route's limit");

/**
 * What the server answers before any route runs (origin/server.ts answerClientError): request
 * headers over Node's limit. Every operation can get it, so the document adds it to all of them.
 */
export const HEADERS_TOO_LARGE = errorResponse("headers_too_large: the request headers are over 16 KiB");

/**
 * A console or metrics request a browser marks as sent by a page of another origin
 * (origin/http/cross-site.ts), refused before any credential is checked; the document adds it
 * to every route that takes one.
 */
export const CROSS_SITE_REFUSED = errorResponse(
  "cross_site_refused: sent by a page of another origin (Sec-Fetch-Site cross-site or same-site; without it, an Origin not the console's own); not counted as a failed authentication",
);

/**
 * A request whose headers (origin/server.ts) or body (origin/http/read-body.ts) did not arrive in
 * full in time. Every operation can get it, so the document adds it to all of them.
 */
export const REQUEST_TIMEOUT = errorResponse(
  "request_timeout: the request's headers or body did not arrive in full in time; the connection is closed",
);

export const STATUS_TEXT: Record<number, string> = {
  400: "validation_failed: the message names the field to fix",
  409: "idempotency_conflict: the key was used with a different payload",
  422: "insufficient_funds (the amount plus the maximum fee exceeds the balance)",
  503: "service_unavailable: the database does not answer; a retry later is safe",
};
