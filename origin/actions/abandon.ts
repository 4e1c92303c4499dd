/**
 * The agent actions nobody finished: a `requested` action (nothing signed: the signer or the chain
 * could not be reached, or the request stopped) waits for a retry under its idempotency key, and
 * ends `failed` (`abandoned`) once it has waited this long untouched. The transaction tracker runs
 * the sweep on each of its sweeps (outbox/tracker-hooks.ts), handed it by the composition root.
 */
import { sql } from "drizzle-orm";
import { preparedStatement, runPrepared } from "../db/prepared.ts";
import type { OutboxDomains } from "../outbox/index.ts";

/**
 * How long a `requested` action waits for a retry under its idempotency key before it ends
 * `abandoned`. Every attempt starts the wait again. The gateway's 503 answers tell agents this figure.
 */
export const ABANDON_REQUESTED_AFTER_MS = 10 * 60_000;

// Run several times a second per origin, so planned once (db/prepared.ts).
export const abandonStatement = preparedStatement<"abandonAfter">(
  "tracker_abandon",
  sql`update agent_actions set status = 'failed', error_code = 'abandoned',
        error_message = 'nothing signed for it was kept or sent (a signer that answered too late may have counted it), and the request was not retried in time: send it again with a new idempotency_key',
        updated_at = now()
      where action_id in (
        select action_id from agent_actions
        where status = 'requested'
          and updated_at < now() - make_interval(secs => ${sql.placeholder("abandonAfter")}::double precision)
        order by updated_at limit 100 for update skip locked)
      returning action_id`,
).returns({ action_id: "uuid" });

export const abandonRequestedSweep: OutboxDomains["sweeps"][number] = {
  name: "abandon_requested_actions",
  async run(db, options) {
    const rows = await runPrepared(db, abandonStatement, {
      abandonAfter: (options.abandonAfterMs ?? ABANDON_REQUESTED_AFTER_MS) / 1000,
    });
    return rows.length;
  },
};
