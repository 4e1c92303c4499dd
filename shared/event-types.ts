/**
 * The types of the event log's events (docs/events.md#the-event-log). Runtime-neutral: the client,
 * the tools and the origin read the same lists.
 */
import { ACTION_STATUSES } from "./action-status.ts";
import { SETTLEMENT_STATES } from "./settlement-status.ts";

/**
 * `action.<status>` for each status an agent action enters, and `action.abandoned` for a request
 * nobody signed in time (it ends `failed` with error_code `abandoned`).
 */
export const ACTION_EVENT_TYPES: readonly string[] = [
  ...ACTION_STATUSES.map((status) => `action.${status}`),
  "action.abandoned",
];

/**
 * `x402.settlement.<state>` for each state an x402 settlement enters once it has a transaction, and
 * `x402.settlement.used_elsewhere`: the payee agent's event when the payee is an agent's wallet,
 * the node's otherwise.
 */
export const X402_SETTLEMENT_EVENT_TYPES: readonly string[] = [
  ...SETTLEMENT_STATES.map((state) => `x402.settlement.${state}`),
  // A settlement that moved nothing whose authorization, the chain says, another relayer's
  // transaction used (paying the payee): learnt after its `failed` or `reverted` event went out.
  "x402.settlement.used_elsewhere",
];

/**
 * An agent's events besides its actions' statuses: its x402 signatures, its identity (disabled,
 * enabled, revoked), its token replaced, the sweep's findings.
 */
export const AGENT_STATE_EVENT_TYPES: readonly string[] = [
  "x402.authorization.signed",
  "identity.disabled",
  "identity.enabled",
  "identity.revoked",
  "token.rotated",
  "finding.raised",
];

/** Every type an agent's stream can carry: its own events. */
export const AGENT_EVENT_TYPES: readonly string[] = [
  ...ACTION_EVENT_TYPES,
  ...AGENT_STATE_EVENT_TYPES,
  ...X402_SETTLEMENT_EVENT_TYPES,
];

/** The node's own events (no agent): webhooks deliver them, an agent's stream never carries them. */
export const NODE_EVENT_TYPES: readonly string[] = [
  "registration.paused",
  "registration.at_reserve",
  "registration.at_quota",
];

/** Every type the event log writes. */
export const EVENT_TYPES: readonly string[] = [...AGENT_EVENT_TYPES, ...NODE_EVENT_TYPES];

/** The largest event id: the log's ids are Postgres bigints. */
export const MAX_EVENT_ID = 2n ** 63n - 1n;

/** The longest webhook endpoint URL an operator may add, by the console or the CLI. */
export const MAX_WEBHOOK_URL_LENGTH = 2_000;

/**
 * An event id as a client writes it (a whole number in decimal; `0` is before every event), or
 * undefined for any other text. A number past MAX_EVENT_ID is one of those: no event has it, and
 * the database would fail the query it went into rather than answer that none matched.
 */
export function parseEventId(text: string): bigint | undefined {
  if (!/^\d{1,19}$/.test(text)) return undefined;
  const id = BigInt(text);
  return id <= MAX_EVENT_ID ? id : undefined;
}
