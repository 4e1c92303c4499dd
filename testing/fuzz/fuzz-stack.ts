/**
 * The stack the fuzz suite runs against, every part real: the money stack (Postgres, devnet,
 * enclave, drilled and verified agents) and an origin *process* (origin/main.ts) with every
 * credential configured, so a crash shows as an exit and the process can be asked whether it
 * still answers. Registration is open with free keys, so fuzzed registrations can reach issuance;
 * x402 is on, with a funded payer, so fuzzed payments can reach settlement.
 */
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import pg from "pg";
import pino from "pino";
import { fund } from "../../devnet/testing.ts";
import { queryRows } from "../../origin/db/client.ts";
import { makeBatch } from "../../origin/keypool/refill.ts";
import { updateRegistrationPolicy } from "../../origin/registration/policy-repository.ts";
import { addEndpoint } from "../../origin/webhooks/endpoints.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import { addressOfPublicKey, publicKeyOf } from "../../shared/secp256k1.ts";
import { keptAliveRpc } from "../kept-alive-rpc.ts";
import { type MoneyStack, type StackAgent, startMoneyStack } from "../money-stack.ts";
import { type OriginProcess, spawnOrigin } from "../origin-process.ts";
import { FUZZ_X402 } from "./x402-payments.ts";

export type FuzzSecrets = {
  adminApiToken: string;
  registrationAdmin: string;
  edgeShared: string;
  registrationIp: string;
};

/** What a refused request must leave as it found it (a refusal changes no state). */
export type StateSnapshot = {
  actions: number;
  identities: number;
  enabled_identities: number;
  tokens: number;
  assigned_keys: number;
  registration_attempts: number;
  registration_admissions: number;
  registration_issued: number;
  policy: string;
  policy_changes: number;
  identity_changes: number;
  funding_exceptions: number;
  x402_settlements: number;
  /** Transactions the x402 settler has sent (its pending nonce on chain). */
  settler_transactions: number;
};

export type FuzzStack = {
  money: MoneyStack;
  origin: OriginProcess;
  secrets: FuzzSecrets;
  /** Agents with read, faucet and transfer, used in turn (each has its own per-agent budget). */
  agents: StackAgent[];
  /** Agents whose tokens may only read: the write routes' capability refusals. */
  readOnly: StackAgent[];
  /** A webhook endpoint's id, so the replay and remove routes' cases reach a real one. */
  webhookIds: string[];
  snapshot(): Promise<StateSnapshot>;
  /** The newest `count` agent actions' status and error code. */
  newestActions(count: number): Promise<{ status: string; error_code: string | null }[]>;
  /** Whether the origin process is alive and answers /healthz. */
  answers(): Promise<boolean>;
  close(): Promise<void>;
};

/** What a refusal must leave as it found it, of the database's rows (the chain's is read apart). */
const STATE_QUERY = `select
  (select count(*)::int from agent_actions) as actions,
  (select count(*)::int from agent_identities) as identities,
  (select count(*)::int from agent_identities where enabled and not revoked) as enabled_identities,
  (select count(*)::int from agent_tokens) as tokens,
  (select count(*)::int from key_pool where status = 'assigned') as assigned_keys,
  (select coalesce(sum(count), 0)::int from registration_attempts) as registration_attempts,
  (select coalesce(sum(count), 0)::int from registration_admissions) as registration_admissions,
  (select count(*)::int from registration_issued) as registration_issued,
  (select md5(row(p.*)::text) from registration_policy p) as policy,
  (select count(*)::int from registration_policy_changes) as policy_changes,
  (select count(*)::int from identity_changes) as identity_changes,
  (select count(*)::int from funding_exceptions) as funding_exceptions,
  (select count(*)::int from x402_settlements) as x402_settlements`;

/** `runs`: the cases each route will be sent (FUZZ_RUNS), which sets how many agents share them. */
export async function startFuzzStack(options: { runs: number }): Promise<FuzzStack> {
  // x402 on, with the terms and payers the x402 routes' generators sign for (x402-payments.ts).
  const money = await startMoneyStack({
    x402: { amountUnits: FUZZ_X402.amountUnits, payTo: FUZZ_X402.payTo },
  });
  const secrets: FuzzSecrets = {
    adminApiToken: randomBytes(32).toString("hex"),
    registrationAdmin: randomBytes(32).toString("hex"),
    edgeShared: randomBytes(32).toString("hex"),
    registrationIp: randomBytes(32).toString("hex"),
  };
  try {
    // Enough agents that the per-agent window (600 requests a minute each) answers next to none of
    // the agent routes' cases: the fuzz sends them thousands a minute, and with 9 agents it was a
    // third of them in CI, all of them on some routes in longer runs (the window is attacked by
    // the gateway's own tests; the fuzz is for the routes behind it). What fills the window is the
    // pace, not the count: a route of 1,000 cases lasts about a second, but in a run of 10,000 the
    // agent routes, one after another, send about 1,000 cases a second for minutes, which 64 agents
    // took at about 940 a minute each (11-18 % rate_limited); 208 take about 290 a minute each.
    const long = options.runs > 1_000;
    const agents = await money.newAgents(long ? 160 : 48);
    const readOnly = await money.newAgents(long ? 48 : 16, { capabilities: ["read"] });
    const db = money.db.handle.db;
    // Free keys for public registration, and a policy under which fuzzed registrations can succeed.
    const batch = await makeBatch(
      {
        db,
        signer: money.signer,
        authorize: money.authorities.admin,
        backupDir: money.backupDir,
        logger: pino({ level: "silent" }),
      },
      12,
    );
    if (!batch.ok) {
      const why = batch.error.code === "failed" ? batch.error.reason : "batch moved on";
      throw new Error(`registration keys: ${why}`);
    }
    await updateRegistrationPolicy(db, {
      changes: { paused: false, keyReserve: 2 },
      reason: "fuzz suite: registration open",
    });
    // For the replay and remove routes: subscribed to a type the fuzz never makes, at a private
    // address delivery refuses, so a replay finds nothing to queue and nothing is ever sent.
    const webhook = await addEndpoint(db, { url: "http://127.0.0.1:9/fuzz", events: ["finding.raised"] });
    const fundedPayer = addressOfPublicKey(publicKeyOf(FUZZ_X402.fundedPayer));
    await fund(money.devnet.url, fundedPayer, 1_000_000n * WEI_PER_UNIT);
    const origin = await spawnOrigin({
      env: money.processEnv({
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_ADMIN_API_TOKEN: secrets.adminApiToken,
        AGENT_REGISTRATION_ADMIN_SECRET: secrets.registrationAdmin,
        AGENT_EDGE_SHARED_SECRET: secrets.edgeShared,
        AGENT_REGISTRATION_IP_SECRET: secrets.registrationIp,
        // The x402 routes get thousands of cases a minute from this one address: with the
        // default windows most would be 429 and the properties would exercise the windows (which
        // x402-edge.int.test.ts, x402-limits.int.test.ts and settlement-status.int.test.ts attack)
        // instead of the routes behind them.
        AGENT_X402_RATE_LIMIT_PER_MINUTE: "1000000",
        AGENT_X402_ADDRESS_PAYMENTS_PER_MINUTE: "1000000",
        AGENT_X402_READS_PER_MINUTE: "1000000",
      }),
    });
    const chain = keptAliveRpc(money.devnet.url);
    // The state read between every two batches, some 5,000 times a run, as a statement prepared
    // once on a connection of its own: Postgres plans its thirteen counts once instead of at each
    // read (0.40 ms of the server's CPU a read, against 0.12 ms prepared, in a scratch measure).
    const stateReader = new pg.Client({ connectionString: money.db.url });
    // A connection lost between two reads fails the next read; unheard, it would end the process.
    stateReader.on("error", () => {});
    await stateReader.connect();
    const snapshot = async (): Promise<StateSnapshot> => {
      const { rows } = await stateReader.query<Omit<StateSnapshot, "settler_transactions">>({
        name: "fuzz-state",
        text: STATE_QUERY,
      });
      const row = rows[0];
      const nonce = await chain.call("eth_getTransactionCount", [money.settler, "pending"]);
      if (typeof nonce.result !== "string") throw new Error(`settler nonce: ${JSON.stringify(nonce)}`);
      return { ...row!, settler_transactions: Number(nonce.result) };
    };
    return {
      money,
      origin,
      secrets,
      agents,
      readOnly,
      webhookIds: [webhook.id],
      snapshot,
      newestActions: (count) =>
        queryRows(
          db,
          sql`select status, error_code from agent_actions order by created_at desc limit ${count}`,
        ),
      async answers() {
        if (origin.child.exitCode !== null || origin.child.signalCode !== null) return false;
        return fetch(`${origin.base}/healthz`).then(
          (response) => response.ok,
          () => false,
        );
      },
      async close() {
        chain.close();
        await stateReader.end().catch(() => {});
        await origin.stop();
        await money.close();
      },
    };
  } catch (error) {
    await money.close();
    throw error;
  }
}
