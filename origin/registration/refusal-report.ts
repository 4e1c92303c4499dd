/**
 * The node-wide refusals of public registration, reported once per change
 * (docs/events.md#registration-events): a refused request records its refusal in
 * registration_refusal_state only when the state holds another one, and migration 0019's trigger
 * writes `registration.at_reserve` or `registration.at_quota` for that change. A storm of refused
 * requests runs one update that matches no row per request and writes one event in all; an
 * issuance clears the state (issuance.ts), so the next time the node reaches the reserve or a
 * quota is a new change.
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../db/client.ts";
import type { IssuanceRefusal } from "./issuance.ts";

/** A refusal that is the node's state, the same for every client: the reserve, the ceiling, the day's network quota. */
export type NodeRefusal = "key_reserve" | "total_ceiling" | "network_daily";

/** The node-wide refusal `refusal` is, or undefined (paused has its own event; per-group quotas are a client's). */
export function nodeRefusalOf(refusal: IssuanceRefusal): NodeRefusal | undefined {
  switch (refusal.code) {
    case "unavailable":
      return refusal.reason === "key_reserve" || refusal.reason === "total_ceiling"
        ? refusal.reason
        : undefined;
    case "limited":
      return refusal.limit === "network_daily" ? "network_daily" : undefined;
    case "proof_spent":
      return undefined;
  }
}

export type ReportRefusalParams = {
  refusing: NodeRefusal;
  /** `YYYY-MM-DD`, UTC: the day whose quotas the request was judged on. */
  day: string;
};

/** Records the refusal unless it is the one recorded already; true when it changed the state (an event was written). */
export async function reportNodeRefusal(db: Db, params: ReportRefusalParams): Promise<boolean> {
  const changed = await queryRows<{ singleton: number }>(
    db,
    sql`update registration_refusal_state
        set refusing = ${params.refusing}, day = ${params.day}::date, since = now()
        where singleton = 1 and refusing is distinct from ${params.refusing}
        returning singleton`,
  );
  return changed.length > 0;
}
