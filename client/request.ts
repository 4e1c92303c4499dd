import type { AnswerShape } from "./answer-shapes.ts";
import { AgentAuthFailed, errorFromEnvelope, ServiceUnavailable, UnexpectedAnswer } from "./errors.ts";

export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export type JsonAnswer<T> = { status: number; body: T; headers: Headers };

export type CallParams<T> = {
  /** What a 2xx body must be; one that is not, or is no JSON, is UnexpectedAnswer. */
  shape: AnswerShape<T>;
  method: "GET" | "POST" | "PATCH";
  /** Relative to the base URL, e.g. `/agent/v1/balance`. */
  path: string;
  body?: unknown;
  token?: string;
  headers?: Record<string, string>;
};

/**
 * One JSON call to the service: a 2xx answer of the call's shape is returned parsed, any other
 * 2xx is UnexpectedAnswer; an error envelope becomes its typed error; no answer at all becomes
 * ServiceUnavailable (`gateway_unreachable`) with the cause, no whole answer before the fetch's
 * signal timed out ServiceUnavailable (`gateway_timeout`), and an answer whose body was cut off
 * ServiceUnavailable (`gateway_answer_lost`).
 * The token goes into the Authorization header only, never into a message or an error's cause.
 */
export async function callJson<T>(
  fetchFn: FetchLike,
  baseUrl: string,
  params: CallParams<T>,
): Promise<JsonAnswer<T>> {
  const headers: Record<string, string> = { accept: "application/json", ...params.headers };
  if (params.body !== undefined) headers["content-type"] = "application/json";
  if (params.token !== undefined) headers.authorization = bearerHeader(params.token);
  let response: Response;
  try {
    response = await fetchFn(joinUrl(baseUrl, params.path), {
      method: params.method,
      headers,
      ...(params.body === undefined ? {} : { body: JSON.stringify(params.body) }),
    });
  } catch (cause) {
    if (isTimeout(cause)) {
      // The fetch's signal gave up waiting (the caller's timeout): the request may have reached the
      // service, so a money request is retried with its key as after no answer.
      throw new ServiceUnavailable(
        `no answer from ${params.method} ${whereTo(baseUrl, params.path)} in time (${cause.message})`,
        { code: "gateway_timeout", cause },
      );
    }
    throw new ServiceUnavailable(
      `no answer from ${params.method} ${whereTo(baseUrl, params.path)}${inParentheses(networkErrorCode(cause))}`,
      { code: "gateway_unreachable", cause: withoutSecrets(cause, requestSecrets(baseUrl, params.token)) },
    );
  }
  let text: string;
  try {
    text = await response.text();
  } catch (cause) {
    if (isTimeout(cause)) {
      throw new ServiceUnavailable(
        `the answer of ${params.method} ${whereTo(baseUrl, params.path)} did not come whole in time (status ${response.status}; ${cause.message})`,
        { code: "gateway_timeout", status: response.status, cause },
      );
    }
    // The status and headers came, the body did not (the connection cut in the middle): the
    // request reached the service, so a money request is retried with its key as after no answer.
    throw new ServiceUnavailable(
      `the answer of ${params.method} ${whereTo(baseUrl, params.path)} was cut off after its headers (status ${response.status})${inParentheses(networkErrorCode(cause))}`,
      { code: "gateway_answer_lost", status: response.status, cause },
    );
  }
  let body: unknown;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  // fetch follows a redirect, but never sends the token on to another origin: a gateway there
  // answers 401, which said the token was bad when the base URL is what is wrong (an http:// URL
  // redirected to https://, a gateway that moved).
  const answeredBy = originOf(response.url);
  if (response.status === 401 && answeredBy !== undefined && answeredBy !== originOf(baseUrl)) {
    throw new UnexpectedAnswer(
      `${params.method} ${whereTo(baseUrl, params.path)} was redirected to ${answeredBy}, which is never sent the token (another origin) and answered 401: set the base URL to the gateway's own, on ${answeredBy}`,
      { code: "unexpected_answer", status: response.status },
    );
  }
  if (!response.ok) throw errorFromEnvelope(response.status, body, response.headers.get("retry-after"));
  if (!params.shape.matches(body)) {
    const found =
      body === undefined
        ? `no JSON (${response.headers.get("content-type") ?? "no content type"})`
        : `JSON that is not ${params.shape.description}`;
    throw new UnexpectedAnswer(
      `${params.method} ${whereTo(baseUrl, params.path)} answered ${response.status} with ${found}: not the gateway's answer; is the base URL the gateway's (chain segment included)?`,
      { code: "unexpected_answer", status: response.status },
    );
  }
  return { status: response.status, body, headers: response.headers };
}

/**
 * The Authorization header of `token`, trimmed of the whitespace fetch trims from a header value (a
 * token read from a file or a mounted secret often ends with a line break, which node:http, the
 * CLI's, would refuse). Any other character a header cannot carry (a line break inside, a typeset
 * quote pasted around it) is AgentAuthFailed before anything is sent: fetch refusing it was a
 * network failure, ServiceUnavailable, whose advice (retry) never mends it. The message never
 * quotes the token.
 */
export function bearerHeader(token: string): string {
  const trimmed = token.replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, "");
  if (!/^[\x21-\x7e]+$/.test(trimmed)) {
    throw new AgentAuthFailed(
      "the token holds a character an Authorization header cannot carry (a line break, a space, a typeset quote, …): nothing was sent; check the token given (AGENT_TOKEN)",
      { code: "token_malformed" },
    );
  }
  return `Bearer ${trimmed}`;
}

/**
 * Whether a fetch failed because its signal timed out: fetch rejects with the signal's reason, a
 * DOMException named TimeoutError for AbortSignal.timeout (the CLI's own is named so too).
 */
export function isTimeout(cause: unknown): cause is Error {
  return cause instanceof Error && cause.name === "TimeoutError";
}

export const inParentheses = (code: string | undefined): string => (code === undefined ? "" : ` (${code})`);

/** The request's URL without credentials or query: where it went, for a message. */
function whereTo(baseUrl: string, path: string): string {
  const url = URL.canParse(joinUrl(baseUrl, path)) ? new URL(joinUrl(baseUrl, path)) : undefined;
  return url ? `${url.origin}${url.pathname}` : path;
}

/** A URL's origin (scheme, host and port), or undefined for no URL (a fetch that does not say). */
function originOf(url: string | undefined): string | undefined {
  return url && URL.canParse(url) ? new URL(url).origin : undefined;
}

/** What the request carries that no error may quote: the token, the base URL's user and password. */
function requestSecrets(baseUrl: string, token: string | undefined): string[] {
  const url = URL.canParse(baseUrl) ? new URL(baseUrl) : undefined;
  const secrets = [token, url?.username, url?.password, safeDecode(url?.username), safeDecode(url?.password)];
  return secrets.filter((secret): secret is string => secret !== undefined && secret !== "");
}

function safeDecode(text: string | undefined): string | undefined {
  try {
    return text === undefined ? undefined : decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/**
 * `cause`, unless its chain quotes a secret: fetch refusing an Authorization value quotes the
 * header, and refusing a URL with credentials quotes the URL, and an agent framework prints an
 * error with its cause. Then a stand-in that keeps the network code and says what was withheld.
 */
function withoutSecrets(cause: unknown, secrets: string[]): unknown {
  for (let current = cause, depth = 0; current && depth < 5; depth++) {
    const texts = typeof current === "object" ? Object.values(current) : [current];
    if (current instanceof Error) texts.push(current.message, current.stack);
    if (texts.some((text) => typeof text === "string" && secrets.some((secret) => text.includes(secret)))) {
      const code = networkErrorCode(cause);
      return Object.assign(
        new Error("fetch's error is withheld: it quoted the token or the base URL's credentials"),
        code === undefined ? {} : { code },
      );
    }
    current = (current as { cause?: unknown }).cause;
  }
  return cause;
}

/**
 * ECONNREFUSED, ENOTFOUND, …: the code of a network failure, on the error or along its causes,
 * which tells a wrong port, host or scheme from a service that is down. Only the code: a failure's
 * message may quote the request's headers (fetch refusing an Authorization value quotes the token).
 */
export function networkErrorCode(error: unknown): string | undefined {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && /^[A-Z][A-Z0-9_]*$/.test(code)) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** `http://host/77` + `/agent/v1/x` (a trailing slash on the base is tolerated). */
export function joinUrl(baseUrl: string, path: string): string {
  return `${baseUrl.replace(/\/+$/, "")}${path}`;
}

/** A fresh idempotency key: 128 random bits, printable ASCII (Web Crypto: Workers, browsers, Node). */
export function newIdempotencyKey(prefix = "awc"): string {
  return `${prefix}-${crypto.randomUUID()}`;
}
