import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { consoleSecrets } from "../../testing/console-client.ts";
import { type FollowedStream, followEvents } from "../../testing/event-stream.ts";
import { type MoneyStack, type StackAgent, startMoneyStack } from "../../testing/money-stack.ts";
import { type OriginProcess, spawnOrigin } from "../../testing/origin-process.ts";
import { type OwnPostgres, startOwnPostgres } from "../../testing/own-postgres.ts";
import { afterFeedReads, metricsOverHttp } from "../../testing/worker-ticks.ts";
import { queryRows } from "../db/client.ts";

// Postgres stopped and started again under 100 open streams, on a cluster this file owns, with the
// origin as its own process: the feed's listener and reads fail while it is down and resume after,
// and every event committed before the stop (held unservable until it) or after the start reaches
// every stream of its agent once, in the log's order.

const AGENTS = 25;
const STREAMS_PER_AGENT = 4;
/** The origin's admin token: its feed's reads are read from its /metrics. */
const secrets = consoleSecrets();

describe("the event stream across a Postgres restart (a test-owned cluster)", () => {
  let postgres: OwnPostgres;
  let stack: MoneyStack;
  let origin: OriginProcess;
  let agents: StackAgent[];

  beforeAll(async () => {
    postgres = await startOwnPostgres();
    stack = await startMoneyStack({ database: postgres.database, inProcessOrigin: false });
    agents = await stack.newAgents(AGENTS);
    origin = await spawnOrigin({
      env: stack.processEnv({
        ...secrets.env,
        AGENT_EVENTS_STREAMS_PER_TOKEN: String(STREAMS_PER_AGENT),
      }),
    });
  });
  afterAll(async () => {
    await origin?.stop();
    await stack?.close(); // drops the database: stops the cluster and removes its folder
  });

  const db = () => postgres.database.handle.db;
  /** A `requested` transfer written as the claim writes one (its event is the trigger's). */
  const insertActions = async (perAgent: number): Promise<void> => {
    const values = agents.flatMap((agent) =>
      Array.from(
        { length: perAgent },
        () => sql`(${agent.agentId}::uuid, 'transfer', ${randomUUID()}, 'test', 1000,
          '0x00000000000000000000000000000000000000aa')`,
      ),
    );
    await db().execute(
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address)
          values ${sql.join(values, sql`, `)}`,
    );
  };
  const loggedIds = async (agent: StackAgent): Promise<string[]> =>
    (
      await queryRows<{ id: string }>(
        db(),
        sql`select id::text as id from events where agent_id = ${agent.agentId}::uuid order by events.xid, events.id`,
      )
    ).map((row) => row.id);

  it("serves every event committed around the restart once per stream, 100 streams", async () => {
    await insertActions(1);
    const streams: Array<{ agent: StackAgent; stream: FollowedStream }> = [];
    try {
      for (const agent of agents) {
        for (let i = 0; i < STREAMS_PER_AGENT; i++) {
          streams.push({
            agent,
            stream: followEvents({ url: `${origin.base}/agent/v1/events?after=0`, token: agent.token }),
          });
        }
      }
      // Each stream has read its backlog, so it is on the feed.
      await Promise.all(streams.map(({ stream }) => stream.waitForCount(1)));

      // Committed before the stop, and not yet servable when Postgres goes away: a transaction
      // begun earlier holds the log's horizon below them (docs/events.md#order) until the stop
      // ends it.
      const older = new pg.Client({ connectionString: postgres.database.url });
      older.on("error", () => {}); // the stop cuts it
      await older.connect();
      await older.query("begin");
      await older.query("select pg_current_xact_id()");
      await insertActions(3);
      // The feed reads the log twice, and hands on none of them.
      await afterFeedReads([metricsOverHttp(origin.base, secrets.adminToken)]);
      expect(streams.map(({ stream }) => stream.events.length)).toEqual(streams.map(() => 1));
      await postgres.stop();
      await older.end().catch(() => {});
      await sleep(2_000);
      await postgres.start();
      await insertActions(3);

      const expected = new Map<string, string[]>();
      for (const agent of agents) expected.set(agent.agentId, await loggedIds(agent));
      for (const ids of expected.values()) expect(ids).toHaveLength(7);
      await Promise.all(streams.map(({ stream }) => stream.waitForCount(7, 30_000)));
      // Anything served twice would come with the feed's next reads.
      await afterFeedReads([metricsOverHttp(origin.base, secrets.adminToken)]);
      for (const { agent, stream } of streams) {
        expect(stream.events.map((event) => event.id)).toEqual(expected.get(agent.agentId));
      }
      const reconnects = streams.reduce((sum, { stream }) => sum + stream.errors(), 0);
      process.stderr.write(`postgres restart: ${streams.length} streams, ${reconnects} reconnections\n`);
    } finally {
      for (const { stream } of streams) stream.close();
    }
  });
});
