/**
 * `npm run bench:console`: how long the console's overview takes to load on a node with a history
 * (docs/performance.md, "The console's overview"). An embedded Postgres is seeded set-based
 * (INSERT … SELECT generate_series) with IDENTITIES identities and ACTIONS actions spread over 30
 * days, with settlements, findings, admission attempts and free keys beside them; the origin
 * (origin/main.ts) runs as its own process on it. One load is what the page does: the HTML, then
 * its stylesheet and scripts together, then the API calls it makes together; the figure is the
 * wall time of the whole. Goal: the median under 300 ms. Prints each call's median too, and the
 * CPU steal (this machine is shared).
 */
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { CONSOLE_PAGE_SCRIPTS } from "../origin/openapi/console-operations.ts";
import { freePort } from "../testing/free-port.ts";
import { startStealMeter } from "../testing/measure/cpu-steal.ts";
import { figureBeside } from "../testing/measure/goal-figure.ts";
import { median, quantile } from "../testing/measure/stats.ts";
import { spawnOrigin } from "../testing/origin-process.ts";
import { startOwnPostgres } from "../testing/own-postgres.ts";
import { seedFreeKeys } from "../testing/seed.ts";

const IDENTITIES = Number(process.env.BENCH_IDENTITIES ?? 10_000);
const ACTIONS = Number(process.env.BENCH_ACTIONS ?? 100_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 50);
const GOAL_MS = 300;
/** The actions' history: 30 days, so the last hour holds about 1/720 of them. */
const HISTORY_SECONDS = 30 * 86_400;

const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** What the page loads: its assets, then the API calls console.js makes on opening. */
const ASSETS = [
  "/assets/console.css",
  ...CONSOLE_PAGE_SCRIPTS.map((name) => `/assets/${name}`),
  "/assets/console.js",
];
const API_CALLS = ["/registration", "/operations", "/audit", "/webhooks", "/overview/charts"];

type Db = Awaited<ReturnType<typeof startOwnPostgres>>["database"]["handle"]["db"];

async function seed(db: Db): Promise<void> {
  const step = HISTORY_SECONDS / ACTIONS;
  await db.execute(sql`
    insert into agent_identities (assigned_wallet, agent_transfer_key_ref, capabilities, origin, created_at)
    select '0x' || lpad(to_hex(g), 40, '0'), lpad(to_hex(g), 64, '0'), array['read','transfer']::text[],
           case when g % 4 = 0 then 'operator' else 'public' end,
           now() - make_interval(secs => g * ${HISTORY_SECONDS / IDENTITIES}::float8)
    from generate_series(1, ${IDENTITIES}::int) g`);
  await db.execute(sql`
    insert into registration_issued (agent_id, ip_group, issued_at)
    select agent_id, 'group-' || (abs(hashtext(agent_id::text)) % 2000), created_at
    from agent_identities where origin = 'public'`);
  await db.execute(sql`
    with ids as (select agent_id, row_number() over (order by agent_id) as n from agent_identities)
    insert into agent_actions (agent_id, kind, idempotency_key, request_hash, status, amount_units, created_at, updated_at)
    select ids.agent_id, (array['faucet','transfer','x402'])[1 + g % 3], 'bench-' || g, md5(g::text),
           (array['confirmed','confirmed','confirmed','failed','submitted'])[1 + g % 5], 1000,
           now() - make_interval(secs => g * ${step}::float8),
           now() - make_interval(secs => g * ${step}::float8) + make_interval(secs => 1 + g % 7)
    from generate_series(1, ${ACTIONS}::int) g join ids on ids.n = 1 + g % ${IDENTITIES}::int`);
  await db.execute(sql`
    insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
                                  valid_after, valid_before, signature, status, created_at, updated_at)
    select '0x' || lpad(to_hex(g), 40, '0'), '0x' || lpad(to_hex(g), 64, '0'), '0x' || repeat('ab', 20), 1000,
           md5(g::text), md5(g::text), 0, 4000000000, '0x' || repeat('cd', 65),
           case when g % 10 = 0 then 'failed' else 'settled' end,
           now() - make_interval(secs => g * ${HISTORY_SECONDS / (ACTIONS / 10)}::float8),
           now() - make_interval(secs => g * ${HISTORY_SECONDS / (ACTIONS / 10)}::float8) + interval '2 seconds'
    from generate_series(1, ${ACTIONS / 10}::int) g`);
  await db.execute(sql`
    insert into identity_findings (agent_id, class, code, at)
    select agent_id, (array['retryable','terminal_unknown','terminal_agent'])[1 + n % 3], 'bench',
           now() - make_interval(secs => n * 600)
    from (select agent_id, row_number() over (order by agent_id) as n from agent_identities limit 2000) f`);
  // Two days of admission attempts, all groups and a few groups of their own.
  await db.execute(sql`
    insert into registration_attempts (minute, ip_group, count)
    select date_trunc('minute', now()) - make_interval(mins => m), grp, 1 + m % 5
    from generate_series(0, 2879) m, (values ('*'), ('group-1'), ('group-2')) as groups(grp)`);
  await seedFreeKeys(db, 300);
  await db.execute(sql`analyze`);
}

async function timed(url: string, headers: Record<string, string>): Promise<number> {
  const started = performance.now();
  const response = await fetch(url, { headers });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`${url} answered ${response.status}`);
  return performance.now() - started;
}

async function main(): Promise<void> {
  say(`bench:console — ${IDENTITIES} identities, ${ACTIONS} actions over 30 days; ${ROUNDS} overview loads`);
  const postgres = await startOwnPostgres();
  let origin: Awaited<ReturnType<typeof spawnOrigin>> | undefined;
  try {
    const seeding = performance.now();
    await seed(postgres.database.handle.db);
    say(`seeded in ${((performance.now() - seeding) / 1000).toFixed(1)} s`);
    const adminToken = randomBytes(32).toString("hex");
    origin = await spawnOrigin({
      port: await freePort(),
      env: {
        DATABASE_URL: postgres.database.url,
        AGENT_ADMIN_API_TOKEN: adminToken,
        AGENT_REGISTRATION_ADMIN_SECRET: randomBytes(32).toString("hex"),
        LOG_LEVEL: "warn",
      },
    });
    const page = `${origin.base}/admin/agents`;
    const headers = { "x-admin-api-token": adminToken };
    const load = async (): Promise<{ total: number; calls: number[] }> => {
      const started = performance.now();
      await timed(page, {});
      await Promise.all(ASSETS.map((asset) => timed(page + asset, {})));
      const calls = await Promise.all(API_CALLS.map((call) => timed(page + call, headers)));
      return { total: performance.now() - started, calls };
    };
    // Warm: the origin's first requests compile its handlers and fill Postgres's caches.
    for (let i = 0; i < 3; i++) await load();

    const steal = await startStealMeter();
    const totals: number[] = [];
    const perCall: number[][] = API_CALLS.map(() => []);
    for (let i = 0; i < ROUNDS; i++) {
      const { total, calls } = await load();
      totals.push(total);
      for (const [j, ms] of calls.entries()) perCall[j]!.push(ms);
    }
    const sorted = [...totals].sort((a, b) => a - b);
    say("API calls (median, the page makes them together):");
    for (const [j, call] of API_CALLS.entries())
      say(`  ${call.padEnd(18)} ${median(perCall[j]!).toFixed(1)} ms`);
    const mid = median(totals);
    say(`overview load: median ${mid.toFixed(1)} ms, p99 ${quantile(sorted, 0.99).toFixed(1)} ms`);
    say(await steal());
    say(
      `goal: the overview loads in under ${GOAL_MS} ms (median): ${mid < GOAL_MS ? "met" : "not met"} (${figureBeside(mid, GOAL_MS, 1)} ms)`,
    );
  } finally {
    await origin?.stop();
    await postgres.database.drop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
