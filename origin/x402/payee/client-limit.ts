/**
 * The x402 surfaces' windows (docs/security.md#floods-and-what-they-still-get): the facilitator's verify
 * and settle and the demo's paid retry read the chain and the database, and a settle may sign, for
 * anyone on the network without a token. A shared address (a NAT, a CI runner) may hold an honest
 * payer beside a client sending junk, so the windows count what each request is:
 *  - a request the checks that need neither the chain nor the database refuse (not JSON, not a
 *    payment, terms not ours, outside its window, not signed by its `from`) counts against its
 *    client's address, an IPv4 address or an IPv6 /64 (http/client-ip.ts addressGroup):
 *    AGENT_X402_RATE_LIMIT_PER_MINUTE a minute;
 *  - a well-formed payment its `from` signed (one past its window too, whose settlement is looked
 *    up: facilitator-core.ts checkSigned) counts against that payer,
 *    AGENT_X402_RATE_LIMIT_PER_MINUTE a minute, and against its address's budget for such
 *    payments, AGENT_X402_ADDRESS_PAYMENTS_PER_MINUTE across all its payers (so one address cannot
 *    flood the chain reads with payers it makes up either). The payer's window counts each of its
 *    authorizations once a window: the same one presented again counts against its address alone,
 *    since anyone may present it again (a settled one is in its settlement's calldata, in its
 *    window for up to a minute more), and replays must not fill its payer's window;
 *  - an offer the enclave signs for a quote (one per resource URL, then reused: offer-receipt.ts)
 *    counts against the address asking, AGENT_X402_RATE_LIMIT_PER_MINUTE a minute, so a client
 *    varying the query string cannot have the enclave sign on every unpaid GET; past it, the quote
 *    goes without an offer;
 *  - a read of the facilitator's public routes that query the database (discovery's list and
 *    search, a settlement's status) counts against the address asking,
 *    AGENT_X402_READS_PER_MINUTE a minute, before the database is read.
 * Sliding windows in memory per node (http/rate-limiter.ts), as the gateway's are
 * (docs/api.md#rate-limits). The route answers a refusal with 429 and Retry-After in its own x402
 * shape.
 */

import type { MiddlewareHandler } from "hono";
import { SlidingWindowLimiter } from "../../../shared/rate-limiter.ts";
import { AppError } from "../../errors.ts";
import { addressGroup } from "../../http/client-ip.ts";
import type { AppEnv } from "../../http/env.ts";
import { ignoreRefusal, type RefusalCounter } from "../../http/refusals.ts";

export type X402Limits = {
  /**
   * Counts one request of `clientIp` that the pure checks refused: undefined when it fits (the
   * route answers the reason), else the seconds until one would (the route answers 429).
   */
  refused(clientIp: string): number | undefined;
  /**
   * Counts one well-formed, correctly signed payment of `payer` (its authorization `nonce`) from
   * `clientIp`: undefined when both the payer's window and the address's payment budget have room,
   * else the seconds to wait. An authorization the payer's window counted in the last window
   * seconds is not counted there again, only in the address's budget. Nothing is counted when
   * either refuses.
   */
  payment(clientIp: string, payer: string, nonce: string): number | undefined;
  /**
   * Counts one offer the enclave would sign for a quote `clientIp` asked for (its URL has none
   * held): false past the address's window, and the quote then goes without an offer.
   */
  offerSigning(clientIp: string): boolean;
  /**
   * Counts one read of a public route that queries the database (discovery, settlement status):
   * undefined when it fits, else the seconds until one would (the route answers 429 unread).
   */
  read(clientIp: string): number | undefined;
};

export const CLIENT_WINDOW_SECONDS = 60;

export type CreateX402LimitsParams = {
  /** AGENT_X402_RATE_LIMIT_PER_MINUTE: refused requests per address, payments per payer. */
  perMinute: number;
  /** AGENT_X402_ADDRESS_PAYMENTS_PER_MINUTE: signed payments per address, all payers together. */
  addressPaymentsPerMinute: number;
  /** AGENT_X402_READS_PER_MINUTE: discovery and settlement-status reads per address. */
  readsPerMinute: number;
  refusals?: RefusalCounter;
  now?: () => number;
};

export function createX402Limits(params: CreateX402LimitsParams): X402Limits {
  const window = (limit: number): SlidingWindowLimiter =>
    new SlidingWindowLimiter({ limit, windowSeconds: CLIENT_WINDOW_SECONDS, now: params.now });
  const refusedPerAddress = window(params.perMinute);
  const paymentsPerPayer = window(params.perMinute);
  const paymentsPerAddress = window(params.addressPaymentsPerMinute);
  /** The authorizations the payers' window counted in the window: each once. */
  const countedAuthorizations = window(1);
  const offersPerAddress = window(params.perMinute);
  const readsPerAddress = window(params.readsPerMinute);
  const refused = params.refusals ?? ignoreRefusal;
  return {
    refused(clientIp) {
      const decision = refusedPerAddress.consume(addressGroup(clientIp));
      if (decision.allowed) return undefined;
      refused("x402_client");
      return decision.retryAfterSeconds;
    },
    payment(clientIp, payer, nonce) {
      const address = addressGroup(clientIp);
      const key = payer.toLowerCase();
      const authorization = `${key}:${nonce.toLowerCase()}`;
      // Presented again (a retry, or anyone's replay): the payer's window counted it already.
      const counted = !countedAuthorizations.peek(authorization).allowed;
      if (!counted) {
        const byPayer = paymentsPerPayer.peek(key);
        if (!byPayer.allowed) {
          refused("x402_payer");
          return byPayer.retryAfterSeconds;
        }
      }
      const byAddress = paymentsPerAddress.peek(address);
      if (!byAddress.allowed) {
        refused("x402_client_payments");
        return byAddress.retryAfterSeconds;
      }
      // Both fit: count both (peek then record is one synchronous step, so nothing slips between).
      if (!counted) {
        paymentsPerPayer.record(key);
        countedAuthorizations.record(authorization);
      }
      paymentsPerAddress.record(address);
      return undefined;
    },
    offerSigning(clientIp) {
      if (offersPerAddress.consume(addressGroup(clientIp)).allowed) return true;
      refused("x402_offers");
      return false;
    },
    read(clientIp) {
      const decision = readsPerAddress.consume(addressGroup(clientIp));
      if (decision.allowed) return undefined;
      refused("x402_reads");
      return decision.retryAfterSeconds;
    },
  };
}

/**
 * The window of the public reads in front of their routes: past it, 429 `rate_limited` in the
 * gateway's envelope with Retry-After, before any database read. Every request counts, whatever
 * it is answered.
 */
export function publicReadWindow(limits: X402Limits): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const retryAfter = limits.read(c.get("clientIp"));
    if (retryAfter !== undefined) {
      throw new AppError("rate_limited", "too many reads from this address; retry later", {
        headers: { "Retry-After": String(retryAfter) },
        fields: { retry_after: retryAfter },
      });
    }
    await next();
  };
}
