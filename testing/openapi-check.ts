/**
 * Checks an HTTP answer against the OpenAPI document (origin/openapi/document.ts): the status must
 * be one the route declares, and a JSON body must match that status's schema. testing/http.ts
 * runs it on every answer its `send` gets, so every integration test checks the document against
 * what the origin really says. `OPENAPI_RESPONSE_CHECK=0` turns it off.
 */

import type { ValidateFunction } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { buildOpenApiDocument, type OpenApiDocument } from "../origin/openapi/document.ts";

export type CheckedAnswer = {
  method: string;
  url: string;
  status: number;
  contentType: string | undefined;
  body: unknown;
  /** The answer's headers, when the caller has them: each the document requires must be there. */
  headers?: Record<string, string | string[] | undefined> | Headers;
};

type Route = { pattern: RegExp; path: string; method: string; responses: Record<string, ResponseObject> };
type ResponseObject = {
  content?: Record<string, { schema: Record<string, unknown> }>;
  headers?: Record<string, { required?: boolean }>;
};

const DOC_ID = "https://agent-wallet.invalid/openapi.json";

export function responseCheckEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.OPENAPI_RESPONSE_CHECK !== "0";
}

export type ResponseChecker = {
  /** Problems with the answer (empty when it conforms, or when its route is not documented). */
  check(answer: CheckedAnswer): string[];
  document: OpenApiDocument;
};

/**
 * Both documents the origin serves (the public one and the console's) as one, so an answer of any
 * route is checked: their schema names are shared, each the same schema in both.
 */
export function everyRouteDocument(basePath = "/77"): OpenApiDocument {
  const open = buildOpenApiDocument(basePath, "public");
  const admin = buildOpenApiDocument(basePath, "admin");
  return {
    ...open,
    paths: { ...open.paths, ...admin.paths },
    components: {
      schemas: { ...open.components.schemas, ...admin.components.schemas },
      securitySchemes: { ...open.components.securitySchemes, ...admin.components.securitySchemes },
    },
  };
}

/** The document's routes, matched under any base path (tests mount the origin at their own). */
export function createResponseChecker(document: OpenApiDocument = everyRouteDocument()): ResponseChecker {
  const ajv = new Ajv2020({ strict: false, allErrors: false });
  addFormats.default(ajv);
  ajv.addSchema({ $id: DOC_ID, components: document.components });
  const routes: Route[] = [];
  for (const [path, methods] of Object.entries(document.paths)) {
    const pattern = new RegExp(`^(?:/[^/]+)*${path.replace(/\{[a-z_]+\}/g, "[^/]+").replace(/\./g, "\\.")}$`);
    for (const [method, operation] of Object.entries(methods)) {
      routes.push({
        pattern,
        path,
        method,
        responses: (operation as { responses: Route["responses"] }).responses,
      });
    }
  }
  // Longest documented path first, so /agent/v1/x402/authorize is not read as a base plus /x402/…
  routes.sort((a, b) => b.path.length - a.path.length);
  const compiled = new Map<string, ValidateFunction>();
  const validator = (key: string, schema: Record<string, unknown>): ValidateFunction => {
    let validate = compiled.get(key);
    if (!validate) {
      const rebased = JSON.parse(
        JSON.stringify(schema).replaceAll('"#/components/', `"${DOC_ID}#/components/`),
      );
      validate = ajv.compile(rebased);
      compiled.set(key, validate);
    }
    return validate;
  };

  return {
    document,
    check(answer) {
      const path = new URL(answer.url).pathname;
      const method = answer.method.toLowerCase();
      const route = routes.find((candidate) => candidate.method === method && candidate.pattern.test(path));
      if (!route) return [];
      const where = `${answer.method.toUpperCase()} ${route.path} → ${answer.status}`;
      const response = route.responses[String(answer.status)];
      if (!response) {
        return [
          `${where}: the document declares no such status (${Object.keys(route.responses).join(", ")})`,
        ];
      }
      const missing = Object.entries(response.headers ?? {})
        .filter(([name, header]) => header.required && answer.headers && !hasHeader(answer.headers, name))
        .map(([name]) => `${where}: no ${name} header, which the document requires`);
      if (missing.length > 0) return missing;
      const mediaType = answer.contentType?.split(";")[0]?.trim().toLowerCase();
      const content = response.content;
      if (!content) return [];
      const declared = Object.keys(content)[0]!;
      if (mediaType !== declared)
        return [`${where}: content type ${mediaType ?? "(none)"}, documented ${declared}`];
      if (declared !== "application/json") return [];
      const validate = validator(`${route.method} ${route.path} ${answer.status}`, content[declared]!.schema);
      if (validate(answer.body)) return [];
      return (validate.errors ?? []).map(
        (error) =>
          `${where}: body ${error.instancePath || "/"} ${error.message} ${JSON.stringify(error.params)}`,
      );
    },
  };
}

function hasHeader(headers: NonNullable<CheckedAnswer["headers"]>, name: string): boolean {
  if (headers instanceof Headers) return headers.has(name);
  return headers[name.toLowerCase()] !== undefined;
}

let shared: ResponseChecker | undefined;
/** One checker per test process: building the document and compiling schemas is not free. */
export function sharedResponseChecker(): ResponseChecker {
  shared ??= createResponseChecker();
  return shared;
}

/** A fetch that checks every answer it gets against the document (for fetch-based clients). */
export function checkingFetch(inner: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const response = await inner(request);
    if (!responseCheckEnabled()) return response;
    const text = await response.clone().text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {}
    const problems = sharedResponseChecker().check({
      method: request.method,
      url: request.url,
      status: response.status,
      contentType: response.headers.get("content-type") ?? undefined,
      body,
      headers: response.headers,
    });
    if (problems.length > 0)
      throw new Error(`the answer does not match the OpenAPI document:\n  ${problems.join("\n  ")}`);
    return response;
  };
}
