/**
 * How the soak's clients reach the stack: through the edge, as an agent would. Requests from this
 * machine go through the local edge's front (CF-Connecting-IP set from the connection, 127.0.0.1);
 * requests "from" a public address go to the worker in Miniflare with CF-Connecting-IP set to it,
 * as the Cloudflare edge sets it from the client's connection (Miniflare keeps a given value).
 */
export type Answer = {
  /** HTTP status, or 0 when no answer came (connection refused or reset, timeout). */
  status: number;
  body: unknown;
  /** `error.code` of a gateway error body, when there is one. */
  code?: string;
};

export type RequestOptions = {
  method?: "GET" | "POST";
  token?: string;
  /** Serialised as JSON. */
  json?: unknown;
  headers?: Record<string, string>;
};

export type EdgeClient = {
  /** `path` is below the base path (e.g. `/agent/v1/network`). */
  request(path: string, options?: RequestOptions): Promise<Answer>;
  /** The same, as a client at `ip` seen by the Cloudflare edge. */
  requestFrom(ip: string, path: string, options?: RequestOptions): Promise<Answer>;
  /** The URL of `path` through the edge's front, for clients that bring their own fetch (x402). */
  url(path: string): string;
};

/** Long enough for a transfer under load; a request that takes longer counts as no answer. */
const TIMEOUT_MS = 30_000;

export function createEdgeClient(params: {
  frontUrl: string;
  workerUrl: string;
  basePath: string;
}): EdgeClient {
  const send = async (base: string, path: string, options: RequestOptions, ip?: string): Promise<Answer> => {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    if (options.json !== undefined) headers["content-type"] ??= "application/json";
    if (ip !== undefined) headers["cf-connecting-ip"] = ip;
    try {
      const response = await fetch(`${base}${params.basePath}${path}`, {
        method: options.method ?? (options.json === undefined ? "GET" : "POST"),
        headers,
        body: options.json === undefined ? undefined : JSON.stringify(options.json),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      return await answerOf(response);
    } catch (error) {
      return { status: 0, body: error instanceof Error ? error.message : String(error) };
    }
  };
  return {
    request: (path, options = {}) => send(params.frontUrl, path, options),
    requestFrom: (ip, path, options = {}) => send(params.workerUrl, path, options, ip),
    url: (path) => `${params.frontUrl}${params.basePath}${path}`,
  };
}

/** Reads a response into an answer: the body as JSON when it is JSON, else as text. */
export async function answerOf(response: Response): Promise<Answer> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: kept as text.
  }
  return { status: response.status, body, code: errorCode(body) };
}

function errorCode(body: unknown): string | undefined {
  if (typeof body !== "object" || body === null || !("error" in body)) return undefined;
  const error = (body as { error: unknown }).error;
  if (typeof error === "object" && error !== null && "code" in error) {
    const code = (error as { code: unknown }).code;
    return typeof code === "string" ? code : undefined;
  }
  return undefined;
}
