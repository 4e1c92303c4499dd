import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { newAccount } from "../../devnet/testing.ts";
import { errorMessage } from "../../shared/error-message.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { followEvents } from "../../testing/event-stream.ts";
import { send } from "../../testing/http.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import { parsePrometheusText } from "../../testing/prometheus.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { afterFeedReads } from "../../testing/worker-ticks.ts";
import { abandonStatement } from "../actions/abandon.ts";
import { queryRows } from "../db/client.ts";
import { runPrepared } from "../db/prepared.ts";
import { sweepExpiredEvents } from "./retention.ts";
import { currentHorizon } from "./store.ts";

// The event log on a real stack (origin, enclave, devnet, Postgres): what the triggers write, the
// order the stream serves it in, the per-token cap, the action wait and the retention sweep. On a
// cluster of its own: the times it asserts start when an event is below the horizon, which on the
// suite's shared cluster another file's transaction can hold back (testing/events-horizon.ts).

describe("the event log and the agent's stream (real stack)", () => {
  const stack = useMoneyStack({ env: { AGENT_EVENTS_STREAMS_PER_TOKEN: "4" }, database: "own cluster" });
  const db = () => stack.db.handle.db;
  const eventsUrl = (query = "") => `${stack.origin.base}/agent/v1/events${query}`;

  /** A `requested` transfer action written as the claim writes one, outside the money path. */
  const insertAction = async (agent: StackAgent, client?: pg.Client): Promise<string> => {
    const text = `insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address)
      values ($1, 'transfer', $2, 'test', 1234567, '0x00000000000000000000000000000000000000aa') returning action_id`;
    const values = [agent.agentId, newKey()];
    if (client) return (await client.query<{ action_id: string }>(text, values)).rows[0]!.action_id;
    const [row] = await queryRows<{ action_id: string }>(
      db(),
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address)
          values (${agent.agentId}::uuid, 'transfer', ${newKey()}, 'test', 1234567, '0x00000000000000000000000000000000000000aa')
          returning action_id`,
    );
    return row!.action_id;
  };
  const eventsOf = (actionId: string) =>
    queryRows<{ type: string; data: ActionView }>(
      db(),
      sql`select type, data from events where data->>'action_id' = ${actionId} order by xid, id`,
    );
  const getAction = async (agent: StackAgent, actionId: string): Promise<ActionView> => {
    const response = await agentCalls(stack.origin.base, agent.token).action(actionId);
    expect(response.status).toBe(200);
    return response.body as ActionView;
  };
  const eventIdOf = async (actionId: string): Promise<string> =>
    (
      await queryRows<{ id: string }>(
        db(),
        sql`select id::text as id from events where data->>'action_id' = ${actionId} order by events.id limit 1`,
      )
    )[0]!.id;
  /**
   * Resolves once the origin holds `count` `?wait=` requests that have read their action and wait
   * for a change (origin_events_action_waits): a change written now can only be answered by a wake.
   */
  const waitsHeld = (count: number) =>
    expect
      .poll(
        async () =>
          parsePrometheusText(await stack.origin.deps.metrics.render()).value("origin_events_action_waits"),
        { timeout: 10_000, interval: 20 },
      )
      .toBe(count);
  const connect = async (): Promise<pg.Client> => {
    const client = new pg.Client({ connectionString: stack.db.url });
    await client.connect();
    return client;
  };

  it("an event's data is the action exactly as GET /actions/{id} answers it, in every status", async () => {
    const agent = await stack.newAgent({ units: 5_000_000n });
    // A real transfer: requested, signed, submitted, confirmed, with its fee once mined.
    const calls = agentCalls(stack.origin.base, agent.token);
    const sent = await calls.transfer({
      idempotency_key: newKey(),
      to: newAccount().address,
      amount: "1000",
    });
    const transfer = (sent.body as ActionView).action_id;
    const confirmed = await calls.settled(transfer);
    expect(confirmed.status).toBe("confirmed");
    expect(confirmed.fee_wei).not.toBeNull();
    const real = await eventsOf(transfer);
    // The devnet mines on arrival, so the receipt is there when the broadcast is recorded and the
    // action goes from signed to confirmed in one write (docs/api.md#faucet-and-transfer-actions-states):
    // an event for each status the action entered, no more.
    expect(real.map((event) => event.type)).toEqual([
      "action.requested",
      "action.signed",
      "action.confirmed",
    ]);
    expect(real.at(-1)!.data).toEqual(await getAction(agent, transfer));

    // The same action moved by hand through each status, with every field the view prints set,
    // and times whose microseconds JavaScript truncates (never rounds) to milliseconds.
    const [{ tx_id: txId } = { tx_id: "" }] = await queryRows<{ tx_id: string }>(
      db(),
      sql`select tx_id from agent_actions where action_id = ${transfer}::uuid`,
    );
    const [{ action_id: id } = { action_id: "" }] = await queryRows<{ action_id: string }>(
      db(),
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address,
            created_at, updated_at)
          values (${agent.agentId}::uuid, 'transfer', ${newKey()}, 'test', 1234567, ${newAccount().address.toLowerCase()},
            '2031-03-04T05:06:07.999999Z', '2031-03-04T05:06:07.000999Z')
          returning action_id`,
    );
    expect((await eventsOf(id)).map((event) => event.data)).toEqual([await getAction(agent, id)]);
    const steps: Array<[string, ReturnType<typeof sql>]> = [
      [
        "held",
        sql`status = 'held', hold_rule = 'per_transfer_units', hold_expires_at = '2031-03-05T05:06:07.123999Z'`,
      ],
      ["signed", sql`status = 'signed', tx_hash = ${`0x${"ab".repeat(32)}`}, tx_id = ${txId}::uuid`],
      ["submitted", sql`status = 'submitted', last_broadcast_error = 'nonce too low'`],
      ["confirmed", sql`status = 'confirmed', updated_at = '2031-03-04T05:06:08.000500Z'`],
      [
        "failed",
        sql`status = 'failed', error_code = 'broadcast_refused', replaced_by_action_id = ${transfer}::uuid`,
      ],
      ["reverted", sql`status = 'reverted', error_code = null`],
    ];
    for (const [status, change] of steps) {
      await db().execute(sql`update agent_actions set ${change} where action_id = ${id}::uuid`);
      const logged = await eventsOf(id);
      const last = logged.at(-1)!;
      expect(last.type).toBe(`action.${status}`);
      expect(last.data).toEqual(await getAction(agent, id));
    }
    // A request nobody signed in time, ended by the tracker's sweep (actions/abandon.ts): its
    // event is action.abandoned, its data the action as GET answers it (failed, abandoned).
    const stale = await insertAction(agent);
    await db().execute(
      sql`update agent_actions set updated_at = now() - interval '1 hour' where action_id = ${stale}::uuid`,
    );
    await runPrepared(db(), abandonStatement, { abandonAfter: 60 });
    const abandoned = (await eventsOf(stale)).at(-1)!;
    expect(abandoned.type).toBe("action.abandoned");
    expect(abandoned.data).toEqual(await getAction(agent, stale));
    expect(abandoned.data).toMatchObject({ status: "failed", error_code: "abandoned" });
    // An update that leaves the status alone writes no event.
    const before = (await eventsOf(id)).length;
    await db().execute(
      sql`update agent_actions set last_broadcast_error = 'x' where action_id = ${id}::uuid`,
    );
    expect((await eventsOf(id)).length).toBe(before);
  });

  it("an event whose transaction commits after a higher id's is served once, in transaction order", async () => {
    const agent = await stack.newAgent();
    const stream = followEvents({ url: eventsUrl(), token: agent.token });
    const first = await connect();
    const second = await connect();
    try {
      // With no cursor the stream starts where the log is when it opens: an event written before
      // that would never come (a fixed 300 ms was too short for the open on a loaded machine).
      await stream.waitForOpen();
      const opener = await insertAction(agent);
      await stream.waitForCount(1);
      await first.query("begin");
      const early = await insertAction(agent, first); // the lower id, committed last
      await second.query("begin");
      const late = await insertAction(agent, second);
      await second.query("commit");
      // The higher id is committed but not servable while the lower one's transaction runs: the
      // feed reads the log, and hands on nothing.
      await afterFeedReads([stack.origin]);
      expect(stream.events.map((event) => event.body.data.action_id)).toEqual([opener]);
      await first.query("commit");
      await stream.waitForCount(3);
      await afterFeedReads([stack.origin]);
      expect(stream.events.map((event) => event.body.data.action_id)).toEqual([opener, early, late]);
      const ids = stream.events.map((event) => BigInt(event.id));
      expect(ids[1]! < ids[2]!).toBe(true);
    } finally {
      stream.close();
      await first.end();
      await second.end();
    }
  });

  it("streams that open while events are written get each event once: their backlog, then the feed", async () => {
    const agent = await stack.newAgent();
    const first = await insertAction(agent);
    let writing = true;
    const writer = (async () => {
      while (writing) {
        await insertAction(agent);
        await sleep(5);
      }
    })();
    const streams = [];
    // Four: the token's cap (a fifth would close the first).
    for (let i = 0; i < 4; i++) {
      await sleep(120);
      // From the start, from the first event, and from now, while the writer goes on.
      const query = i % 3 === 0 ? "?after=0" : i % 3 === 1 ? `?after=${await eventIdOf(first)}` : "";
      streams.push({
        query,
        opened: await currentHorizon(db()),
        stream: followEvents({ url: eventsUrl(query), token: agent.token }),
      });
    }
    await sleep(400);
    writing = false;
    await writer;
    const all = await queryRows<{ id: string }>(
      db(),
      sql`select id::text as id from events where agent_id = ${agent.agentId}::uuid order by events.xid, events.id`,
    );
    const firstId = await eventIdOf(first);
    try {
      const expectedOf = (query: string) =>
        query === "?after=0"
          ? all.map((row) => row.id)
          : query.startsWith("?after=")
            ? all.map((row) => row.id).filter((id) => BigInt(id) > BigInt(firstId))
            : undefined;
      // Every stream has its last event first; then the feed's reads that would bring a repeat
      // run once for all four (each stream's wait for them began after its last event came).
      for (const { query, stream } of streams) {
        const expected = expectedOf(query);
        if (expected) await stream.waitForCount(expected.length, 30_000);
        else
          await expect
            .poll(() => stream.events.at(-1)?.id, { timeout: 30_000, interval: 100 })
            .toBe(all.at(-1)?.id);
      }
      await afterFeedReads([stack.origin]);
      for (const { query, opened, stream } of streams) {
        const expected = expectedOf(query);
        if (expected) {
          expect(stream.events.map((event) => event.id)).toEqual(expected);
        } else {
          // From now: a run of the log's tail, in order, without a hole or a repeat. "Now" is the
          // log's horizon when the request was read, at or after `opened` (later under load): the
          // run ends with the log's last event, and holds no event of a transaction that had ended
          // before `opened` (an older one still running then may commit after it: those count).
          const ids = all.map((row) => row.id);
          const got = stream.events.map((event) => event.id);
          const start = ids.indexOf(got[0]!);
          const [{ xid } = { xid: "0" }] = await queryRows<{ xid: string }>(
            db(),
            sql`select xid::text as xid from events where id = ${got[0]!}::bigint`,
          );
          expect(BigInt(xid)).toBeGreaterThanOrEqual(opened.xid);
          expect(got).toEqual(ids.slice(start));
        }
      }
    } finally {
      for (const { stream } of streams) stream.close();
    }
  });

  it("LISTEN wakes the feed at once; when its connection is cut it comes back, and the poll serves meanwhile", async () => {
    const agent = await stack.newAgent();
    const stream = followEvents({ url: eventsUrl(), token: agent.token });
    const listeners = async () =>
      (
        await queryRows<{ pid: number }>(
          db(),
          sql`select pid from pg_stat_activity where datname = current_database() and query = 'LISTEN events'`,
        )
      ).map((row) => row.pid);
    /**
     * The log's horizon, the late action's event and every transaction that holds an id: what a
     * failure here says (an event that did not come for 5 s, twice in full runs, not yet explained).
     */
    const whyLate = async (actionId: string): Promise<string> =>
      JSON.stringify(
        (
          await queryRows(
            db(),
            sql`select pg_snapshot_xmin(pg_current_snapshot())::text as horizon,
                  (select string_agg(id::text || '@' || xid::text, ',') from events
                    where data->>'action_id' = ${actionId}) as event,
                  (select string_agg(format('%s %s %s xid=%s since %s: %s', pid, backend_type, state,
                      backend_xid, xact_start, left(query, 60)), '; ')
                    from pg_stat_activity where backend_xid is not null and pid <> pg_backend_pid()) as holders`,
          )
        )[0],
      );
    /** ms from the insert's commit to the event's arrival, for `count` events one after another. */
    const latencies = async (count: number): Promise<number[]> => {
      const took: number[] = [];
      for (let i = 0; i < count; i++) {
        const before = stream.events.length;
        const started = Date.now();
        const id = await insertAction(agent);
        await stream.waitForCount(before + 1, 5_000).catch(async (error: unknown) => {
          throw new Error(`${errorMessage(error)}; ${await whyLate(id)}`);
        });
        took.push(Date.now() - started);
        await sleep(50);
      }
      return took;
    };
    try {
      await stream.waitForOpen();
      await insertAction(agent);
      await stream.waitForCount(1);
      // The poll alone would take 500 ms on average, up to a whole second.
      const listened = await latencies(5);
      expect(Math.max(...listened), `latencies ${listened.join(", ")} ms`).toBeLessThan(600);
      const [pid] = await listeners();
      expect(pid).toBeDefined();
      await db().execute(sql`select pg_terminate_backend(${pid}::int)`);
      // Meanwhile the poll serves.
      await latencies(2);
      const deadline = Date.now() + 10_000;
      while (!(await listeners()).some((each) => each !== pid) && Date.now() < deadline) await sleep(100);
      expect((await listeners()).filter((each) => each !== pid)).toHaveLength(1);
      const again = await latencies(5);
      expect(Math.max(...again), `latencies ${again.join(", ")} ms`).toBeLessThan(600);
      const ids = stream.events.map((event) => event.id);
      expect(new Set(ids).size).toBe(ids.length);
    } finally {
      stream.close();
    }
  });

  it("a fifth stream of one token closes its oldest; the other four stay open", async () => {
    const agent = await stack.newAgent();
    const streams = [];
    for (let i = 0; i < 4; i++) {
      streams.push(followEvents({ url: eventsUrl(), token: agent.token }));
      // Open in turn, so the first is the oldest, and each starts before the opener is written.
      await streams.at(-1)!.waitForOpen();
    }
    const opener = await insertAction(agent);
    for (const each of streams) await each.waitForCount(1);
    streams.push(followEvents({ url: eventsUrl(), token: agent.token }));
    await streams[4]!.waitForOpen();
    const next = await insertAction(agent);
    for (const each of streams.slice(1, 4)) await each.waitForCount(2);
    await streams[4]!.waitForCount(1);
    try {
      expect(streams[0]!.closedReason()).toBe("too_many_streams");
      expect(streams[0]!.events.map((event) => event.body.data.action_id)).toEqual([opener]);
      for (const each of streams.slice(1)) {
        expect(each.closedReason()).toBeUndefined();
        expect(each.ofAction(next)).toHaveLength(1);
      }
    } finally {
      for (const each of streams) each.close();
    }
  });

  it("resumes after Last-Event-ID or ?after=, refuses an unknown id, and after=0 replays what is kept", async () => {
    const agent = await stack.newAgent();
    const other = await stack.newAgent();
    const a = await insertAction(agent);
    const b = await insertAction(agent);
    await insertAction(other);
    const all = followEvents({ url: eventsUrl("?after=0"), token: agent.token });
    const [first, second] = await all.waitForCount(2);
    all.close();
    expect([first!.body.data.action_id, second!.body.data.action_id]).toEqual([a, b]);
    expect(first!.body).toMatchObject({ id: first!.id, type: "action.requested" });

    const resumed = followEvents({ url: eventsUrl(), token: agent.token, lastEventId: first!.id });
    const byQuery = followEvents({ url: eventsUrl(`?after=${first!.id}`), token: agent.token });
    const c = await insertAction(agent);
    // Both have their two events first; then the feed's reads that would bring a repeat, once for both.
    for (const each of [resumed, byQuery]) await each.waitForCount(2);
    await afterFeedReads([stack.origin]);
    for (const each of [resumed, byQuery]) {
      expect(
        each.events.map((event) => event.body.data.action_id),
        JSON.stringify(each.events.map((event) => [event.id, event.type])),
      ).toEqual([b, c]);
      each.close();
    }

    const headers = { authorization: `Bearer ${agent.token}` };
    for (const bad of ["abc", "-1", "99999999999999999999", "1.5"]) {
      const answer = await send(eventsUrl(`?after=${encodeURIComponent(bad)}`), { headers });
      expect(answer.status).toBe(400);
    }
    // Another agent's event id is unknown to this one, like an id never written.
    const [otherEvent] = await queryRows<{ id: string }>(
      db(),
      sql`select id::text as id from events where agent_id = ${other.agentId}::uuid limit 1`,
    );
    for (const unknown of [otherEvent!.id, "9000000000000000000"]) {
      const answer = await send(eventsUrl(), { headers: { ...headers, "last-event-id": unknown } });
      expect(answer.status).toBe(400);
      expect((answer.body as { error: { code: string } }).error.code).toBe("validation_failed");
    }
  });

  it("a stream opened with no cursor starts at the request: nothing committed before it, though the feed has not read it yet", async () => {
    const agent = await stack.newAgent();
    // The feed runs (another agent's stream). An older transaction holds the log's horizon below
    // the event, so the feed cannot serve it and its cursor stays behind; it ends without writing
    // an event, so nothing wakes the feed before its next poll (1 s): meanwhile the feed's cursor
    // lags the log.
    const running = followEvents({ url: eventsUrl(), token: (await stack.newAgent()).token });
    const older = await connect();
    try {
      await running.waitForOpen();
      await older.query("begin");
      await older.query("select pg_current_xact_id()");
      const before = await insertAction(agent);
      await sleep(300);
      await older.query("commit");
      const stream = followEvents({ url: eventsUrl(), token: agent.token });
      try {
        await stream.waitForOpen();
        const after = await insertAction(agent);
        await stream.waitForCount(1);
        await afterFeedReads([stack.origin]);
        expect(stream.events.map((event) => event.body.data.action_id)).toEqual([after]);
        expect(before).not.toBe(after);
      } finally {
        stream.close();
      }
    } finally {
      await older.end();
      running.close();
    }
  });

  it("serves a backlog across a power of ten in the log's order (…99 before …100)", async () => {
    const agent = await stack.newAgent();
    const [{ max } = { max: "0" }] = await queryRows<{ max: string }>(
      db(),
      sql`select coalesce(max(id), 0)::text as max from events`,
    );
    // The next two ids are 10^k - 1 and 10^k, written by one statement (one transaction, so the
    // ids alone order them): as text, the second sorts first.
    const power = 10n ** BigInt(max.length + 1);
    await db().execute(sql`select setval('events_id_seq', ${(power - 2n).toString()}::bigint)`);
    const inserted = await queryRows<{ action_id: string }>(
      db(),
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address)
          values (${agent.agentId}::uuid, 'transfer', ${newKey()}, 'test', 1, '0x00000000000000000000000000000000000000aa'),
                 (${agent.agentId}::uuid, 'transfer', ${newKey()}, 'test', 2, '0x00000000000000000000000000000000000000aa')
          returning action_id`,
    );
    const [first, second] = inserted.map((row) => row.action_id) as [string, string];
    expect([await eventIdOf(first), await eventIdOf(second)]).toEqual([
      (power - 1n).toString(),
      power.toString(),
    ]);
    const stream = followEvents({ url: eventsUrl("?after=0"), token: agent.token });
    try {
      await stream.waitForCount(2);
      expect(stream.events.map((event) => event.body.data.action_id)).toEqual([first, second]);
    } finally {
      stream.close();
    }
  });

  it("?wait= answers as soon as the action's status changes, or when the wait ends", async () => {
    const agent = await stack.newAgent();
    const headers = { authorization: `Bearer ${agent.token}` };
    const url = (id: string, wait: string) => `${stack.origin.base}/agent/v1/actions/${id}?wait=${wait}`;
    const id = await insertAction(agent);

    let started = Date.now();
    const unchanged = await send(url(id, "1"), { headers });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect((unchanged.body as ActionView).status).toBe("requested");

    const waiting = send(url(id, "20"), { headers }).then((answer) => ({ answer, at: Date.now() }));
    // The request read `requested` and waits: only the change below can answer it before 20 s.
    await waitsHeld(1);
    const changedAt = Date.now();
    await db().execute(
      sql`update agent_actions set status = 'held', hold_rule = 'approval' where action_id = ${id}::uuid`,
    );
    const { answer: changed, at } = await waiting;
    expect(changed.status).toBe(200);
    expect((changed.body as ActionView).status).toBe("held");
    expect(at).toBeGreaterThanOrEqual(changedAt);
    expect(at - changedAt).toBeLessThan(3_000);

    // A terminal action answers at once.
    await db().execute(sql`update agent_actions set status = 'rejected' where action_id = ${id}::uuid`);
    started = Date.now();
    expect((await send(url(id, "30"), { headers })).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1_000);

    for (const bad of ["31", "-1", "abc", "1.5", ""]) {
      const answer = await send(url(id, bad), { headers });
      expect(answer.status, `wait=${bad}`).toBe(400);
    }
    // Another agent's action is 404 with or without a wait.
    const other = await stack.newAgent();
    const refused = await send(url(id, "1"), { headers: { authorization: `Bearer ${other.token}` } });
    expect(refused.status).toBe(404);
  });

  it("?wait= waits on through its action's earlier events served late, and answers the change that follows", async () => {
    const agent = await stack.newAgent();
    const headers = { authorization: `Bearer ${agent.token}` };
    // A transaction on the cluster holds the log's horizon back (docs/events.md#order): the
    // action's `requested` and `held` events are written, and served only once it ends.
    const holder = await connect();
    try {
      await holder.query("begin");
      await holder.query("select pg_current_xact_id()");
      const id = await insertAction(agent);
      await db().execute(
        sql`update agent_actions set status = 'held', hold_rule = 'approval' where action_id = ${id}::uuid`,
      );
      // A stream of the agent's, following the same feed: it gets the late events in the read that
      // hands them to the wait, so once it has them the wait has been woken by them.
      const stream = followEvents({ url: eventsUrl("?after=0"), token: agent.token });
      let answeredAt: number | undefined;
      const waiting = send(`${stack.origin.base}/agent/v1/actions/${id}?wait=20`, { headers }).then(
        (answer) => {
          answeredAt = Date.now();
          return answer;
        },
      );
      try {
        await stream.waitForOpen();
        await waitsHeld(1);
        // The horizon moves: `requested` (another status than the `held` the wait read) is served
        // within the feed's poll (a second), before the change that follows.
        await holder.query("commit");
        await stream.waitForCount(2);
        // Woken, the wait reads the action again: it waits on (held once more), or has answered.
        await expect
          .poll(
            async () =>
              answeredAt !== undefined ||
              parsePrometheusText(await stack.origin.deps.metrics.render()).value(
                "origin_events_action_waits",
              ) === 1,
            { timeout: 10_000, interval: 20 },
          )
          .toBe(true);
        const rejectedAt = Date.now();
        await db().execute(sql`update agent_actions set status = 'rejected' where action_id = ${id}::uuid`);
        const answered = await waiting;
        // Mutation: a wait that takes the late `requested` for a change answers `held` before this.
        expect((answered.body as ActionView).status).toBe("rejected");
        expect(answeredAt!).toBeGreaterThanOrEqual(rejectedAt);
        expect(answeredAt! - rejectedAt).toBeLessThan(3_000);
      } finally {
        stream.close();
      }
    } finally {
      await holder.end();
    }
  });

  it("the retention sweep deletes events older than the retention and nothing else", async () => {
    const agent = await stack.newAgent();
    const marker = randomBytes(6).toString("hex");
    await db().execute(sql`insert into events (agent_id, type, occurred_at, data) values
      (${agent.agentId}::uuid, 'action.requested', now() - interval '31 days', ${JSON.stringify({ marker, age: "old" })}::jsonb),
      (${agent.agentId}::uuid, 'action.requested', now() - interval '29 days', ${JSON.stringify({ marker, age: "kept" })}::jsonb),
      (${agent.agentId}::uuid, 'action.requested', now(), ${JSON.stringify({ marker, age: "new" })}::jsonb)`);
    const deleted = await sweepExpiredEvents(db(), 30);
    expect(deleted).toBeGreaterThanOrEqual(1);
    const left = await queryRows<{ age: string }>(
      db(),
      sql`select data->>'age' as age from events where data->>'marker' = ${marker} order by id`,
    );
    expect(left.map((row) => row.age)).toEqual(["kept", "new"]);
  });
});
