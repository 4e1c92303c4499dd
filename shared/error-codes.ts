/**
 * The closed set of gateway, registration and console error codes and their HTTP statuses
 * (docs/api.md, "Error codes"). One table, so a status can never disagree with the documented one.
 */
export const ERROR_STATUS = {
  validation_failed: 400,
  agent_auth_failed: 401,
  /** Operator console: a missing or wrong admin token, whichever (one body, no oracle). */
  admin_auth_failed: 401,
  agent_capability_required: 403,
  /**
   * The token's wallet and the key its identity signs with disagree (key binding):
   * the enclave refused, nothing was signed; an operator must look at the identity.
   */
  agent_key_binding_mismatch: 403,
  cross_site_refused: 403,
  registration_ingress_refused: 403,
  not_found: 404,
  feature_disabled: 404,
  limit_exceeded: 403,
  recipient_not_allowed: 403,
  funding_gate_closed: 403,
  /**
   * The agent's spending policy refuses the request (docs/agents.md#your-spending-policy): the
   * error names the `rule` and what `remaining` under it; nothing is signed or reserved.
   */
  policy_denied: 403,
  /** PATCH /agent/v1/policy that would allow more: only an operator's signature may loosen a policy. */
  policy_loosening_requires_operator: 403,
  /**
   * The request's body did not arrive in full within the server's deadline (or the client left
   * before it had): refused before anything scarce was taken, the connection closed.
   */
  request_timeout: 408,
  idempotency_conflict: 409,
  /**
   * A repeat of a request nobody retried within 10 minutes of its last attempt, before anything
   * was signed (the tracker ended it `failed`): that key's request is over; send a new one.
   */
  abandoned: 409,
  /**
   * x402: a `payment-identifier` id its payer already gave another request (another resource or
   * other terms): nothing was settled (docs/x402.md#payment-identifiers).
   */
  payment_identifier_conflict: 409,
  /** A body over the route's limit, refused before it is read in full. */
  payload_too_large: 413,
  insufficient_funds: 422,
  /**
   * A repeat of a request whose signed transaction did not move the amount: the chain refused it
   * (`broadcast_refused`), or mined it reverted (`reverted`, its fee paid). That key's request is
   * over; the first answer was the in-flight action (202).
   */
  broadcast_refused: 422,
  reverted: 422,
  /** POST /x402/authorize refusals; nothing is signed. */
  x402_amount_not_allowed: 422,
  x402_pay_to_not_allowed: 422,
  x402_requirement_unsupported: 422,
  x402_validity_too_long: 422,
  rate_limited: 429,
  faucet_cooldown: 429,
  faucet_daily_limit: 429,
  /** The agent's x402 authorizations of the UTC day are used up (AGENT_X402_DAILY_LIMIT at the
   * gateway, the enclave's sealed count behind it): nothing is signed. */
  x402_daily_limit: 429,
  registration_rate_limited: 429,
  /**
   * Registration with the proof of work on: the request carried no valid, unspent solution. The
   * answer holds a fresh `challenge` and its `bits`; nothing was counted or created.
   */
  registration_proof_required: 428,
  /** Request headers over Node's limit (16 KiB), refused by the server before any route. */
  headers_too_large: 431,
  internal_error: 500,
  upstream_unavailable: 502,
  agent_key_pool_exhausted: 503,
  agent_key_pool_busy: 503,
  registration_unavailable: 503,
  agent_signer_protocol_unavailable: 503,
  agent_signer_unavailable: 503,
  /**
   * The enclave does not hold the key the database names for this sender (an enclave initialised
   * afresh beside an existing database, keys never restored): nothing was signed, and a retry
   * cannot help until an operator restores the keys from their backups. Final for its key.
   */
  agent_key_unavailable: 503,
  /** The origin's chain node did not answer (or none is configured): a retry later is safe. */
  chain_unavailable: 503,
  service_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** The one error envelope of the gateway, registration and console. */
export type ErrorBody = {
  error: { code: ErrorCode; message: string; request_id: string; [field: string]: string | number };
};
