import type { ErrorCode } from "../shared/error-codes.ts";

/**
 * Errors of the gateway client, one class per family of the service's error codes (docs/api.md,
 * "Errors"), all under GatewayError. `code` is the service's wire code; `exitCode` is what the
 * agent CLI exits with for the family (printed by `agent-wallet --help`).
 */

export type GatewayErrorDetails = {
  /** The service's code (`agent_auth_failed`, …) or the client's own (`gateway_unreachable`, …). */
  code: string;
  /** HTTP status, when there was an answer. */
  status?: number;
  requestId?: string;
  /** The whole `error` object of the envelope (extra fields such as `retry_after`, `reason`). */
  body?: Record<string, unknown>;
  /** The idempotency key of the money request this error answers. */
  idempotencyKey?: string;
  /** Seconds to wait before a repeat: a 429's `retry_after` or Retry-After, a 503's Retry-After. */
  retryAfter?: number;
  cause?: unknown;
};

export class GatewayError extends Error {
  static readonly exitCode: number = 1;
  static readonly family: string = "any other error";
  readonly code: string;
  readonly status: number | undefined;
  readonly requestId: string | undefined;
  readonly body: Record<string, unknown>;
  /**
   * The idempotency key of the money request (faucet, transfer) this error answers, set by the
   * client that sent it. SignerUnavailable and ServiceUnavailable: repeat the request with it (the
   * gateway runs it again, or answers what it did: never a second payment). A refusal that names
   * an `action_id` in its body (a limit, the funds, the funding gate, a cooldown, ActionFailed) is
   * final for the key: a repeat answers the same refusal; a new request needs a new key. Errors
   * without one (a bad token or argument, too many requests) recorded nothing under the key.
   */
  idempotencyKey: string | undefined;
  /**
   * The seconds the service asked to wait before a repeat: RateLimited's, and a 503's Retry-After
   * (the origin's database unavailable answers 1). The client's own retries wait at least this.
   */
  readonly retryAfter: number | undefined;

  constructor(message: string, details: GatewayErrorDetails) {
    super(message, { cause: details.cause });
    this.name = new.target.name;
    this.code = details.code;
    this.status = details.status;
    this.requestId = details.requestId;
    this.body = details.body ?? {};
    this.idempotencyKey = details.idempotencyKey;
    this.retryAfter = details.retryAfter;
  }

  get exitCode(): number {
    return (this.constructor as typeof GatewayError).exitCode;
  }
}

export class AgentAuthFailed extends GatewayError {
  static override readonly exitCode = 3;
  static override readonly family =
    "agent_auth_failed, admin_auth_failed: bad or revoked token; token_malformed: a token no header can carry (nothing sent)";
}
export class CapabilityRequired extends GatewayError {
  static override readonly exitCode = 4;
  static override readonly family = "agent_capability_required";
}
/** 429s; `retryAfter` in seconds (the `retry_after` field or the Retry-After header). */
export class RateLimited extends GatewayError {
  static override readonly exitCode = 5;
  static override readonly family =
    "rate_limited, faucet_cooldown, faucet_daily_limit, x402_daily_limit, registration_rate_limited";
}
/** The request as sent is refused (its fields, or its body or headers over the service's limits). */
export class ValidationFailed extends GatewayError {
  static override readonly exitCode = 6;
  static override readonly family =
    "validation_failed, payload_too_large, headers_too_large (and bad CLI input)";
}
export class IdempotencyConflict extends GatewayError {
  static override readonly exitCode = 7;
  static override readonly family = "idempotency_conflict";
}
export class FeatureDisabled extends GatewayError {
  static override readonly exitCode = 8;
  static override readonly family = "feature_disabled";
}
export class NotFound extends GatewayError {
  static override readonly exitCode = 9;
  static override readonly family = "not_found (also: the gateway switch is off)";
}
/** `limit` is `per_transaction` or `daily`; units are 6-decimal. */
export class LimitExceeded extends GatewayError {
  static override readonly exitCode = 10;
  static override readonly family = "limit_exceeded";
  get limit(): string | undefined {
    return stringField(this.body, "limit");
  }
  get remainingUnits(): bigint | undefined {
    return bigintField(this.body, "remaining_units");
  }
}
export class RecipientNotAllowed extends GatewayError {
  static override readonly exitCode = 11;
  static override readonly family = "recipient_not_allowed";
}
/**
 * The wallet cannot pay the amount plus the maximum fee (pending transfers included). The figures
 * are in 6-decimal units like the request's `amount`: what it needs (rounded up, as the limits
 * count the fee) and what it has (rounded down); the exact wei figures are in `body`.
 */
export class InsufficientFunds extends GatewayError {
  static override readonly exitCode = 12;
  static override readonly family = "insufficient_funds";
  get neededUnits(): bigint | undefined {
    return bigintField(this.body, "needed_units");
  }
  get availableUnits(): bigint | undefined {
    return bigintField(this.body, "available_units");
  }
}
export class FundingGateClosed extends GatewayError {
  static override readonly exitCode = 13;
  static override readonly family = "funding_gate_closed";
  get reason(): string | undefined {
    return stringField(this.body, "reason");
  }
}
/**
 * The signer could not sign now (unreachable, or unable for the service's own reasons): nothing
 * was signed. Retry with the same idempotency key (`idempotencyKey`): the gateway runs the request
 * again, so once the signer is back it goes through, once. A request not retried within 10
 * minutes is abandoned (then ActionFailed `abandoned`: send a new key).
 */
export class SignerUnavailable extends GatewayError {
  static override readonly exitCode = 14;
  static override readonly family =
    "agent_signer_unavailable, agent_signer_protocol_unavailable: nothing was signed; retry with the same key";
}
export class RegistrationUnavailable extends GatewayError {
  static override readonly exitCode = 15;
  static override readonly family =
    "registration_unavailable, registration_ingress_refused, registration_proof_required, cross_site_refused, agent_key_pool_exhausted, agent_key_pool_busy";
  get reason(): string | undefined {
    return stringField(this.body, "reason");
  }
}
/**
 * An x402 authorization refused (`x402_*`), a payment the resource did not accept, or a 402 whose
 * quote cannot be read (`quote_unreadable`): nothing to retry, the resource answers the same.
 */
export class PaymentRefused extends GatewayError {
  static override readonly exitCode = 16;
  static override readonly family =
    "x402_* refusals, payment_identifier_conflict, a paid request answered 402 for the payment's own checks, a 402 without a readable quote (quote_unreadable)";
}
/**
 * A paid request whose answer was lost: the payment may have settled. Repeat the call with the
 * same `idempotencyKey`: it presents the same authorization, so it can never pay twice.
 */
export class PaymentOutcomeUnknown extends GatewayError {
  static override readonly exitCode = 17;
  static override readonly family = "payment sent, answer lost: repeat with the same idempotency key";
  declare idempotencyKey: string;
  constructor(message: string, details: GatewayErrorDetails & { idempotencyKey: string }) {
    super(message, details);
  }
}
/** A JSON-RPC error from /rpc; `rpcCode` is the JSON-RPC error code. */
export class RpcError extends GatewayError {
  static override readonly exitCode = 18;
  static override readonly family = "JSON-RPC errors from /rpc";
  readonly rpcCode: number;
  readonly data: unknown;
  constructor(message: string, details: GatewayErrorDetails & { rpcCode: number; data?: unknown }) {
    super(message, details);
    this.rpcCode = details.rpcCode;
    this.data = details.data;
  }
}
/** -32601: the method is not on the gateway's read allowlist (`allowedMethods`). */
export class RpcMethodNotAllowed extends RpcError {
  get allowedMethods(): string[] {
    const data = this.data as { allowed_methods?: unknown } | undefined;
    return Array.isArray(data?.allowed_methods) ? data.allowed_methods.map(String) : [];
  }
}
/**
 * No answer (network) or none in time (`gateway_timeout`: the caller's timeout, the CLI's
 * --timeout), the service failed (5xx: internal_error, upstream_unavailable,
 * chain_unavailable, …), or the request did not reach it in full in time (408 request_timeout:
 * nothing was done). A money request: retry with the same idempotency key, which answers what the
 * first attempt did or runs it again, never a second payment.
 */
export class ServiceUnavailable extends GatewayError {
  static override readonly exitCode = 19;
  static override readonly family =
    "no answer (gateway_unreachable) or none in time (gateway_timeout), internal_error, upstream_unavailable, chain_unavailable, service_unavailable, request_timeout, a 5xx, 408 or 429 without an error envelope";
}
/**
 * A faucet payout or transfer that ended without moving its amount, after it was accepted: the
 * chain refused the signed transaction (`broadcast_refused`), mined it reverted (`reverted`, its
 * fee paid), or it was not retried in time after the signer or the chain could not be used
 * (`abandoned`, nothing signed). Final for its idempotency key: a repeat answers the same; a new
 * request needs a new key. `actionId` names the action.
 */
export class ActionFailed extends GatewayError {
  static override readonly exitCode = 20;
  static override readonly family =
    "reverted, broadcast_refused, abandoned: the action ended without moving its amount (a new request needs a new key)";
  get actionId(): string | undefined {
    return stringField(this.body, "action_id");
  }
}
/**
 * The token's wallet and the key its identity signs with disagree: the signer refused, nothing was
 * signed, and no retry helps; the service's operator must look at the identity.
 */
export class KeyBindingMismatch extends GatewayError {
  static override readonly exitCode = 21;
  static override readonly family = "agent_key_binding_mismatch: ask the operator to look at the identity";
}

/**
 * The signer does not hold the key of the wallet (or of the faucet treasury): the service's enclave
 * lost its keys and they have not been restored yet. Nothing was signed; final for its key, and no
 * retry helps until the operator has restored the keys. Not a SignerUnavailable: that one is retried.
 */
export class KeyUnavailable extends GatewayError {
  static override readonly exitCode = 22;
  static override readonly family =
    "agent_key_unavailable: the signer lacks the wallet's key; ask the operator to restore it (no retry helps)";
}

/**
 * The agent's spending policy refuses the request (docs/agents.md#your-spending-policy): `rule`
 * names the rule (`transfers.daily_units`, `x402.payees[0x…].per_payment_units`, `frozen`, …) and
 * `remaining` what is left under it. Nothing was signed or reserved; final for the key.
 */
export class PolicyDenied extends GatewayError {
  static override readonly exitCode = 23;
  static override readonly family =
    "policy_denied: the agent's spending policy refuses it (see rule, remaining)";
  get rule(): string | undefined {
    return stringField(this.body, "rule");
  }
  get remaining(): string | undefined {
    return stringField(this.body, "remaining");
  }
}

/** PATCH of the agent's own policy that would allow more: only an operator can loosen a policy. */
export class PolicyLooseningRequiresOperator extends GatewayError {
  static override readonly exitCode = 24;
  static override readonly family =
    "policy_loosening_requires_operator: an agent may only tighten its policy; ask the operator";
}

/**
 * The agent's spending policy holds the request for a person's approval
 * (docs/agents.md#holds): nothing was signed and no budget used. A transfer held is a result (the
 * action, `status: "held"`), not this error; this is what an x402 payment held throws
 * (authorizeX402, fetchWithPayment), since there is no payment to present. Once an operator has
 * approved the action, the same call with the same `idempotencyKey` signs it, once; after a
 * rejection or the hold's expiry that key answers PolicyDenied. The CLI exits with this code for
 * every hold: a transfer held, a payment held, a check answering `hold`.
 */
export class PolicyHeld extends GatewayError {
  static override readonly exitCode = 25;
  static override readonly family =
    "held: the spending policy holds it for an operator's approval (a transfer or payment held, a check answering hold); nothing signed";
  get actionId(): string | undefined {
    return stringField(this.body, "action_id");
  }
  get rule(): string | undefined {
    return stringField(this.body, "rule");
  }
  /** When the hold ends `expired` unless an operator approves or rejects it first (ISO 8601). */
  get expiresAt(): string | undefined {
    return stringField(this.body, "expires_at");
  }
}

/**
 * The service closed the agent's event stream because the token opened more streams than it may
 * hold at once (docs/events.md#limits): a newer stream of the same token took its place. Not
 * reconnected, since that would close the newer one in turn; `events()` ends with it.
 */
export class TooManyStreams extends GatewayError {
  static override readonly exitCode = 26;
  static override readonly family =
    "too_many_streams: another event stream of this token took this one's place (a token holds 4 by default)";
}

/**
 * An answer that is not the gateway's: a success whose body is not JSON or lacks the fields the
 * call answers with (a proxy's or a captive portal's page, another service at the base URL), or a
 * refusal without the error envelope. Repeating the call as it is meets the same answer: check the
 * base URL. A money request may have reached the service: once the gateway answers, the same
 * idempotency key answers what it came to, never a second payment.
 */
export class UnexpectedAnswer extends GatewayError {
  static override readonly exitCode = 27;
  static override readonly family =
    "unexpected_answer: not the gateway's answer (a page, JSON without the fields, a refusal without its envelope): check the base URL; retrying as is meets the same";
}

/**
 * The classes the CLI documents, in exit-code order, by the names the source gives them: a bundler
 * renames a class whose name another bundled module's class takes (viem's RpcError made this one
 * `RpcError2` in the CLI's, the MCP server's and the package's bundles, and in any bundle an
 * agent's own build makes of the package), but never an object's keys.
 */
const DOCUMENTED_CLASSES = {
  GatewayError,
  AgentAuthFailed,
  CapabilityRequired,
  RateLimited,
  ValidationFailed,
  IdempotencyConflict,
  FeatureDisabled,
  NotFound,
  LimitExceeded,
  RecipientNotAllowed,
  InsufficientFunds,
  FundingGateClosed,
  SignerUnavailable,
  RegistrationUnavailable,
  PaymentRefused,
  PaymentOutcomeUnknown,
  RpcError,
  ServiceUnavailable,
  ActionFailed,
  KeyBindingMismatch,
  KeyUnavailable,
  PolicyDenied,
  PolicyLooseningRequiresOperator,
  PolicyHeld,
  TooManyStreams,
  UnexpectedAnswer,
} as const;

/** The classes the CLI documents, in exit-code order. */
export const ERROR_CLASSES = Object.values(DOCUMENTED_CLASSES);

// Each class's `name`, and so each error's (GatewayError's constructor copies it), as the source
// calls it.
for (const [name, errorClass] of Object.entries({ ...DOCUMENTED_CLASSES, RpcMethodNotAllowed })) {
  Object.defineProperty(errorClass, "name", { value: name });
}

type ErrorClass = new (message: string, details: GatewayErrorDetails) => GatewayError;

/**
 * The class of each of the service's codes. Typed over every code of ERROR_STATUS, so a code the
 * service adds without a class here fails the typecheck.
 */
const BY_CODE: { readonly [code in ErrorCode]: ErrorClass } = {
  agent_auth_failed: AgentAuthFailed,
  admin_auth_failed: AgentAuthFailed,
  agent_capability_required: CapabilityRequired,
  validation_failed: ValidationFailed,
  payload_too_large: ValidationFailed,
  headers_too_large: ValidationFailed,
  idempotency_conflict: IdempotencyConflict,
  feature_disabled: FeatureDisabled,
  not_found: NotFound,
  limit_exceeded: LimitExceeded,
  recipient_not_allowed: RecipientNotAllowed,
  policy_denied: PolicyDenied,
  policy_loosening_requires_operator: PolicyLooseningRequiresOperator,
  insufficient_funds: InsufficientFunds,
  funding_gate_closed: FundingGateClosed,
  agent_key_binding_mismatch: KeyBindingMismatch,
  agent_key_unavailable: KeyUnavailable,
  agent_signer_unavailable: SignerUnavailable,
  agent_signer_protocol_unavailable: SignerUnavailable,
  registration_unavailable: RegistrationUnavailable,
  registration_ingress_refused: RegistrationUnavailable,
  // register() solves the challenge itself; this surfaces only when it gives up.
  registration_proof_required: RegistrationUnavailable,
  cross_site_refused: RegistrationUnavailable,
  agent_key_pool_exhausted: RegistrationUnavailable,
  agent_key_pool_busy: RegistrationUnavailable,
  internal_error: ServiceUnavailable,
  upstream_unavailable: ServiceUnavailable,
  chain_unavailable: ServiceUnavailable,
  service_unavailable: ServiceUnavailable,
  request_timeout: ServiceUnavailable,
  reverted: ActionFailed,
  broadcast_refused: ActionFailed,
  abandoned: ActionFailed,
  rate_limited: RateLimited,
  faucet_cooldown: RateLimited,
  faucet_daily_limit: RateLimited,
  x402_daily_limit: RateLimited,
  registration_rate_limited: RateLimited,
  x402_amount_not_allowed: PaymentRefused,
  x402_pay_to_not_allowed: PaymentRefused,
  x402_requirement_unsupported: PaymentRefused,
  x402_validity_too_long: PaymentRefused,
  payment_identifier_conflict: PaymentRefused,
};

/** The class of a code the service sent, undefined for a code this client does not know. */
function classOf(code: string): ErrorClass | undefined {
  return Object.hasOwn(BY_CODE, code) ? BY_CODE[code as ErrorCode] : undefined;
}

const RATE_LIMITED: ReadonlySet<string> = new Set(
  Object.entries(BY_CODE)
    .filter(([, errorClass]) => errorClass === RateLimited)
    .map(([code]) => code),
);

/** The error of a JSON-RPC 2.0 answer `{jsonrpc: "2.0", id, error: {code, message, data?}}`, if it is one. */
function jsonRpcError(answer: unknown): { code: number; message: string; data?: unknown } | undefined {
  const { jsonrpc, error } = (answer ?? {}) as { jsonrpc?: unknown; error?: unknown };
  if (jsonrpc !== "2.0" || typeof error !== "object" || error === null) return undefined;
  const { code, message, data } = error as { code?: unknown; message?: unknown; data?: unknown };
  if (typeof code !== "number" || typeof message !== "string") return undefined;
  return { code, message, data };
}

/** The typed error for an error envelope `{error: {code, message, request_id, …}}`. */
export function errorFromEnvelope(
  status: number,
  envelope: unknown,
  retryAfterHeader: string | null,
): GatewayError {
  const error = (envelope as { error?: unknown } | null)?.error;
  const rpc = jsonRpcError(envelope);
  const fromHeader =
    retryAfterHeader !== null && /^\d+$/.test(retryAfterHeader) ? Number(retryAfterHeader) : undefined;
  // /rpc answers a body over its limit in JSON-RPC's form, with HTTP 413 (docs/api.md): its error,
  // never an outage to retry.
  if (rpc) return new RpcError(rpc.message, { code: "rpc_error", status, rpcCode: rpc.code, data: rpc.data });
  if (typeof error !== "object" || error === null || typeof (error as { code?: unknown }).code !== "string") {
    // A 5xx, 408 or 429 page of a proxy on the way is still an outage or a "not now": repeated
    // later, the request goes through. Any other refusal in another form is not the gateway's.
    const passing = status >= 500 || status === 408 || status === 429;
    return passing
      ? new ServiceUnavailable(`the service answered ${status} without an error envelope`, {
          code: "error_without_envelope",
          status,
          retryAfter: fromHeader,
        })
      : new UnexpectedAnswer(
          `the service answered ${status} without an error envelope: is the base URL the gateway's (chain segment included)?`,
          { code: "unexpected_answer", status },
        );
  }
  const body = error as Record<string, unknown>;
  const code = body.code as string;
  const message = typeof body.message === "string" ? body.message : code;
  const details: GatewayErrorDetails = {
    code,
    status,
    requestId: typeof body.request_id === "string" ? body.request_id : undefined,
    body,
    retryAfter: fromHeader,
  };
  if (RATE_LIMITED.has(code) || status === 429) {
    const fromBody = typeof body.retry_after === "number" ? body.retry_after : undefined;
    return new RateLimited(message, { ...details, retryAfter: fromBody ?? fromHeader });
  }
  if (code.startsWith("x402_")) return new PaymentRefused(message, details);
  const known = classOf(code);
  if (known) return new known(message, details);
  return status >= 500 ? new ServiceUnavailable(message, details) : new GatewayError(message, details);
}

/**
 * The error of an action that ended `failed` or `reverted`, as GET /actions/{id} shows it: the
 * class of its `error_code` (the same class the request's own refusal had), with the action's
 * fields as its body; PolicyDenied naming the hold's rule for a held action that ended `rejected`
 * or `expired`. Undefined for any other status.
 */
export function errorFromAction(action: {
  action_id: string;
  status: string;
  error_code: string | null;
  tx_hash?: string | null;
  rule?: string | null;
}): GatewayError | undefined {
  if (action.status === "rejected" || action.status === "expired") {
    // A hold an operator rejected or nobody approved in time: never signed, final for its key, and
    // refused by the rule that held it (docs/agents.md#holds).
    const message = `action ${action.action_id} was held and ended ${action.status}: nothing was signed`;
    const body: Record<string, unknown> = {
      code: "policy_denied",
      message,
      action_id: action.action_id,
      action_status: action.status,
      ...(action.rule ? { rule: action.rule } : {}),
      remaining: "0",
    };
    return new PolicyDenied(message, { code: "policy_denied", body });
  }
  if (action.status !== "failed" && action.status !== "reverted") return undefined;
  const code = action.error_code ?? action.status;
  const body: Record<string, unknown> = {
    code,
    message: `action ${action.action_id} ended ${action.status} (${code})`,
    action_id: action.action_id,
    action_status: action.status,
    ...(action.tx_hash ? { tx_hash: action.tx_hash } : {}),
  };
  const details: GatewayErrorDetails = { code, body };
  const message = body.message as string;
  if (RATE_LIMITED.has(code)) return new RateLimited(message, details);
  if (code.startsWith("x402_")) return new PaymentRefused(message, details);
  const known = classOf(code);
  // An ended action is not retried by its key, whatever code it carries: never a "retry" class.
  if (!known || known === SignerUnavailable || known === ServiceUnavailable) {
    return new ActionFailed(message, details);
  }
  return new known(message, details);
}

function stringField(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  return typeof value === "string" ? value : undefined;
}

/** A decimal string field as a bigint; undefined when absent or not a whole number. */
function bigintField(body: Record<string, unknown>, name: string): bigint | undefined {
  const value = stringField(body, name);
  return value !== undefined && /^[0-9]+$/.test(value) ? BigInt(value) : undefined;
}
