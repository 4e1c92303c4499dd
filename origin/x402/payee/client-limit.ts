/**
 * The x402 surfaces' windows (docs/security.md#floods-and-what-they-still-get): the facilitator's verify
 * and settle and the demo's paid retry read the chain and the database, and a settle may sign, for
 * anyone on the network without a token. A shared address (a NAT, a CI runner) may hold an honest
 * payer beside a client sending junk, so the windows count what each request is:
 *  - a request the checks that need neither the chain nor the database refuse (not JSON, not a
 *    payment, terms not ours, outside its window, not signed by its `from`) counts against its
 *    client's address, an IPv4 address or an IPv6 /64 (http/client-ip.ts addressGroup):
 *    AGENT_X402_RATE_LIMIT_PER_MINUTE a minute;
 *  - a well-formed payment its `from` signed counts against that payer,
 *    AGENT_X402_RATE_LIMIT_PER_MINUTE a minute, and against its address's budget for such
 *    payments, AGENT_X402_ADDRESS_PAYMENTS_PER_MINUTE across all its payers (so one address cannot
 *    flood the chain reads with payers it makes up either);
 *  - an offer the enclave signs for a quote (one per resource URL, then reused: offer-receipt.ts)
 *    counts against the address asking, AGENT_X402_RATE_LIMIT_PER_MINUTE a minute, so a client
 *    varying the query string cannot have the enclave sign on every unpaid GET; past it, the quote
 *    goes without an offer.
 * Sliding windows in memory per node (http/rate-limiter.ts), as the gateway's are
 * (docs/api.md#rate-limits). The route answers a refusal with 429 and Retry-After in its own x402
 * shape.
 */

import { SlidingWindowLimiter } from "../../../shared/rate-limiter.ts";
import { addressGroup } from "../../http/client-ip.ts";
import { ignoreRefusal, type RefusalCounter } from "../../http/refusals.ts";

export type X402Limits = {
  /**
   * Counts one request of `clientIp` that the pure checks refused: undefined when it fits (the
   * route answers the reason), else the seconds until one would (the route answers 429).
   */
  refused(clientIp: string): number | undefined;
  /**
   * Counts one well-formed, correctly signed payment of `payer` from `clientIp`: undefined when
   * both the payer's window and the address's payment budget have room, else the seconds to wait.
   * Nothing is counted when either refuses.
   */
  payment(clientIp: string, payer: string): number | undefined;
  /**
   * Counts one offer the enclave would sign for a quote `clientIp` asked for (its URL has none
   * held): false past the address's window, and the quote then goes without an offer.
   */
  offerSigning(clientIp: string): boolean;
};

export const CLIENT_WINDOW_SECONDS = 60;

export type CreateX402LimitsParams = {
  /** AGENT_X402_RATE_LIMIT_PER_MINUTE: refused requests per address, payments per payer. */
  perMinute: number;
  /** AGENT_X402_ADDRESS_PAYMENTS_PER_MINUTE: signed payments per address, all payers together. */
  addressPaymentsPerMinute: number;
  refusals?: RefusalCounter;
  now?: () => number;
};

export function createX402Limits(params: CreateX402LimitsParams): X402Limits {
  const window = (limit: number): SlidingWindowLimiter =>
    new SlidingWindowLimiter({ limit, windowSeconds: CLIENT_WINDOW_SECONDS, now: params.now });
  const refusedPerAddress = window(params.perMinute);
  const paymentsPerPayer = window(params.perMinute);
  const paymentsPerAddress = window(params.addressPaymentsPerMinute);
  const offersPerAddress = window(params.perMinute);
  const refused = params.refusals ?? ignoreRefusal;
  return {
    refused(clientIp) {
      const decision = refusedPerAddress.consume(addressGroup(clientIp));
      if (decision.allowed) return undefined;
      refused("x402_client");
      return decision.retryAfterSeconds;
    },
    payment(clientIp, payer) {
      const address = addressGroup(clientIp);
      const key = payer.toLowerCase();
      const byPayer = paymentsPerPayer.peek(key);
      if (!byPayer.allowed) {
        refused("x402_payer");
        return byPayer.retryAfterSeconds;
      }
      const byAddress = paymentsPerAddress.peek(address);
      if (!byAddress.allowed) {
        refused("x402_client_payments");
        return byAddress.retryAfterSeconds;
      }
      // Both fit: count both (peek then record is one synchronous step, so nothing slips between).
      paymentsPerPayer.record(key);
      paymentsPerAddress.record(address);
      return undefined;
    },
    offerSigning(clientIp) {
      if (offersPerAddress.consume(addressGroup(clientIp)).allowed) return true;
      refused("x402_offers");
      return false;
    },
  };
}
