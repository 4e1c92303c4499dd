import type { Hono } from "hono";
import pino from "pino";
import type { MoneyRuntime } from "../origin/actions/money-runtime.ts";
import { fileBackupStore } from "../origin/backup-store.ts";
import type { CapabilityName } from "../origin/capability.ts";
import { createChainClient } from "../origin/chain/client.ts";
import { createJsonRpcUpstream } from "../origin/chain/json-rpc-upstream.ts";
import { type Clock, systemClock } from "../origin/clock.ts";
import { composeOrigin } from "../origin/compose.ts";
import { loadConfig } from "../origin/config.ts";
import type { DatabaseHandle } from "../origin/db/client.ts";
import type { GatewayLimiters } from "../origin/gateway/limits.ts";
import type { AppEnv } from "../origin/http/env.ts";
import type { Infrastructure } from "../origin/infrastructure.ts";
import { createLogger } from "../origin/logger.ts";
import { createOriginMetrics } from "../origin/metrics/metrics.ts";
import type { TxTracker, TxTrackerOptions } from "../origin/outbox/index.ts";
import { startHttpServer } from "../origin/server.ts";
import { createDormantSignerClient } from "../origin/signer/dormant-stub.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import { recordOutput, recordSecretsOf, SINK_ENV } from "./secret-sink.ts";

export type TestOrigin = {
  url: string;
  base: string;
  /** The infrastructure the origin was composed from, and its money runtime when a money switch is on. */
  deps: Infrastructure & { money: MoneyRuntime | undefined };
  /** The composed app (its `routes` list what is mounted). */
  app: Hono<AppEnv>;
  /** The transaction tracker, running, when a money switch is on. */
  tracker: TxTracker | undefined;
  close(): Promise<void>;
};

export type StartTestOriginParams = {
  database: DatabaseHandle;
  /** The chain's JSON-RPC URL (a devnet); omitted = no chain. */
  rpcUrl?: string;
  env?: Record<string, string>;
  signer?: SignerClient;
  /** Timings of the transaction tracker (tests shorten its grace periods). */
  tracker?: TxTrackerOptions;
  /** Receives the origin's JSON log lines (at info level) instead of discarding them. */
  onLogLine?: (line: string) => void;
  /** The origin's clock (registration quota days and minutes, the metrics cache); the system's by default. */
  clock?: Clock;
  /** The capabilities whose workers run: the transaction tracker (`money`) by default. */
  workers?: readonly CapabilityName[];
  /** The gateway's limiters (a test of a tier sets a small one); the standard tiers by default. */
  limiters?: GatewayLimiters;
};

/** The real origin app on a free loopback port, composed as main.ts composes it, for HTTP-level tests. */
export async function startTestOrigin(params: StartTestOriginParams): Promise<TestOrigin> {
  const config = loadConfig({
    AGENT_GATEWAY_ENABLED: "true",
    LOG_LEVEL: "silent",
    ...(params.rpcUrl ? { CHAIN_RPC_URL: params.rpcUrl } : {}),
    ...params.env,
  });
  const rpcUrl = config.chain.rpcUrl;
  const clock = params.clock ?? systemClock;
  // As main.ts does: one registry per origin, the enclave and chain clients wrapped and timed.
  const metrics = createOriginMetrics({ db: params.database.db, now: () => clock.now().getTime() });
  const rpc = rpcUrl
    ? metrics.observeRpc(createJsonRpcUpstream({ url: rpcUrl, timeoutMs: config.chain.timeoutMs }))
    : undefined;
  const signer = metrics.observeSigner(params.signer ?? createDormantSignerClient());
  recordSecretsOf(params.env ?? {});
  // TEST_ORIGIN_LOG=1 prints the origin's log to stderr, for whoever debugs a failing test. Every
  // line also goes to the run's secret scan (secret-sink.ts) when it is on.
  const scanned = process.env[SINK_ENV] !== undefined;
  const logger =
    params.onLogLine || scanned
      ? createLogger(process.env.TEST_ORIGIN_LOG === "1" ? "debug" : "info", {
          write: (line: string) => {
            recordOutput("origin", line);
            params.onLogLine?.(line);
            if (process.env.TEST_ORIGIN_LOG === "1") process.stderr.write(line);
          },
        })
      : process.env.TEST_ORIGIN_LOG === "1"
        ? createLogger("debug", process.stderr)
        : pino({ level: "silent" });
  // As main.ts does: a money switch is on only if the configuration matches the sealed policy.
  const chain = rpcUrl ? createChainClient({ rpcUrl, timeoutMs: config.chain.timeoutMs }) : undefined;
  const infrastructure = {
    config,
    database: params.database,
    chain,
    rpc,
    signer,
    logger,
    clock,
    backupStore: fileBackupStore,
    metrics,
  };
  const composed = await composeOrigin(infrastructure, {
    tracker: params.tracker,
    limiters: params.limiters,
  });
  if (!composed.ok)
    throw new Error(`the origin would refuse to start:\n  - ${composed.error.errors.join("\n  - ")}`);
  const origin = composed.value;
  const server = await startHttpServer(origin.app, "127.0.0.1", 0);
  // The transaction tracker only, unless the test asks for more: the key pool and identity workers
  // are for the tests that start them.
  origin.start(params.workers ?? ["money"]);
  return {
    url: server.url,
    base: `${server.url}${config.http.basePath}`,
    deps: { ...infrastructure, money: origin.money.runtime },
    app: origin.app,
    tracker: origin.money.tracker,
    async close() {
      await server.close(1_000);
      await origin.stop();
      rpc?.close();
    },
  };
}
