import { errorMessage } from "../shared/error-message.ts";
/**
 * How the soak's clients reach the stack: through the edge worker, as an agent would, on the
 * worker's own workerd socket (dev/edge.ts `directSocket`), past Miniflare's entry worker
 * and the local edge's Node front. Those two stand in for Cloudflare's front, which runs on
 * Cloudflare's machines, so the soak's memory figure for workerd is the edge worker's own. Every
 * request carries CF-Connecting-IP, as Cloudflare sets it from the client's connection: 127.0.0.1
 * for this machine's clients, or the public address a request comes "from".
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
  /**
   * The URL of `path` at the edge, for clients that bring their own fetch (x402); they send
   * CF-Connecting-IP themselves.
   */
  url(path: string): string;
};

/** Long enough for a transfer under load; a request that takes longer counts as no answer. */
const TIMEOUT_MS = 30_000;

const LOCAL_IP = "127.0.0.1";

export function createEdgeClient(params: { workerUrl: string; basePath: string }): EdgeClient {
  const base = params.workerUrl.replace(/\/$/, "");
  const send = async (path: string, options: RequestOptions, ip: string): Promise<Answer> => {
    const headers: Record<string, string> = { ...options.headers, "cf-connecting-ip": ip };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    if (options.json !== undefined) headers["content-type"] ??= "application/json";
    try {
      const response = await fetch(`${base}${params.basePath}${path}`, {
        method: options.method ?? (options.json === undefined ? "GET" : "POST"),
        headers,
        body: options.json === undefined ? undefined : JSON.stringify(options.json),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      return await answerOf(response);
    } catch (error) {
      return { status: 0, body: errorMessage(error) };
    }
  };
  return {
    request: (path, options = {}) => send(path, options, LOCAL_IP),
    requestFrom: (ip, path, options = {}) => send(path, options, ip),
    url: (path) => `${base}${params.basePath}${path}`,
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
