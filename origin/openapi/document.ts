import * as z from "zod";
import { API_VERSION } from "../../shared/constants.ts";
import { refusesCrossSite } from "../http/cross-site.ts";
import { CROSS_SITE_REFUSED, HEADERS_TOO_LARGE, REQUEST_TIMEOUT } from "./operation-types.ts";
import { type NamedSchema, OPERATIONS, type Operation, type ResponseSpec } from "./operations.ts";

type JsonSchema = Record<string, unknown>;
export type OpenApiDocument = {
  openapi: "3.1.0";
  info: { title: string; version: string; description: string };
  servers: Array<{ url: string }>;
  paths: Record<string, Record<string, unknown>>;
  components: { schemas: Record<string, JsonSchema>; securitySchemes: Record<string, unknown> };
};

const SECURITY_SCHEMES = {
  public: {
    agentToken: {
      type: "http",
      scheme: "bearer",
      description: "The agent's token: `agt_<token_id>_<secret>`.",
    },
  },
  admin: {
    adminApiToken: { type: "apiKey", in: "header", name: "x-admin-api-token" },
    registrationAdminToken: { type: "apiKey", in: "header", name: "x-registration-admin-token" },
    consoleSession: {
      type: "apiKey",
      in: "header",
      name: "x-console-session",
      description:
        "A console session's token, from signing in with an enrolled passkey (POST /admin/agents/session); stands in for both admin tokens.",
    },
  },
};

/**
 * Who a document is for. `public`: what the edge serves, the agent gateway, registration and the
 * x402 surfaces (`{base}/agent/v1/openapi.json`). `admin`: the operator console and the operations
 * routes, which exist on the private origin only, and so does their document
 * (`{base}/admin/openapi.json`): the public one names none of them.
 */
export type OpenApiAudience = "public" | "admin";

const AUDIENCE_TAGS: Record<OpenApiAudience, readonly Operation["tag"][]> = {
  public: ["agent", "registration", "x402", "webhooks"],
  admin: ["console", "operations"],
};

const DESCRIPTIONS: Record<OpenApiAudience, string> = {
  public:
    "Keyless wallet API for autonomous agents on chain 77 (native USDC, 6 decimals) and the x402 payment surfaces. Amounts are 6-decimal units as decimal strings; errors are `{error: {code, message, request_id}}`.",
  admin:
    "The operator console and the operations routes of a node, on its private origin only (the edge answers 404 to all of them). Errors are `{error: {code, message, request_id}}`.",
};

/**
 * The OpenAPI 3.1 document of what the origin mounts under `basePath` for `audience`, generated
 * from the zod schemas the routes parse with (operations.ts): JSON Schema 2020-12, OpenAPI 3.1's
 * dialect. Requests are described as the schema reads them, responses as it writes them.
 */
export function buildOpenApiDocument(basePath: string, audience: OpenApiAudience): OpenApiDocument {
  const schemas: Record<string, JsonSchema> = {};
  // A schema used both ways is registered once per direction when the two forms differ.
  const ref = (named: NamedSchema, io: "input" | "output"): JsonSchema => {
    const converted = toJsonSchema(named.schema, io);
    const existing = schemas[named.name];
    const name =
      existing === undefined || JSON.stringify(existing) === JSON.stringify(converted)
        ? named.name
        : `${named.name}${io === "input" ? "Input" : "Output"}`;
    schemas[name] = converted;
    return { $ref: `#/components/schemas/${name}` };
  };
  const bodySchema = (body: NonNullable<ResponseSpec["body"]>, io: "input" | "output"): JsonSchema => {
    if ("oneOf" in body) return { oneOf: body.oneOf.map((one) => bodySchema(one, io)) };
    if ("array" in body) return { type: "array", items: ref(body.array, io) };
    return ref(body, io);
  };

  const paths: OpenApiDocument["paths"] = {};
  for (const operation of OPERATIONS) {
    if (!AUDIENCE_TAGS[audience].includes(operation.tag)) continue;
    paths[operation.path] ??= {};
    paths[operation.path]![operation.method] = describeOperation(operation, bodySchema);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: audience === "public" ? "Agent wallet service" : "Agent wallet service: operator console",
      version: API_VERSION,
      description: DESCRIPTIONS[audience],
    },
    servers: [{ url: basePath }],
    paths,
    components: { schemas, securitySchemes: SECURITY_SCHEMES[audience] },
  };
}

function describeOperation(
  operation: Operation,
  bodySchema: (body: NonNullable<ResponseSpec["body"]>, io: "input" | "output") => JsonSchema,
): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  const own403 = operation.responses[403];
  const added = {
    408: REQUEST_TIMEOUT,
    431: HEADERS_TOO_LARGE,
    ...(refusesCrossSite(operation.method, operation.path)
      ? {
          403: own403
            ? { ...own403, description: `${own403.description}; or ${CROSS_SITE_REFUSED.description}` }
            : CROSS_SITE_REFUSED,
        }
      : {}),
  };
  for (const [status, spec] of Object.entries({ ...operation.responses, ...added })) {
    const content = spec.contentType
      ? { [spec.contentType]: { schema: { type: "string" } } }
      : spec.freeForm
        ? { "application/json": { schema: { type: "object" } } }
        : spec.body
          ? { "application/json": { schema: bodySchema(spec.body, "output") } }
          : undefined;
    const headers = spec.headers
      ? Object.fromEntries(
          Object.entries(spec.headers).map(([name, header]) => [
            name,
            { description: header.description, required: header.required, schema: { type: "string" } },
          ]),
        )
      : undefined;
    responses[status] = {
      description: spec.description,
      ...(headers ? { headers } : {}),
      ...(content ? { content } : {}),
    };
  }
  const parameters = [
    ...[...operation.path.matchAll(/\{([a-z_]+)\}/g)].map((match) => ({
      name: match[1],
      in: "path",
      required: true,
      schema: { type: "string" },
    })),
    ...(operation.query ?? []).map((parameter) => ({
      name: parameter.name,
      in: "query",
      required: false,
      description: parameter.description,
      schema: parameter.schema,
    })),
    ...(operation.headers ?? []).map((header) => ({
      name: header.name,
      in: "header",
      required: header.required,
      description: header.description,
      schema: { type: "string" },
    })),
  ];
  const request = operation.requestBody;
  return {
    operationId: operation.operationId,
    summary: operation.summary,
    tags: [operation.tag],
    security:
      operation.security.length === 0
        ? []
        : [
            Object.fromEntries(operation.security.map((name) => [name, []])),
            // Every console route under the admin tokens takes a session instead (admin-auth.ts).
            ...(operation.tag === "console" && operation.security.includes("adminApiToken")
              ? [{ consoleSession: [] }]
              : []),
          ],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(request
      ? {
          requestBody: {
            required: true,
            content: {
              "application/json": {
                schema: "freeForm" in request ? { type: "object" } : bodySchema(request, "input"),
              },
            },
          },
        }
      : {}),
    responses,
  };
}

function toJsonSchema(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  // Refinements (an address checksum, an amount's upper bound) have no JSON Schema form: the
  // document keeps their pattern and description, the route still checks them.
  const converted = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
  }) as JsonSchema;
  delete converted.$schema;
  return converted;
}
