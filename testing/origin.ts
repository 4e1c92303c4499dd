import type { Hono } from "hono";
import pino from "pino";
import { prepareMoney } from "../origin/actions/money-setup.ts";
import { createApp } from "../origin/app.ts";
import { createChainClient } from "../origin/chain/client.ts";
import { createJsonRpcUpstream } from "../origin/chain/json-rpc-upstream.ts";
import { loadConfig } from "../origin/config.ts";
import { createOriginMetrics } from "../origin/console/metrics.ts";
import type { DatabaseHandle } from "../origin/db/client.ts";
import { type AppDeps, type Clock, systemClock } from "../origin/deps.ts";
import { createGatewayRouter } from "../origin/gateway/router.ts";
import type { AppEnv } from "../origin/http/env.ts";
import { createLogger } from "../origin/logger.ts";
import { createRegistrationRouter } from "../origin/registration/router.ts";
import { startHttpServer } from "../origin/server.ts";
import { createDormantSignerClient } from "../origin/signer/dormant-stub.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import type { TxTracker, TxTrackerOptions } from "../origin/workers/tx-tracker.ts";
import { recordOutput, recordSecretsOf, SINK_ENV } from "./secret-sink.ts";

export type TestOrigin = {
  url: string;
  base: string;
  deps: AppDeps;
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
};

/** The real origin app on a free loopback port, wired as main.ts wires it, for HTTP-level tests. */
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
  const prepared = await prepareMoney({
    config,
    signer,
    rpc,
    db: params.database.db,
    logger,
    tracker: params.tracker,
  });
  if (!prepared.ok)
    throw new Error(`the origin would refuse to start:\n  - ${prepared.errors.join("\n  - ")}`);
  const deps: AppDeps = {
    config,
    database: params.database,
    chain: rpcUrl ? createChainClient({ rpcUrl, timeoutMs: config.chain.timeoutMs }) : undefined,
    rpc,
    signer,
    money: prepared.money,
    logger,
    clock,
    metrics,
  };
  const app = createApp(deps, { gateway: createGatewayRouter, registration: createRegistrationRouter });
  const server = await startHttpServer(app, "127.0.0.1", 0);
  prepared.tracker?.start();
  return {
    url: server.url,
    base: `${server.url}${config.http.basePath}`,
    deps,
    app,
    tracker: prepared.tracker,
    async close() {
      await server.close(1_000);
      await prepared.money?.broadcasts.idle();
      await prepared.tracker?.stop();
      rpc?.close();
    },
  };
}
