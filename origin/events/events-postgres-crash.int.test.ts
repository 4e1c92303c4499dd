import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { followEvents } from "../../testing/event-stream.ts";
import { type MoneyStack, type StackAgent, startMoneyStack } from "../../testing/money-stack.ts";
import { type OwnPostgres, startOwnPostgres } from "../../testing/own-postgres.ts";
import { queryRows } from "../db/client.ts";

// Postgres crashing (a backend killed: the postmaster ends every session and recovers from the log
// on disk) just after a commit that did not wait for the flush, as the outbox's moves and a
// settlement's receipt commit (db/no-flush-wait.ts). Recovery loses that commit and hands its
// transaction id, and its event's id, to the next transaction. The walwriter flushes only every 10 s
// on this cluster (wal_writer_delay), so the lost commit is certain rather than a matter of timing.

describe("the event stream across a Postgres crash that loses a commit (a test-owned cluster)", () => {
  let postgres: OwnPostgres;
  let stack: MoneyStack;
  let agent: StackAgent;

  beforeAll(async () => {
    postgres = await startOwnPostgres({ settings: { wal_writer_delay: "10000ms" } });
    stack = await startMoneyStack({ database: postgres.database });
    agent = await stack.newAgent();
  });
  afterAll(async () => {
    await stack?.close(); // drops the database: stops the cluster and removes its folder
  });

  const db = () => postgres.database.handle.db;
  const insertAction = (client: pg.Client): Promise<unknown> =>
    client.query(
      `insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address)
       values ($1, 'transfer', $2, 'test', 1000, '0x00000000000000000000000000000000000000aa')`,
      [agent.agentId, randomUUID()],
    );
  const connect = async (): Promise<pg.Client> => {
    const client = new pg.Client({ connectionString: postgres.database.url });
    client.on("error", () => {}); // the crash cuts it
    await client.connect();
    return client;
  };
  const loggedIds = async (): Promise<string[]> =>
    (
      await queryRows<{ id: string }>(
        db(),
        sql`select id::text as id from events where agent_id = ${agent.agentId}::uuid order by events.xid, events.id`,
      )
    ).map((row) => row.id);

  it("serves every event the log holds after the crash once, and none the crash took back", async () => {
    const stream = followEvents({ url: `${stack.origin.base}/agent/v1/events?after=0`, token: agent.token });
    try {
      const client = await connect();
      await insertAction(client);
      await stream.waitForCount(1, 30_000);

      // Committed without waiting for the flush, then the database crashes before the walwriter's.
      await client.query("begin");
      await client.query("set local synchronous_commit = off");
      await insertAction(client);
      await client.query("commit");
      const lost = await loggedIds();
      expect(lost).toHaveLength(2);
      await sleep(1_000); // what a stream does with that event, it has done by now
      const backend = (await client.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
      process.kill(backend, "SIGKILL");
      await client.end().catch(() => {});

      let recovered: pg.Client | undefined;
      for (let tries = 0; !recovered; tries++) {
        recovered = await connect().catch(async (error: unknown) => {
          if (tries > 100) throw error;
          await sleep(100);
          return undefined;
        });
      }
      // The crash took the commit back: its event is gone, and its ids are free again.
      expect(await loggedIds()).toEqual(lost.slice(0, 1));
      await insertAction(recovered);
      await insertAction(recovered);
      await recovered.end();

      const expected = await loggedIds();
      expect(expected).toHaveLength(3);
      await stream.waitForCount(3, 30_000).catch(() => {});
      await sleep(1_500); // anything more would come by now (the feed reads at least once a second)
      expect(stream.events.map((event) => event.id)).toEqual(expected);
    } finally {
      stream.close();
    }
  });
});
