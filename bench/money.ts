/**
 * `npm run bench:money`: what money movement through the service costs, beside the chain alone,
 * in one run (docs/performance.md, "Money"):
 *   - transfers per second to `confirmed` with AGENTS agents, each sending back to back through
 *     the gateway (POST /transfers, answered once the transfer is signed and stored; the origin
 *     then broadcasts it and records its receipt), against plain signed transfers from AGENTS
 *     accounts sent straight to the devnet (eth_sendRawTransaction, which answers once mined, back
 *     to back). A phase ends when every transfer it sent is `confirmed`. Goal: ≥ 0.9× the
 *     straight rate.
 *   - the same through the gateway with a spending policy on every agent (docs/agents.md#your-spending-policy:
 *     every budget and rule set, none reached), AGENTS other agents: the cost of the policy's read
 *     and checks under the batch's lock and of the enclave's re-check. Goal: within 10 % of the
 *     rate without policies, measured beside it.
 *   - the same with the event log's triggers off (docs/events.md: each state change writes its
 *     event in the same transaction): what events cost the money path. Goal: with events on ≥ 0.9×
 *     the rate with them off, measured beside it.
 *   - the same with a webhook endpoint subscribed to every action event whose receiver accepts the
 *     connection and never answers: a hanging receiver must not slow the money path. Goal: within 5 %
 *     of the rate without it, measured beside it.
 *   - faucet payout latency to `confirmed`, p50 and p99, from the POST to the first GET
 *     /actions/{id} that reads `confirmed`.
 * With BENCH_GROW=1 it measures instead how the cost of a transfer grows with the clients sending
 * at once (bench/grow.ts): 1, 8, 32 and 128 clients through the gateway, each level on agents of
 * its own, with BENCH_GROW_IDLE_AGENTS (10,000) more agents in the database that never send.
 * The devnet, the enclave and the origin (origin/main.ts) run as their own processes; this process
 * sets the stack up and drives load. Each group of phases runs straight, then the gateway, then each
 * variant (policies, events off, a hanging receiver) beside a gateway phase of its own, the variant
 * first in odd groups and second in even ones; each ratio is taken between neighbours, since this
 * shared VM's speed drifts within a group; the CPU steal of the run is printed, and beside each
 * phase's CPU the tables Postgres's autovacuum worked on during it, which that CPU includes.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { Agent, type RequestOptions, request } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { type Hex, parseGwei } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { postmasterPid } from "../dev/local-stack.ts";
import { payFromOperatorPool } from "../dev/operator-pool.ts";
import { DEV_OPERATOR_POOL_ADDRESS } from "../devnet/constants.ts";
import { createRestoreDriller, type RestoreDriller } from "../ops/lib/restore-driller.ts";
import {
  cpuProfileArgs,
  httpOk,
  profiledProgram,
  startChild,
  waitUntilReady,
} from "../ops/lib/supervisor.ts";
import { connectDatabase, queryRows } from "../origin/db/client.ts";
import { startEmbeddedPostgres } from "../origin/db/embedded.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";
import { changeAgentPolicy } from "../origin/policy/change.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import { addEndpoint, removeEndpoint } from "../origin/webhooks/endpoints.ts";
import { ensureWebhookSigningKeyFile } from "../origin/webhooks/signing.ts";
import type { AgentPolicyDocument } from "../shared/agent-policy.ts";
import { CHAIN_ID, WEI_PER_UNIT } from "../shared/constants.ts";
import { ACTION_EVENT_TYPES } from "../shared/event-types.ts";
import { sleep } from "../shared/sleep.ts";
import { makeAgents, type StackAgent } from "../testing/agent-factory.ts";
import { createEnclaveFixture } from "../testing/enclave-process.ts";
import { freePort } from "../testing/free-port.ts";
import { watchAutovacuum } from "../testing/measure/autovacuum.ts";
import { startStealMeter } from "../testing/measure/cpu-steal.ts";
import { figureBeside } from "../testing/measure/goal-figure.ts";
import {
  PG_STATEMENTS_SETTINGS,
  phaseStatements,
  statementsToShow,
} from "../testing/measure/pg-statements.ts";
import { cpuDelta, treeCpuSeconds } from "../testing/measure/proc-cpu.ts";
import { median, quantile } from "../testing/measure/stats.ts";
import { spawnOrigin } from "../testing/origin-process.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../testing/webhook-receiver.ts";
import { growing, growLevels, type LevelRun, levelName, measureLevels, printGrowth } from "./grow.ts";
import { seedIdleAgents } from "./seed-agents.ts";

const AGENTS = Number(process.env.BENCH_AGENTS ?? 32);
/** Every transfer rule set, none reached by the run (the figures far above what it moves). */
const BENCH_POLICY: AgentPolicyDocument = {
  transfers: {
    per_tx_units: "1000000000000",
    daily_units: "1000000000000000",
    monthly_units: "1000000000000000",
    daily_count: 10_000_000,
    deny: ["0x000000000000000000000000000000000000dead"],
  },
  approval_above_units: "1000000000000",
};
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const PAIRS = Number(process.env.BENCH_PAIRS ?? 3);
const FAUCET_SAMPLES = Number(process.env.BENCH_FAUCET_SAMPLES ?? 100);
/**
 * Seconds of each phase run unmeasured first: the processes' code is still being optimised by the
 * JIT for thousands of requests (after a 1 s warm-up the origin's CPU per transfer kept falling).
 */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 5);
/** Transfers signed ahead per straight account for a phase of `seconds`: more than it can send. */
const presignCount = (seconds: number): number =>
  Number(process.env.BENCH_PRESIGN ?? Math.ceil((seconds * 2_500) / AGENTS));
const AMOUNT_UNITS = 1_000n;
/** BENCH_PG_STATEMENTS=<n>: the gateway phases' n costliest statements (docs/development.md). */
const SHOW_STATEMENTS = statementsToShow();
/** A growing run (bench/grow.ts) and its levels of concurrent clients. */
const GROW = growing();
const GROW_LEVELS = GROW ? growLevels() : [];
/** Agents in the database of a growing run besides those that send: a service's tables, not a test's. */
const IDLE_AGENTS = Number(process.env.BENCH_GROW_IDLE_AGENTS ?? 10_000);
/**
 * A growing run's agents per level: each client cycles through its share of at least this many,
 * since one agent may send 600 requests a minute (docs/api.md#rate-limits) and one client alone
 * sends more than that in a phase.
 */
const GROW_MIN_AGENTS = 16;
const growShare = (clients: number): number => Math.ceil(GROW_MIN_AGENTS / clients);
const FEES = { maxFeePerGas: parseGwei("3"), maxPriorityFeePerGas: parseGwei("1"), gas: 21_000n };

const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

type Answer = { status: number; body: string };
type Post = (url: string, body: string, headers?: Record<string, string>) => Promise<Answer>;

/** Requests sent again by send() (printed: a run that needed many would say so). */
let resent = 0;

/**
 * One HTTP request on a kept-alive connection. A connection the server closed for idleness just as
 * this request was put on it fails with ECONNRESET before the server read anything (the race Node's
 * docs describe for `reusedSocket`); such a request is sent once more, on a new connection. Were it
 * read after all, repeating it is still safe: the gateway's requests carry idempotency keys, GETs
 * read, and a raw transaction sent twice is one transaction (a refusal of the second would stop the
 * run, not be counted).
 */
function send(agent: Agent, url: string, options: RequestOptions, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ...options, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    req.on("error", (error: NodeJS.ErrnoException) => {
      if (req.reusedSocket && error.code === "ECONNRESET") {
        resent++;
        send(agent, url, options, body).then(resolve, reject);
      } else reject(new Error(`${options.method ?? "GET"} ${url}: ${error.message}`, { cause: error }));
    });
    req.end(body);
  });
}

function poster(): Post {
  const agent = new Agent({ keepAlive: true, maxSockets: 1024 });
  return (url, body, headers = {}) =>
    send(agent, url, { method: "POST", headers: { "content-type": "application/json", ...headers } }, body);
}

function getter(): (url: string, headers: Record<string, string>) => Promise<Answer> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1024 });
  return (url, headers) => send(agent, url, { headers });
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), "bench-money-"));
  await chmod(dir, 0o755);
  const postgres = await startEmbeddedPostgres({
    dir: path.join(dir, "pg"),
    port: await freePort(),
    settings: SHOW_STATEMENTS === undefined ? undefined : { ...PG_STATEMENTS_SETTINGS },
  });
  const database = connectDatabase({ url: postgres.url, maxConnections: 4 });
  await migrateDatabase(database.db);
  const statements = await phaseStatements(postgres.url, SHOW_STATEMENTS);
  const autovacuum = await watchAutovacuum(postgres.url);
  const devnetPort = await freePort();
  const devnetUrl = `http://127.0.0.1:${devnetPort}`;
  const quiet = () => {};
  const devnet = startChild({
    name: "devnet",
    entry: "devnet/main.ts",
    // BENCH_CPU_PROF=<dir>: the devnet, the enclave and the origin each write a CPU profile there.
    ...profiledProgram("devnet/main.ts"),
    args: ["--port", String(devnetPort)],
    onLine: quiet,
  });
  const enclave = await createEnclaveFixture({ envId: "bench-money", nodeArgs: cpuProfileArgs() });
  const signer = createSignerClient({ endpoint: `unix://${enclave.socketPath}`, liveIdentityEnabled: true });
  let origin: Awaited<ReturnType<typeof spawnOrigin>> | undefined;
  let driller: RestoreDriller | undefined;
  let receiver: WebhookReceiver | undefined;
  try {
    await waitUntilReady(devnet, () =>
      httpOk(devnetUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}',
      }),
    );
    if (GROW) {
      say(
        `bench:money, growing — ${GROW_LEVELS.join(", ")} concurrent clients, ${SECONDS}-second phases, ${IDLE_AGENTS} idle agents in the database`,
      );
    } else {
      say(
        `bench:money — ${AGENTS} agents; ${PAIRS} groups of ${SECONDS}-second phases (straight, gateway, with policies, events off, hanging receiver); ${FAUCET_SAMPLES} faucet payouts`,
      );
    }
    say("setting up: policy, treasury, keys, drill, identities, funding…");
    const minter = (secret: Uint8Array) =>
      createCapabilityMinter({ authority: secret, envId: enclave.envId, client: signer });
    const limit = 1_000_000_000_000n;
    const policy = await signer.configurePolicy(
      {
        perTxLimitUnits: limit,
        dailyLimitUnits: limit,
        recipientAllowlist: null,
        x402AmountUnits: null,
        x402PayTo: null,
        x402MaxTimeoutSeconds: 180,
        operatorPool: DEV_OPERATOR_POOL_ADDRESS,
        feeCeilingWei: 10n ** 15n,
        x402ValidityMarginSeconds: 6,
        x402DailyLimit: 1_000,
        settlerDailyFeeUnits: limit,
      },
      minter(enclave.policySecret),
    );
    if (!policy.ok) throw new Error(`configure_policy: ${policy.error.code}`);
    // The origin below is given the same payout terms (AGENT_FAUCET_*), as it requires.
    const treasury = await signer.configureTreasury(
      { budgetUnits: limit, payoutUnits: 1_000n, cooldownMs: 0, dailyLimitUnits: limit },
      minter(enclave.policySecret),
    );
    if (!treasury.ok) throw new Error(`configure_treasury: ${treasury.error.code}`);
    await payFromOperatorPool(devnetUrl, treasury.value.faucetAddress, 100_000n * 1_000_000n * WEI_PER_UNIT);
    const identity = await signer.getSealedIdentity();
    if (!identity.ok) throw new Error(`get_sealed_identity: ${identity.error.code}`);
    driller = createRestoreDriller({
      identity: identity.value,
      recoveryAuthority: enclave.recoverySecret,
      recoveryEncryptionKey: enclave.recoveryEncKey,
    });
    const agentDeps = {
      db: database.db,
      signer,
      authorities: { admin: minter(enclave.adminSecret) },
      driller,
      devnetUrl,
      envId: enclave.envId,
      backupDir: path.join(dir, "backups"),
    };
    const agents: StackAgent[] = await makeAgents(agentDeps, AGENTS, { units: 1_000_000_000n });
    // As many agents again, each with a policy that sets every transfer rule and reaches none,
    // sealed in the enclave and stored as the origin would (origin/policy/change.ts).
    const governed: StackAgent[] = GROW ? [] : await makeAgents(agentDeps, AGENTS, { units: 1_000_000_000n });
    // Agents of their own for the phases with events off and with the hanging receiver: each agent
    // may send 600 requests a minute (docs/api.md#rate-limits), which one set would pass across
    // a group's phases.
    const quiet: StackAgent[] = GROW ? [] : await makeAgents(agentDeps, AGENTS, { units: 1_000_000_000n });
    const hooked: StackAgent[] = GROW ? [] : await makeAgents(agentDeps, AGENTS, { units: 1_000_000_000n });
    // And for the gateway phase beside each of the three variants (`beside`, below), for the same reason.
    const neighbours: StackAgent[][] = GROW
      ? []
      : [
          await makeAgents(agentDeps, AGENTS, { units: 1_000_000_000n }),
          await makeAgents(agentDeps, AGENTS, { units: 1_000_000_000n }),
          await makeAgents(agentDeps, AGENTS, { units: 1_000_000_000n }),
        ];
    // A growing run's agents: each level's of its own (its clients' shares), made in one batch.
    const growAgents: StackAgent[] = GROW
      ? await makeAgents(
          agentDeps,
          GROW_LEVELS.reduce((sum, clients) => sum + clients * growShare(clients), 0),
          { units: 1_000_000_000n },
        )
      : [];
    if (GROW) {
      // Set-based, in one statement: what the origin's reads and locks meet in a service's tables.
      say(`seeding ${IDLE_AGENTS} idle agents…`);
      await seedIdleAgents(database.db, IDLE_AGENTS);
      await database.db.execute(sql`analyze`);
    }
    for (const agent of governed) {
      const changed = await changeAgentPolicy(
        { db: database.db, signer, authorize: minter(enclave.adminSecret), nodePayee: null },
        { agent, next: BENCH_POLICY, changedBy: { by: "admin" } },
      );
      if (!changed.ok) throw new Error(`set_agent_policy: ${changed.error.code}`);
    }
    const straightAccounts = Array.from({ length: AGENTS }, () => privateKeyToAccount(generatePrivateKey()));
    for (const account of straightAccounts) {
      await payFromOperatorPool(devnetUrl, account.address, 1_000_000_000n * WEI_PER_UNIT);
    }
    // A receiver that takes each delivery's connection and never answers: the origin's delivery
    // worker waits out its timeout (AGENT_WEBHOOKS_TIMEOUT_MS) on each, then retries.
    receiver = await startWebhookReceiver();
    receiver.answer = () => "hang";
    const webhookKeyFile = path.join(dir, "webhook-signing.key");
    await ensureWebhookSigningKeyFile(webhookKeyFile);
    origin = await spawnOrigin({
      port: await freePort(),
      // Other node options for the origin alone: BENCH_ORIGIN_NODE_ARGS="--max-semi-space-size=64", say.
      nodeArgs: process.env.BENCH_ORIGIN_NODE_ARGS?.split(" ").filter(Boolean) ?? cpuProfileArgs(),
      env: {
        AGENT_GATEWAY_ENABLED: "true",
        DATABASE_URL: postgres.url,
        CHAIN_RPC_URL: devnetUrl,
        LOG_LEVEL: "warn",
        AGENT_FAUCET_ENABLED: "true",
        AGENT_TRANSFER_ENABLED: "true",
        AGENT_FAUCET_PAYOUT_AMOUNT: "1000",
        AGENT_FAUCET_COOLDOWN_MS: "0",
        AGENT_FAUCET_DAILY_LIMIT: limit.toString(),
        AGENT_TRANSFER_PER_TX_LIMIT: limit.toString(),
        AGENT_TRANSFER_DAILY_LIMIT: limit.toString(),
        AGENT_OPERATOR_POOL_ADDRESS: DEV_OPERATOR_POOL_ADDRESS,
        AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
        AGENT_SIGNER_LIVE_IDENTITY_ENABLED: "true",
        AGENT_ENV_ID: enclave.envId,
        AGENT_WEBHOOKS_SIGNING_KEY_FILE: webhookKeyFile,
        // The hanging receiver is on loopback.
        AGENT_WEBHOOKS_ALLOW_PRIVATE: "true",
      },
    });
    const base = origin.base;
    const post = poster();
    const get = getter();
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const nonces = straightAccounts.map(() => 0);
    // Every transfer of the run has a key of its own: a key used before (by the warm-up or an
    // earlier pair) would be answered from its stored action, moving nothing.
    let key = 0;
    /** One transfer through the gateway by the agent holding `token`: its action id. */
    const postTransfer = async (token: string): Promise<string> => {
      const answer = await post(
        `${base}/agent/v1/transfers`,
        JSON.stringify({
          idempotency_key: `bench-${process.pid}-${key++}`,
          to: recipient,
          amount: AMOUNT_UNITS.toString(),
        }),
        { authorization: `Bearer ${token}` },
      );
      if (answer.status !== 202 && answer.status !== 200)
        throw new Error(`transfer answered ${answer.status}: ${answer.body}`);
      return (JSON.parse(answer.body) as { action_id: string }).action_id;
    };

    /**
     * Signs each account's next `perAccount` transfers ahead of the phase, so the phase measures
     * the chain taking them, not this process signing (the gateway's side is signed by the enclave).
     */
    const presign = async (perAccount: number): Promise<Hex[][]> =>
      Promise.all(
        straightAccounts.map(async (account, index) => {
          const signed: Hex[] = [];
          for (let i = 0; i < perAccount; i++) {
            signed.push(
              await account.signTransaction({
                chainId: CHAIN_ID,
                type: "eip1559",
                to: recipient,
                value: AMOUNT_UNITS * WEI_PER_UNIT,
                nonce: nonces[index]!++,
                ...FEES,
              }),
            );
          }
          return signed;
        }),
      );
    /** Each account's signed transfers not sent yet, in nonce order. */
    let presigned: Hex[][] = [];

    /** AGENTS plain transfers in flight at a time, straight to the devnet, for `seconds`. */
    const straight = async (seconds = SECONDS): Promise<{ rate: number; count: number }> => {
      const until = performance.now() + seconds * 1000;
      const started = performance.now();
      let mined = 0;
      await Promise.all(
        presigned.map(async (queue) => {
          while (performance.now() < until && queue.length > 0) {
            const raw = queue.shift()!;
            const answer = await post(
              devnetUrl,
              JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] }),
            );
            if (!answer.body.includes('"result"')) throw new Error(`devnet refused: ${answer.body}`);
            mined++;
          }
        }),
      );
      if (presigned.some((queue) => queue.length === 0))
        say("  (an account ran out of pre-signed transfers: raise BENCH_PRESIGN)");
      // What was signed and not sent never reached the chain: the next phase signs those nonces anew.
      presigned.forEach((queue, index) => {
        nonces[index]! -= queue.length;
      });
      presigned = [];
      return { rate: mined / ((performance.now() - started) / 1000), count: mined };
    };

    /** AGENTS agents sending back to back through the gateway for `seconds`; rate to `confirmed`. */
    const gateway = async (
      seconds = SECONDS,
      senders: readonly StackAgent[] = agents,
    ): Promise<{ rate: number; count: number }> => {
      const until = performance.now() + seconds * 1000;
      const started = performance.now();
      const actions: Array<{ id: string; token: string }> = [];
      await Promise.all(
        senders.map(async (agent) => {
          while (performance.now() < until) {
            actions.push({
              id: await postTransfer(agent.token),
              token: agent.token,
            });
          }
        }),
      );
      await allConfirmed(actions.map((action) => action.id));
      return { rate: actions.length / ((performance.now() - started) / 1000), count: actions.length };
    };

    /**
     * The rate counts a transfer when it is confirmed: waits for the last one, asking the database
     * (one count) rather than polling every action over HTTP from this process.
     */
    const allConfirmed = async (ids: readonly string[]): Promise<void> => {
      for (;;) {
        const [row] = await queryRows<{ confirmed: number; failed: number }>(
          database.db,
          sql`select count(*) filter (where status = 'confirmed')::int as confirmed,
                count(*) filter (where status in ('failed', 'reverted'))::int as failed
              from agent_actions where action_id = any(${`{${ids.join(",")}}`}::uuid[])`,
        );
        if (row!.failed > 0) throw new Error(`${row!.failed} transfers failed`);
        if (row!.confirmed === ids.length) break;
        await sleep(10);
      }
    };

    const postmaster = await postmasterPid(path.join(dir, "pg"));
    // Each process alone, except Postgres: its work happens in one child per connection.
    const trees = {
      devnet: { pid: devnet.process.pid, tree: false },
      enclave: { pid: enclave.pid(), tree: false },
      origin: { pid: origin.child.pid, tree: false },
      postgres: { pid: postmaster, tree: true, reaped: true },
      bench: { pid: process.pid, tree: false },
    };
    /** The transfers each named phase completed, over the groups: what its statements are per. */
    const transfersByPhase = new Map<string, number>();
    /**
     * Runs a phase and says how much CPU each process spent per transfer it completed; a phase with a
     * name has its statements counted too (BENCH_PG_STATEMENTS).
     */
    const measured = async (
      phase: () => Promise<{ rate: number; count: number }>,
      name = "",
    ): Promise<{ rate: number; cpu: string }> => {
      // The statements' snapshots outside the CPU's, so that reading them is not the phase's CPU.
      const run = async () => {
        const before = await treeCpuSeconds(trees);
        const { value: done, tables } = await autovacuum.during(phase);
        return { ...done, tables, spent: cpuDelta(before, await treeCpuSeconds(trees)) };
      };
      const { rate, count, spent, tables } = name ? await statements.during(name, run) : await run();
      if (name) transfersByPhase.set(name, (transfersByPhase.get(name) ?? 0) + count);
      const cpu = Object.entries(spent)
        .filter(([, seconds]) => seconds > 0)
        .map(([name, seconds]) => `${name} ${((seconds * 1000) / count).toFixed(2)}`)
        .join(", ");
      // Postgres's own maintenance in the phase, which its CPU includes (testing/measure/autovacuum.ts).
      const maintenance = tables.length > 0 ? `; autovacuum: ${tables.join(", ")}` : "";
      return { rate, cpu: `CPU ms per transfer: ${cpu}${maintenance}` };
    };
    /**
     * The gateway's phase with the event log's triggers off: the two on agent_actions that write
     * its events (migrations 0016, 0019), by name; the counts by state keep theirs (migration 0032).
     */
    const withoutEvents = async (): Promise<{ rate: number; count: number }> => {
      await database.db.execute(
        sql`alter table agent_actions disable trigger agent_actions_events_insert, disable trigger agent_actions_events_update`,
      );
      try {
        return await gateway(SECONDS, quiet);
      } finally {
        await database.db.execute(
          sql`alter table agent_actions enable trigger agent_actions_events_insert, enable trigger agent_actions_events_update`,
        );
      }
    };
    /** The gateway's phase with an endpoint on the hanging receiver for every action event. */
    const withHangingReceiver = async (): Promise<{ rate: number; count: number }> => {
      const endpoint = await addEndpoint(database.db, {
        url: `${receiver!.url}/hooks`,
        events: ACTION_EVENT_TYPES,
      });
      try {
        return await gateway(SECONDS, hooked);
      } finally {
        // Its deliveries go with it; those already hanging end at the origin's timeout.
        await removeEndpoint(database.db, endpoint.id);
      }
    };
    if (GROW) {
      say(`warming up: ${WARMUP} s through the gateway, ${AGENTS} agents…`);
      await gateway(WARMUP);
      const steal = await startStealMeter();
      /** `clients` clients sending back to back through the gateway, each cycling through its agents. */
      const level = async (clients: number): Promise<LevelRun> => {
        const share = growShare(clients);
        const mine = growAgents.splice(0, clients * share);
        const until = performance.now() + SECONDS * 1000;
        const started = performance.now();
        const ids: string[] = [];
        const latenciesMs: number[] = [];
        await Promise.all(
          Array.from({ length: clients }, async (_, client) => {
            for (let n = 0; performance.now() < until; n++) {
              const agent = mine[client * share + (n % share)]!;
              const sent = performance.now();
              const id = await postTransfer(agent.token);
              latenciesMs.push(performance.now() - sent);
              ids.push(id);
            }
          }),
        );
        await allConfirmed(ids);
        return { count: ids.length, latenciesMs, elapsedMs: performance.now() - started };
      };
      say("levels (wall and rate to confirmed; p50 of the POST, answered once signed and stored):");
      // A level's statements (BENCH_PG_STATEMENTS) are read inside its CPU figures: a few ms of
      // Postgres's CPU a level, against seconds.
      const costs = await measureLevels(
        GROW_LEVELS,
        trees,
        (clients) => statements.during(levelName(clients), () => level(clients)),
        say,
      );
      say(await steal());
      if (resent > 0) say(`requests sent again after a kept-alive connection closed under them: ${resent}`);
      printGrowth(`bench:money, transfers to confirmed, ${IDLE_AGENTS} idle agents`, "transfer", costs, say);
      for (const cost of costs) {
        const lines = statements.describe(levelName(cost.clients), cost.count, "transfer");
        if (lines.length > 0) say(`  ${levelName(cost.clients)}, statements:`);
        for (const line of lines) say(line);
      }
      return;
    }
    say(`warming up: ${WARMUP} s straight, ${WARMUP} s through the gateway…`);
    presigned = await presign(presignCount(WARMUP));
    await straight(WARMUP);
    await gateway(WARMUP);
    await gateway(WARMUP, governed);
    await gateway(WARMUP, quiet);
    await gateway(WARMUP, hooked);
    for (const neighbour of neighbours) await gateway(WARMUP, neighbour);
    const steal = await startStealMeter();
    /** A variant's rate and the gateway's, measured side by side (see `beside`). */
    type Beside = { rate: number; gateway: number };
    const pairs: Array<{
      straight: number;
      gateway: number;
      governed: Beside;
      eventsOff: Beside;
      hanging: Beside;
    }> = [];
    /**
     * A variant of the gateway's phase with a gateway phase of its own right beside it, the variant
     * first in odd groups and second in even ones: with one fixed order a variant measured last was
     * compared with a gateway phase measured three phases before it (a hanging receiver read 0.76–0.86×
     * in two runs that way, 1.17× in one with it moved right after the gateway), and this VM's speed
     * drifts between phases (docs/performance.md, "Events and webhooks").
     */
    const beside = async (
      group: number,
      neighbour: readonly StackAgent[],
      variant: () => Promise<{ rate: number; count: number }>,
    ): Promise<{ variant: { rate: number; cpu: string }; gateway: { rate: number; cpu: string } }> => {
      const baseline = () => gateway(SECONDS, neighbour);
      if (group % 2 === 0) {
        const v = await measured(variant);
        return { variant: v, gateway: await measured(baseline) };
      }
      const g = await measured(baseline);
      return { variant: await measured(variant), gateway: g };
    };
    for (let pair = 0; pair < PAIRS; pair++) {
      presigned = await presign(presignCount(SECONDS));
      const s = await measured(straight);
      const g = await measured(gateway, "gateway");
      const p = await beside(pair, neighbours[0]!, () => gateway(SECONDS, governed));
      const off = await beside(pair, neighbours[1]!, withoutEvents);
      const hanging = await beside(pair, neighbours[2]!, withHangingReceiver);
      pairs.push({
        straight: s.rate,
        gateway: g.rate,
        governed: { rate: p.variant.rate, gateway: p.gateway.rate },
        eventsOff: { rate: off.variant.rate, gateway: off.gateway.rate },
        hanging: { rate: hanging.variant.rate, gateway: hanging.gateway.rate },
      });
      say(`  group ${pair + 1}: straight ${s.rate.toFixed(0)} tx/s (${s.cpu})`);
      say(
        `          gateway ${g.rate.toFixed(0)} transfers/s to confirmed, ${(g.rate / s.rate).toFixed(2)}× (${g.cpu})`,
      );
      say(
        `          with a policy on every agent ${p.variant.rate.toFixed(0)} transfers/s, ${(p.variant.rate / p.gateway.rate).toFixed(2)}× the gateway's ${p.gateway.rate.toFixed(0)} beside it (${p.variant.cpu}; beside it, ${p.gateway.cpu})`,
      );
      say(
        `          with events off ${off.variant.rate.toFixed(0)} transfers/s: events on (${off.gateway.rate.toFixed(0)} beside it) is ${(off.gateway.rate / off.variant.rate).toFixed(2)}× it (${off.variant.cpu}; beside it, ${off.gateway.cpu})`,
      );
      say(
        `          with a hanging webhook receiver ${hanging.variant.rate.toFixed(0)} transfers/s, ${(hanging.variant.rate / hanging.gateway.rate).toFixed(2)}× the gateway's ${hanging.gateway.rate.toFixed(0)} beside it (${hanging.variant.cpu}; beside it, ${hanging.gateway.cpu})`,
      );
    }

    const gatewayStatements = statements.describe(
      "gateway",
      transfersByPhase.get("gateway") ?? 0,
      "transfer",
    );
    if (gatewayStatements.length > 0) say("  the gateway phases' statements, over the groups:");
    for (const line of gatewayStatements) say(line);

    // Faucet: one payout at a time, latency from the POST to reading `confirmed`.
    const latencies: number[] = [];
    for (let i = 0; i < FAUCET_SAMPLES; i++) {
      const agent = agents[i % agents.length]!;
      const headers = { authorization: `Bearer ${agent.token}` };
      const started = performance.now();
      const answer = await post(
        `${base}/agent/v1/faucet`,
        JSON.stringify({ idempotency_key: `faucet-${process.pid}-${i}` }),
        headers,
      );
      if (answer.status !== 202 && answer.status !== 200)
        throw new Error(`faucet answered ${answer.status}: ${answer.body}`);
      const id = (JSON.parse(answer.body) as { action_id: string }).action_id;
      for (;;) {
        const read = await get(`${base}/agent/v1/actions/${id}`, headers);
        if ((JSON.parse(read.body) as { status: string }).status === "confirmed") break;
        await sleep(2);
      }
      latencies.push(performance.now() - started);
    }
    latencies.sort((a, b) => a - b);
    say(await steal());
    // Shows the hanging phases did reach the receiver (a figure of 0 would make their goal moot).
    say(`deliveries the hanging receiver took and never answered: ${receiver.requests.length}`);
    if (resent > 0) say(`requests sent again after a kept-alive connection closed under them: ${resent}`);

    const ratios = pairs.map((pair) => pair.gateway / pair.straight);
    const ratio = median(ratios);
    say("");
    say("| measure | figure |");
    say("|---|---|");
    say(
      `| baseline: plain signed transfers straight to the devnet | ${median(pairs.map((p) => p.straight)).toFixed(0)} tx/s |`,
    );
    say(
      `| transfers through the gateway to confirmed (${AGENTS} agents) | ${median(pairs.map((p) => p.gateway)).toFixed(0)} /s |`,
    );
    say(
      `| the same with a policy on every agent | ${median(pairs.map((p) => p.governed.rate)).toFixed(0)} /s |`,
    );
    say(`| the same with the event log off | ${median(pairs.map((p) => p.eventsOff.rate)).toFixed(0)} /s |`);
    say(
      `| the same with a hanging webhook receiver | ${median(pairs.map((p) => p.hanging.rate)).toFixed(0)} /s |`,
    );
    say(
      `| faucet payout to confirmed, p50 / p99 | ${quantile(latencies, 0.5).toFixed(1)} / ${quantile(latencies, 0.99).toFixed(1)} ms |`,
    );
    say("");
    say(
      `goal ≥ 0.9× the straight-to-devnet rate: ${ratio >= 0.9 ? "met" : "not met"} (${figureBeside(ratio, 0.9)}×, median of pairs ${ratios.map((r) => figureBeside(r, 0.9)).join(", ")})`,
    );
    const policyRatios = pairs.map((pair) => pair.governed.rate / pair.governed.gateway);
    const policyRatio = median(policyRatios);
    say(
      `goal with a policy on every agent ≥ 0.9× the rate without: ${policyRatio >= 0.9 ? "met" : "not met"} (${figureBeside(policyRatio, 0.9)}×, median of groups ${policyRatios.map((r) => figureBeside(r, 0.9)).join(", ")})`,
    );
    const eventRatios = pairs.map((pair) => pair.eventsOff.gateway / pair.eventsOff.rate);
    const eventRatio = median(eventRatios);
    say(
      `goal with events on ≥ 0.9× the rate with them off: ${eventRatio >= 0.9 ? "met" : "not met"} (${figureBeside(eventRatio, 0.9)}×, median of groups ${eventRatios.map((r) => figureBeside(r, 0.9)).join(", ")})`,
    );
    const hangingRatios = pairs.map((pair) => pair.hanging.rate / pair.hanging.gateway);
    const hangingRatio = median(hangingRatios);
    say(
      `goal a hanging webhook receiver moves the rate < 5 %: ${Math.abs(hangingRatio - 1) < 0.05 ? "met" : "not met"} (${figureBeside(hangingRatio, hangingRatio < 1 ? 0.95 : 1.05)}×, median of groups ${hangingRatios.map((r) => figureBeside(r, r < 1 ? 0.95 : 1.05)).join(", ")})`,
    );
  } finally {
    await origin?.stop();
    await receiver?.close();
    await driller?.close();
    await signer.close();
    await enclave.dispose();
    await devnet.stop();
    await statements.close();
    await autovacuum.close();
    await database.close();
    await postgres.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(
      `bench:money: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
