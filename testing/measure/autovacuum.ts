/**
 * The tables Postgres's autovacuum worked on while a bench's phase ran. In `bench:money` its first
 * vacuum of the hot tables (the actions, the events, the outgoing transactions) lands at the same
 * point of every run, inside one phase, and adds about half a millisecond of Postgres's CPU to each
 * of that phase's transfers (docs/performance.md, "Events and webhooks"). A bench prints the tables
 * beside the phase, so that a phase's spike is not read as the cost of what the phase measures.
 */
import pg from "pg";

export type AutovacuumWatch = {
  /** Runs `phase`; `tables` are those an autovacuum worker was seen on meanwhile, in order seen. */
  during<T>(phase: () => Promise<T>): Promise<{ value: T; tables: string[] }>;
  close(): Promise<void>;
};

/** `autovacuum: VACUUM ANALYZE public.events` (or `… (to prevent wraparound)`): `events`. */
export function autovacuumTable(activity: string): string | undefined {
  const match = /^autovacuum: [A-Z ]*?([\w$]+\.)?([\w$]+)( \(to prevent wraparound\))?$/.exec(
    activity.trim(),
  );
  if (!match) return undefined;
  return match[1] === "public." || match[1] === undefined ? match[2] : `${match[1]}${match[2]}`;
}

/**
 * Polls the workers of the server at `url` every `everyMs` on a connection of its own, a read of
 * `pg_stat_activity` costing that server a few microseconds each time.
 */
export async function watchAutovacuum(url: string, everyMs = 100): Promise<AutovacuumWatch> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const open = new Set<Set<string>>();
  let reading: Promise<void> | undefined;
  const read = async (): Promise<void> => {
    const { rows } = await client.query<{ query: string }>(
      "select query from pg_stat_activity where backend_type = 'autovacuum worker'",
    );
    for (const { query } of rows) {
      const table = autovacuumTable(query);
      if (table !== undefined) for (const seen of open) seen.add(table);
    }
  };
  const poll = setInterval(() => {
    // One read at a time: a slow answer does not pile reads up behind it.
    if (reading || open.size === 0) return;
    reading = read()
      .catch(() => {})
      .finally(() => {
        reading = undefined;
      });
  }, everyMs);
  poll.unref();
  return {
    async during(phase) {
      const seen = new Set<string>();
      open.add(seen);
      try {
        const value = await phase();
        return { value, tables: [...seen] };
      } finally {
        open.delete(seen);
      }
    },
    async close() {
      clearInterval(poll);
      await reading;
      await client.end();
    },
  };
}
