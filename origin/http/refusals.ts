/**
 * The limiters that can refuse a request, as the metrics count them: the gateway's two tiers
 * (docs/api.md#rate-limits), the registration's early local limiter and its persisted admission,
 * the /rpc in-flight caps, the x402 surfaces' windows (refused requests per client address,
 * payments per payer and per client address, offers signed and public reads per client address)
 * and their guard against reverted settlements (and its queue of settles waiting for a slot), and
 * failed operator-console authentication.
 */
export const REFUSAL_TIERS = [
  "pre_auth_ip",
  "per_agent",
  "registration_early",
  "registration_admission",
  "rpc_in_flight",
  "x402_client",
  "x402_payer",
  "x402_client_payments",
  "x402_offers",
  "x402_reads",
  "x402_reverts",
  "x402_in_flight",
  "admin_auth",
] as const;

export type RefusalTier = (typeof REFUSAL_TIERS)[number];

/** Told of each refusal, once, by the part that refused. */
export type RefusalCounter = (tier: RefusalTier) => void;

export const ignoreRefusal: RefusalCounter = () => {};
