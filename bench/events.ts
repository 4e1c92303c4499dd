/**
 * `npm run bench:events`: what open event streams cost the origin (docs/performance.md, "Event
 * streams"), in one run:
 *   - the origin's resident memory with no stream open (the baseline), then with STREAMS streams
 *     open (AGENTS agents, STREAMS / AGENTS each), idle, then after every stream was handed
 *     EVENTS_PER_AGENT events of its agent. Goal: at most 64 KiB per open stream.
 *   - how long an event takes from the statement that writes it to the last of its agent's streams, p50 and p99 over
 *     the run's events (the feed reads on the NOTIFY; its fallback poll is 1 s).
 * Postgres, the devnet, the enclave and the origin (origin/main.ts) are processes of their own; this
 * process holds the streams, each a plain HTTP request whose SSE it reads by hand (an EventSource
 * per stream would weigh on this process, not the origin).
 */
import { randomUUID } from "node:crypto";
import { Agent, type IncomingMessage, request } from "node:http";
import { sql } from "drizzle-orm";
import { queryRows } from "../origin/db/client.ts";
import { sleep } from "../shared/sleep.ts";
import { freePort } from "../testing/free-port.ts";
import { startStealMeter } from "../testing/measure/cpu-steal.ts";
import { figureBeside } from "../testing/measure/goal-figure.ts";
import { residentBytes } from "../testing/measure/proc-memory.ts";
import { median, quantile } from "../testing/measure/stats.ts";
import { startMoneyStack } from "../testing/money-stack.ts";
import { spawnOrigin } from "../testing/origin-process.ts";
import { startOwnPostgres } from "../testing/own-postgres.ts";

const AGENTS = Number(process.env.BENCH_AGENTS ?? 50);
const STREAMS = Number(process.env.BENCH_STREAMS ?? 1_000);
const EVENTS_PER_AGENT = Number(process.env.BENCH_EVENTS ?? 20);
const GOAL_BYTES_PER_STREAM = 64 * 1024;
const MIB = 1024 * 1024;

const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

type OpenStream = {
  agentId: string;
  /** When each event id arrived (ms, performance.now()). */
  arrived: Map<string, number>;
  response: IncomingMessage;
};

/** Opens one SSE stream and notes each event's id as it arrives. */
function openStream(url: string, token: string, agentId: string, agent: Agent): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      agent,
      headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
    });
    req.on("error", reject);
    req.on("response", (response) => {
      if (response.statusCode !== 200) {
        reject(new Error(`the stream answered ${response.statusCode}`));
        return;
      }
      const stream: OpenStream = { agentId, arrived: new Map(), response };
      let buffer = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        buffer += chunk;
        let end = buffer.indexOf("\n\n");
        while (end >= 0) {
          const id = /^id: ?(\d+)$/m.exec(buffer.slice(0, end))?.[1];
          if (id) stream.arrived.set(id, performance.now());
          buffer = buffer.slice(end + 2);
          end = buffer.indexOf("\n\n");
        }
      });
      resolve(stream);
    });
    req.end();
  });
}

async function main(): Promise<void> {
  const perAgent = Math.ceil(STREAMS / AGENTS);
  say(
    `bench:events — ${STREAMS} streams (${AGENTS} agents, ${perAgent} each), ${EVENTS_PER_AGENT} events per agent`,
  );
  const postgres = await startOwnPostgres();
  const stack = await startMoneyStack({ database: postgres.database, inProcessOrigin: false });
  const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  const streams: OpenStream[] = [];
  let origin: Awaited<ReturnType<typeof spawnOrigin>> | undefined;
  try {
    say("setting up: agents…");
    // Before the origin starts: its key-pool refill would otherwise claim keys the stack's agent
    // factory is handing out.
    const agents = await stack.newAgents(AGENTS);
    const running = await spawnOrigin({
      // A port of its own: readiness is /healthz answering, whatever the log level.
      port: await freePort(),
      env: stack.processEnv({ AGENT_EVENTS_STREAMS_PER_TOKEN: String(perAgent), LOG_LEVEL: "warn" }),
    });
    origin = running;
    const db = postgres.database.handle.db;
    const insertActions = async (count: number): Promise<void> => {
      const values = agents.flatMap((each) =>
        Array.from(
          { length: count },
          () => sql`(${each.agentId}::uuid, 'transfer', ${randomUUID()}, 'bench', 1000,
            '0x00000000000000000000000000000000000000aa')`,
        ),
      );
      await db.execute(
        sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address)
            values ${sql.join(values, sql`, `)}`,
      );
    };
    const memory = async (): Promise<number> => {
      // The median of a few samples: the figure moves with the collector's timing.
      const samples: number[] = [];
      for (let i = 0; i < 5; i++) {
        samples.push((await residentBytes({ origin: { pid: running.child.pid, tree: false } })).origin ?? 0);
        await sleep(500);
      }
      return median(samples);
    };

    // The origin's code warmed on a stream's whole path before the baseline: one stream opened,
    // fed and closed per agent.
    await insertActions(1);
    const warm = await Promise.all(
      agents.map((each) =>
        openStream(`${running.base}/agent/v1/events?after=0`, each.token, each.agentId, agent),
      ),
    );
    await sleep(1_500);
    for (const each of warm) each.response.destroy();
    await sleep(1_000);
    const steal = await startStealMeter();
    const baseline = await memory();

    say(`opening ${STREAMS} streams…`);
    for (let i = 0; i < STREAMS; i++) {
      const owner = agents[i % AGENTS]!;
      streams.push(await openStream(`${running.base}/agent/v1/events`, owner.token, owner.agentId, agent));
    }
    await sleep(1_000);
    const open = await memory();

    say(`writing ${EVENTS_PER_AGENT} events per agent…`);
    const written = new Map<string, number>();
    for (let i = 0; i < EVENTS_PER_AGENT; i++) {
      const before = await queryRows<{ id: string }>(
        db,
        sql`select coalesce(max(id), 0)::text as id from events`,
      );
      const startedAt = performance.now();
      await insertActions(1);
      const ids = await queryRows<{ id: string }>(
        db,
        sql`select id::text as id from events where id > ${before[0]!.id}::bigint`,
      );
      for (const row of ids) written.set(row.id, startedAt);
      await sleep(100);
    }
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; ) {
      if (streams.every((stream) => stream.arrived.size >= EVENTS_PER_AGENT)) break;
      await sleep(100);
    }
    const short = streams.filter((stream) => stream.arrived.size < EVENTS_PER_AGENT).length;
    if (short > 0) throw new Error(`${short} streams got fewer than ${EVENTS_PER_AGENT} events in 30 s`);
    const fed = await memory();
    const stolen = await steal();

    // Each event's time to the last stream of its agent that got it.
    const latencies: number[] = [];
    for (const [id, startedAt] of written) {
      let last = 0;
      for (const stream of streams) {
        const at = stream.arrived.get(id);
        if (at !== undefined && at > last) last = at;
      }
      if (last > 0) latencies.push(last - startedAt);
    }
    latencies.sort((a, b) => a - b);

    const perStream = (open - baseline) / STREAMS;
    say(stolen);
    say("");
    say("| measure | figure |");
    say("|---|---|");
    say(`| baseline: origin resident memory, no stream open | ${(baseline / MIB).toFixed(1)} MiB |`);
    say(
      `| with ${STREAMS} streams open, idle | ${(open / MIB).toFixed(1)} MiB (+${(perStream / 1024).toFixed(1)} KiB per stream) |`,
    );
    say(
      `| after ${EVENTS_PER_AGENT * STREAMS} events handed on | ${(fed / MIB).toFixed(1)} MiB (+${((fed - baseline) / STREAMS / 1024).toFixed(1)} KiB per stream) |`,
    );
    say(
      `| commit to the last stream of its agent, p50 / p99 | ${quantile(latencies, 0.5).toFixed(1)} / ${quantile(latencies, 0.99).toFixed(1)} ms |`,
    );
    say("");
    const worst = Math.max(perStream, (fed - baseline) / STREAMS);
    say(
      `goal at most ${GOAL_BYTES_PER_STREAM / 1024} KiB of origin memory per open stream: ${worst <= GOAL_BYTES_PER_STREAM ? "met" : "not met"} (${figureBeside(worst / 1024, GOAL_BYTES_PER_STREAM / 1024, 1)} KiB, the larger of idle and fed)`,
    );
  } finally {
    for (const stream of streams) stream.response.destroy();
    agent.destroy();
    await origin?.stop();
    await stack.close();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(
      `bench:events: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
