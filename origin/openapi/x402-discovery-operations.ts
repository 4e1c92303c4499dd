/** The facilitator's discovery routes' part of the route table (operations.ts; x402/payee/discovery.ts). */
import {
  DATABASE_503,
  EDGE_502,
  errorResponse,
  type Operation,
  PUBLIC_READS_429,
  type ResponseSpec,
} from "./operation-types.ts";

const freeForm = (description: string): ResponseSpec => ({ description, freeForm: true });

/** Filters `withBazaar` of `@x402/extensions` may send; each keeps every entry or none. */
const FILTERS: NonNullable<Operation["query"]> = [
  { name: "type", description: "resource type; every entry is `http`", schema: { type: "string" } },
  {
    name: "payTo",
    description: "payment recipient; every entry pays the node's one",
    schema: { type: "string" },
  },
  { name: "scheme", description: "payment scheme; every entry is `exact`", schema: { type: "string" } },
  { name: "network", description: "payment network; every entry is `eip155:77`", schema: { type: "string" } },
  {
    name: "extensions",
    description: "an extension key the entry must carry; no entry carries one",
    schema: { type: "string" },
  },
];

const LIMIT: NonNullable<Operation["query"]>[number] = {
  name: "limit",
  description: "entries per page, default 20; over 100 is served as 100; 0 or no number is 400",
  schema: { type: "integer", minimum: 1, maximum: 100 },
};

const ERRORS: Record<number, ResponseSpec> = {
  400: errorResponse("validation_failed: a parameter out of its bounds, named in the message"),
  404: errorResponse("not_found / feature_disabled"),
  429: PUBLIC_READS_429,
  500: errorResponse("internal_error"),
  502: errorResponse(EDGE_502),
  503: DATABASE_503,
};

export const X402_DISCOVERY_OPERATIONS: readonly Operation[] = [
  {
    method: "get",
    path: "/x402/facilitator/discovery/resources",
    operationId: "x402DiscoveryResources",
    capability: "x402",
    summary:
      "The discovery catalogue, a page at a time: `{x402Version: 2, items: [{resource, type, x402Version, accepts, lastUpdated, description?, mimeType?}], pagination: {limit, offset, total}}`; the demo first, then the operator's resources and those of settled payments, oldest first.",
    tag: "x402",
    security: [],
    query: [
      ...FILTERS,
      LIMIT,
      {
        name: "offset",
        description: "entries to skip, 0 to 10000",
        schema: { type: "integer", minimum: 0, maximum: 10_000 },
      },
    ],
    responses: { 200: freeForm("a page of the catalogue"), ...ERRORS },
  },
  {
    method: "get",
    path: "/x402/facilitator/discovery/search",
    operationId: "x402DiscoverySearch",
    capability: "x402",
    summary:
      "The catalogue's entries whose URL, description or MIME type holds every word of `query`, case-insensitively: `{x402Version: 2, resources, partialResults, pagination: {limit, cursor}}`.",
    tag: "x402",
    security: [],
    query: [
      {
        name: "query",
        description: "required: up to 8 words, 200 characters, no control characters",
        schema: { type: "string" },
      },
      ...FILTERS,
      LIMIT,
      {
        name: "cursor",
        description: "the `pagination.cursor` of the previous page",
        schema: { type: "string", pattern: "^[0-9]{1,5}$" },
      },
    ],
    responses: { 200: freeForm("the matching entries, a page at a time"), ...ERRORS },
  },
];
