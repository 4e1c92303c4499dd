/**
 * The types of the event log's events (docs/events.md): `action.<status>` for each status an
 * agent action enters, and `action.abandoned` for a request nobody signed in time (it ends
 * `failed` with error_code `abandoned`); `x402.settlement.<status>` for each state an x402
 * settlement enters once it has a transaction.
 */
import { ACTION_STATUSES } from "./action-status.ts";
import { SETTLEMENT_STATES } from "./settlement-status.ts";

export const ACTION_EVENT_TYPES: readonly string[] = [
  ...ACTION_STATUSES.map((status) => `action.${status}`),
  "action.abandoned",
];

export const X402_SETTLEMENT_EVENT_TYPES: readonly string[] = SETTLEMENT_STATES.map(
  (state) => `x402.settlement.${state}`,
);

/** Every type the log writes. */
export const EVENT_TYPES: readonly string[] = [...ACTION_EVENT_TYPES, ...X402_SETTLEMENT_EVENT_TYPES];
