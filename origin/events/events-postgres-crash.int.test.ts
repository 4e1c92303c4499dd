import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { followEvents } from "../../testing/event-stream.ts";
import { type MoneyStack, type StackAgent, startMoneyStack } from "../../testing/money-stack.ts";
import { type OwnPostgres, startOwnPostgres } from "../../testing/own-postgres.ts";
import { afterFeedReads } from "../../testing/worker-ticks.ts";
import { queryRows } from "../db/client.ts";

// Postgres crashing (a backend killed: the postmaster ends every session and recovers from the log
// on disk) just after a commit that did not wait for the flush, as the outbox's moves and a
// settlement's receipt commit (db/no-flush-wait.ts). Recovery loses that commit and hands its
// transaction id, and its event's id, to the next transaction. The walwriter flushes every 3 s on
// this cluster (wal_writer_delay), so a crash 0.3 s after the commit mostly finds it not yet on disk.

describe("the event stream across a Postgres crash that loses a commit (a test-owned cluster)", () => {
  let postgres: OwnPostgres;
  let stack: MoneyStack;
  let agent: StackAgent;

  beforeAll(async () => {
    postgres = await startOwnPostgres({ settings: { wal_writer_delay: "3000ms" } });
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
      const first = await connect();
      await insertAction(first);
      await first.end();
      await stream.waitForCount(1, 30_000);

      // Another commit on the cluster in the window flushes the log with its own, and then the crash
      // takes nothing back: the scenario is tried again until one does.
      let tookBack = 0;
      for (let attempt = 0; attempt < 5 && tookBack === 0; attempt++) {
        // Committed without waiting for the flush, then the database crashes before the walwriter's.
        const client = await connect();
        const before = await loggedIds();
        await client.query("begin");
        await client.query("set local synchronous_commit = off");
        await insertAction(client);
        await client.query("commit");
        await sleep(300); // what a stream does with that event, it has done by now
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
        // Taken back: its event is gone, and its ids are free again for these two.
        if ((await loggedIds()).length === before.length) tookBack++;
        await insertAction(recovered);
        await insertAction(recovered);
        await recovered.end();
      }
      expect(tookBack, "a crash took a commit back in one of 5 attempts").toBe(1);

      // The crash is over. Every read of the feed waits until the log it saw is on disk (store.ts,
      // untilOnDisk), which the walwriter's 3 s cycle on this cluster (the crash's window above)
      // makes up to 3 s a read: a commit that waits for the flush flushes the log with its own, as a
      // loaded node's commits do every few ms, so one is made every 50 ms from here on.
      const flusher = await connect();
      let flushing = true;
      const flushes = (async () => {
        while (flushing) {
          await flusher.query("begin");
          await flusher.query("set local synchronous_commit = on");
          // A write of no table (it logs a message): its commit waits for the flush.
          await flusher.query("select pg_logical_emit_message(true, 'test', 'flush')");
          await flusher.query("commit");
          await sleep(50);
        }
      })();
      try {
        const expected = await loggedIds();
        await stream.waitForCount(expected.length, 30_000).catch(() => {});
        // Anything more would come with the feed's next reads.
        await afterFeedReads([stack.origin]);
        expect(stream.events.map((event) => event.id)).toEqual(expected);
      } finally {
        flushing = false;
        await flushes;
        await flusher.end();
      }
    } finally {
      stream.close();
    }
  });
});
