/**
 * A `LISTEN events` session of a test's own, as the origin's listener holds one, recording each
 * notification: its payload (a trigger's names the last event id its statement wrote; a writer's
 * wake after its commit names none, origin/events/wake.ts) and which of an agent's events a read
 * right after it saw. An event a listener can rely on hearing of is one some notification's read saw.
 */
import pg from "pg";
import { sleep } from "../shared/sleep.ts";

export type EventWakes = {
  /** The payloads of the notifications so far, in arrival order. */
  payloads(): string[];
  /** Whether a read that followed some notification saw event `id`. */
  seen(id: string): boolean;
  /** Resolves once the reads have caught up with the notifications so far. */
  settled(): Promise<void>;
  close(): Promise<void>;
};

export async function listenForWakes(url: string, agentId: string): Promise<EventWakes> {
  const listener = new pg.Client({ connectionString: url });
  const reader = new pg.Client({ connectionString: url });
  await Promise.all([listener.connect(), reader.connect()]);
  const payloads: string[] = [];
  const seen = new Set<string>();
  let reads = Promise.resolve();
  listener.on("notification", (message) => {
    if (message.channel !== "events") return;
    payloads.push(message.payload ?? "");
    reads = reads.then(async () => {
      const { rows } = await reader.query<{ id: string }>(
        "select id::text as id from events where agent_id = $1",
        [agentId],
      );
      for (const row of rows) seen.add(row.id);
    });
  });
  await listener.query("LISTEN events");
  return {
    payloads: () => [...payloads],
    seen: (id) => seen.has(id),
    async settled() {
      // A notification sent just before this call may still be on its way.
      await sleep(200);
      await reads;
    },
    async close() {
      await Promise.all([listener.end(), reader.end()]);
    },
  };
}
