/**
 * A final refusal's extra fields, stored with the action it ended (agent_actions.error_fields), and
 * what a repeat of its key answers from them (docs/agents.md#moving-money): the first answer's
 * fields, in its order, so the repeat is the first answer again, except for a wait, which is told
 * as it stands now. A refusal's `retry_after` counts seconds from its own answer: it is stored as
 * the instant it named (`retry_at`), and a repeat answers the seconds left until then, rounded up,
 * with the Retry-After header while any are left. Once the instant has passed it answers
 * `retry_after: 0` and no header: there is nothing left to wait for.
 */
import * as z from "zod";
import type { Refusal } from "./refusal.ts";

type FieldValue = string | number;

/**
 * `[name, value]` pairs, not an object: jsonb orders an object's keys by their length, and a repeat
 * answers the fields in the first answer's order.
 */
export type StoredRefusalFields = Array<[string, FieldValue]>;

/** The wire field of a wait in seconds, and the stored instant it is kept as. */
const WAIT_SECONDS = "retry_after";
const WAIT_UNTIL = "retry_at";

/**
 * What is stored of a refusal's fields, answered at `now`: an empty list for a refusal without any
 * (null is left to the rows ended before the column existed).
 */
export function refusalFieldsToStore(fields: Refusal["fields"], now: Date): StoredRefusalFields {
  return Object.entries(fields ?? {}).map(([name, value]): [string, FieldValue] =>
    name === WAIT_SECONDS && typeof value === "number"
      ? [WAIT_UNTIL, new Date(now.getTime() + value * 1000).toISOString()]
      : [name, value],
  );
}

const storedSchema = z.array(z.tuple([z.string(), z.union([z.string(), z.number()])]));

/**
 * The fields, and the Retry-After header, a repeat answers at `now`; undefined when none were
 * stored (an action ended before agent_actions.error_fields existed).
 */
export function replayedRefusalFields(
  stored: unknown,
  now: Date,
): Required<Pick<Refusal, "fields" | "headers">> | undefined {
  const parsed = storedSchema.safeParse(stored);
  if (!parsed.success) return undefined;
  const fields: Record<string, FieldValue> = {};
  const headers: Record<string, string> = {};
  for (const [name, value] of parsed.data) {
    if (name === WAIT_UNTIL && typeof value === "string") {
      const seconds = secondsLeft(value, now);
      fields[WAIT_SECONDS] = seconds;
      // The first answer's header is its `retry_after` (actions/faucet.ts retryLater).
      if (seconds > 0) headers["Retry-After"] = String(seconds);
    } else {
      fields[name] = value;
    }
  }
  return { fields, headers };
}

/** Whole seconds from `now` until `instant`, rounded up as the first answer rounded them; 0 once past. */
function secondsLeft(instant: string, now: Date): number {
  const ms = Date.parse(instant) - now.getTime();
  return Number.isFinite(ms) && ms > 0 ? Math.ceil(ms / 1000) : 0;
}
