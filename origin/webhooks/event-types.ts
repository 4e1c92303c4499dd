/**
 * The event types an endpoint may subscribe to: the types the event log writes (docs/events.md,
 * shared/event-types.ts). A list, never a wildcard, so a type added later reaches an endpoint only
 * when its operator asks for it.
 */
import { EVENT_TYPES } from "../../shared/event-types.ts";

export const WEBHOOK_EVENT_TYPES: readonly string[] = EVENT_TYPES;

export type ParsedEventTypes = { ok: true; types: string[] } | { ok: false; unknown: string[] };

/** A comma list of types, each known; duplicates collapse. */
export function parseEventTypes(list: string): ParsedEventTypes {
  const types = [
    ...new Set(
      list
        .split(",")
        .map((each) => each.trim())
        .filter((each) => each !== ""),
    ),
  ];
  const unknown = types.filter((each) => !WEBHOOK_EVENT_TYPES.includes(each));
  if (types.length === 0) return { ok: false, unknown: [list] };
  return unknown.length > 0 ? { ok: false, unknown } : { ok: true, types };
}
