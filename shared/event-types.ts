/**
 * The types of the event log's events (docs/events.md): `action.<status>` for each status an
 * agent action enters, and `action.abandoned` for a request nobody signed in time (it ends
 * `failed` with error_code `abandoned`).
 */
import { ACTION_STATUSES } from "./action-status.ts";

export const ACTION_EVENT_TYPES: readonly string[] = [
  ...ACTION_STATUSES.map((status) => `action.${status}`),
  "action.abandoned",
];
