/**
 * GET {base}/x402/*: a quote the origin says any caller may be given for a while is given by the
 * edge itself meanwhile (docs/x402.md#the-demo-and-the-facilitator). The origin names such an
 * answer, to the edge only, with X-svc-Quote-Reuse: the seconds the same answer holds for every
 * unpaid GET of the same URL. The demo's unpaid 402 is one: its quote and its signed offer are the
 * same for everyone until the offer is renewed (origin/x402/payee/demo.ts). Every payment begins
 * with that GET, so the edge then sends the origin one request per payment rather than two.
 *
 * Only a GET without PAYMENT-SIGNATURE is answered from what the edge holds, and only a 402 is
 * held, keyed by the whole URL the client requested, which is also the URL the quote names. A paid
 * request always reaches the origin. Kept in the isolate's memory, at most REMEMBERED_QUOTES URLs
 * and a minute each; another isolate asks the origin again.
 */
import { HEADER_QUOTE_REUSE } from "../shared/constants.ts";
import type { EdgeConfig } from "./config.ts";
import { type FetchOrigin, passThrough } from "./proxy.ts";
import { RememberedRefusals } from "./remembered-refusals.ts";

/** URLs held at once: the query string can vary, so an unbounded map would be anyone's to fill. */
export const REMEMBERED_QUOTES = 256;

/** Answer headers a repeat does not copy: its own request id and framing, no stale date. */
const NOT_REPEATED = new Set([
  "x-request-id",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "date",
  HEADER_QUOTE_REUSE,
]);

/** An answer as the origin gave it, less NOT_REPEATED. */
type HeldQuote = { headers: [string, string][]; body: string };

export class EdgeQuotes {
  private readonly held: RememberedRefusals<HeldQuote>;

  constructor(now: () => number = Date.now) {
    this.held = new RememberedRefusals(REMEMBERED_QUOTES, now);
  }

  async handle(
    fetchOrigin: FetchOrigin,
    request: Request,
    config: EdgeConfig,
    requestId: string,
  ): Promise<Response> {
    const unpaid = request.method === "GET" && !request.headers.has("payment-signature");
    const known = unpaid ? this.held.lookup(request.url) : undefined;
    if (known !== undefined) return repeat(known.value, requestId);
    const response = await passThrough(fetchOrigin, request, config, requestId);
    const reuse = response.headers.get(HEADER_QUOTE_REUSE);
    if (reuse === null) return response;
    const headers = new Headers(response.headers);
    headers.delete(HEADER_QUOTE_REUSE);
    const seconds = Number(reuse);
    if (!unpaid || response.status !== 402 || !Number.isSafeInteger(seconds) || seconds <= 0) {
      return new Response(response.body, { status: response.status, headers });
    }
    const body = await response.text();
    const kept = [...headers].filter(([name]) => !NOT_REPEATED.has(name));
    this.held.remember(request.url, seconds, { headers: kept, body });
    return new Response(body, { status: 402, headers });
  }
}

function repeat(quote: HeldQuote, requestId: string): Response {
  const headers = new Headers(quote.headers);
  headers.set("x-request-id", requestId);
  return new Response(quote.body, { status: 402, headers });
}
