/**
 * The CLI's requests over node:http and node:https instead of Node's built-in fetch. Node 20 loads
 * fetch's implementation (undici) on its first call, which cost the CLI more than half a second on
 * a busy machine, more than the rest of its start (docs/performance.md, "The agent CLI's start").
 * The client takes any FetchLike; this one gives it the part of a Response it reads: the status,
 * `ok`, `headers.get`, `text()` and `json()` (which reject, as fetch's do, for a body cut off after
 * the headers). Redirects are followed as fetch follows them, the
 * Authorization header dropped on a redirect to another origin. An `init.signal` that aborts ends
 * the request, its body included, and rejects with the signal's reason, as fetch does.
 */
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { FetchLike } from "../client/request.ts";

const MAX_REDIRECTS = 20;

/** The Response of a request, as far as the client and the CLI read one. */
class NodeAnswer {
  readonly ok: boolean;
  readonly headers: { get(name: string): string | null };
  /**
   * `content`: the whole body, or why it stopped coming after the headers (its read rejects with
   * it). Not named `body`: a Response's `body` is a stream, which the client cancels before it
   * presents a pending payment again (client/x402.ts); a Buffer there made that a TypeError, told as
   * "nothing was paid" while the payment settled. This answer is read whole, so it has no stream.
   */
  constructor(
    readonly status: number,
    readonly url: string,
    headers: IncomingHttpHeaders,
    private readonly content: Buffer | Error,
  ) {
    this.ok = status >= 200 && status < 300;
    this.headers = {
      get: (name) => {
        const value = headers[name.toLowerCase()];
        return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
      },
    };
  }
  async text(): Promise<string> {
    if (this.content instanceof Error) throw this.content;
    return this.content.toString("utf8");
  }
  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }
}

export const nodeFetch: FetchLike = async (input, init = {}) => {
  let url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
  let method = (init.method ?? "GET").toUpperCase();
  let body = bodyBytes(init.body);
  const headers = headerRecord(init.headers);
  for (let redirects = 0; ; redirects++) {
    const answer = await send(url, method, headers, body, init.signal ?? undefined);
    const location = answer.headers.get("location");
    // As fetch under `redirect: "manual"` in Node: the redirect itself is the answer.
    if (!location || ![301, 302, 303, 307, 308].includes(answer.status) || init.redirect === "manual") {
      return answer as unknown as Response;
    }
    if (redirects >= MAX_REDIRECTS)
      throw new TypeError(`too many redirects from ${url.origin}${url.pathname}`);
    const next = new URL(location, url);
    // As fetch: the token goes to the origin it was meant for, never on to another one (and,
    // once dropped, not back either).
    if (next.origin !== url.origin) delete headers.authorization;
    url = next;
    // As fetch: a 303, or a 301/302 after a POST, goes on as a GET without the body.
    if (answer.status === 303 || ((answer.status === 301 || answer.status === 302) && method === "POST")) {
      method = "GET";
      body = undefined;
      delete headers["content-type"];
    }
  }
};

function send(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: Buffer | undefined,
  signal: AbortSignal | undefined,
): Promise<NodeAnswer> {
  const request =
    url.protocol === "https:" ? httpsRequest : url.protocol === "http:" ? httpRequest : undefined;
  if (!request) return Promise.reject(new TypeError(`unsupported URL scheme ${url.protocol}`));
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    let answered: IncomingMessage | undefined;
    const outgoing = request(
      url,
      {
        method,
        headers: body === undefined ? headers : { ...headers, "content-length": String(body.byteLength) },
        // One connection per request, closed after it: nothing keeps the process alive at its end.
        agent: false,
      },
      (incoming) => {
        answered = incoming;
        const chunks: Buffer[] = [];
        incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
        // As fetch: once the headers came, the answer is the caller's even if its body is cut off
        // (a paid answer's headers carry its settlement); the body's read is what fails.
        incoming.on("error", (cause) =>
          resolve(new NodeAnswer(incoming.statusCode ?? 0, url.href, incoming.headers, cause)),
        );
        incoming.on("end", () =>
          resolve(
            new NodeAnswer(incoming.statusCode ?? 0, url.href, incoming.headers, Buffer.concat(chunks)),
          ),
        );
      },
    );
    outgoing.on("error", (cause) => reject(new TypeError("fetch failed", { cause })));
    // As fetch: an abort before the headers fails the request with the signal's reason; one after
    // them fails the body's read with it, the status and headers still the caller's (a paid
    // answer's name the settlement).
    const abort = (): void => {
      if (answered) {
        resolve(new NodeAnswer(answered.statusCode ?? 0, url.href, answered.headers, signal?.reason));
      } else {
        reject(signal?.reason);
      }
      outgoing.destroy();
    };
    signal?.addEventListener("abort", abort, { once: true });
    outgoing.on("close", () => signal?.removeEventListener("abort", abort));
    outgoing.end(body);
  });
}

function bodyBytes(body: RequestInit["body"]): Buffer | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (body instanceof Uint8Array) return Buffer.from(body);
  if (body instanceof ArrayBuffer) return Buffer.from(new Uint8Array(body));
  throw new TypeError("the CLI sends bodies as strings or bytes");
}

/**
 * The request's headers as a lowercase record, from any form fetch takes. A Headers object is read
 * through its forEach, without naming the global Headers (naming it loads undici).
 */
function headerRecord(init: RequestInit["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  if (!init) return out;
  if (Array.isArray(init)) {
    for (const pair of init as [string, string][]) out[pair[0].toLowerCase()] = pair[1];
  } else if (typeof (init as { forEach?: unknown }).forEach === "function") {
    (init as { forEach(each: (value: string, name: string) => void): void }).forEach((value, name) => {
      out[name.toLowerCase()] = value;
    });
  } else {
    for (const [name, value] of Object.entries(init as Record<string, string>))
      out[name.toLowerCase()] = value;
  }
  return out;
}
