import type { Hono } from "hono";
import pino from "pino";
import type { MoneyRuntime } from "../origin/actions/money-runtime.ts";
import type { CapabilityName } from "../origin/capability.ts";
import type { Clock } from "../origin/clock.ts";
import { composeOrigin } from "../origin/compose.ts";
import { loadConfig } from "../origin/config.ts";
import type { DatabaseHandle } from "../origin/db/client.ts";
import type { EventsModuleOptions } from "../origin/events/capability.ts";
import type { GatewayLimiters } from "../origin/gateway/limits.ts";
import type { AppEnv } from "../origin/http/env.ts";
import type { Infrastructure } from "../origin/infrastructure.ts";
import { createLogger } from "../origin/logger.ts";
import { openInfrastructure, type SignerTimings } from "../origin/open-infrastructure.ts";
import type { Outbox, TxTrackerOptions } from "../origin/outbox/index.ts";
import { startHttpServer } from "../origin/server.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import type { WebhooksModuleOptions } from "../origin/webhooks/capability.ts";
import { recordOutput, recordSecretsOf, SINK_ENV } from "./secret-sink.ts";

export type TestOrigin = {
  url: string;
  base: string;
  /** The infrastructure the origin was composed from, and its money runtime when a money switch is on. */
  deps: Infrastructure & { money: MoneyRuntime | undefined };
  /** The composed app (its `routes` list what is mounted). */
  app: Hono<AppEnv>;
  /** The transaction tracker, running, when a money switch is on. */
  tracker: Outbox["tracker"] | undefined;
  close(): Promise<void>;
};

export type StartTestOriginParams = {
  database: DatabaseHandle;
  /** The chain's JSON-RPC URL (a devnet); omitted = no chain. */
  rpcUrl?: string;
  /**
   * The origin's environment. The enclave is the one AGENT_SIGNER_SVC_HSM_ENDPOINT names, reached
   * by the origin's own signer client as main.ts reaches it (a dormant signer without it).
   */
  env?: Record<string, string>;
  /**
   * A signer client the test built and closes, used instead of the origin's own (one through a
   * fault proxy, one that counts what it sends). The keys-held check still asks the enclave the
   * environment names.
   */
  signer?: SignerClient;
  /** The timings of the origin's own signer client instead of its defaults. */
  signerTimings?: SignerTimings;
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
  /** The webhooks' address resolver (a test of the connect-time check swaps one in). */
  webhooks?: WebhooksModuleOptions;
  /** The event stream's timings (a test that waits for the feed's reads shortens its poll). */
  events?: EventsModuleOptions;
  /**
   * The loopback port to listen on; a free one by default. A browser test of passkeys names the
   * console's origin (CONSOLE_ORIGIN, port included) before the origin starts.
   */
  port?: number;
  /** How long a registration short of keys waits for the refill; KEY_WAIT_MS (10 s) by default. */
  keyWaitMs?: number;
  /** What an x402 presentation held by another waits beyond the receipt wait; 5 s by default. */
  x402HoldBeyondReceiptMs?: number;
};

/** The real origin app on a free loopback port, composed as main.ts composes it, for HTTP-level tests. */
export async function startTestOrigin(params: StartTestOriginParams): Promise<TestOrigin> {
  const config = loadConfig({
    AGENT_GATEWAY_ENABLED: "true",
    LOG_LEVEL: "silent",
    ...(params.rpcUrl ? { CHAIN_RPC_URL: params.rpcUrl } : {}),
    ...params.env,
  });
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
  // Built as main.ts builds it (the keys-held check and the sealed policy included), on the
  // test's database; several origins share this process, so none collects the process metrics.
  const ownSigner = params.signer;
  const opened = await openInfrastructure(config, logger, {
    database: params.database,
    processMetrics: false,
    clock: params.clock,
    signer: ownSigner ? () => ownSigner : undefined,
    signerTimings: params.signerTimings,
  });
  const { infrastructure } = opened;
  const composed = await composeOrigin(infrastructure, {
    tracker: params.tracker,
    limiters: params.limiters,
    sealed: opened.sealed,
    webhooks: params.webhooks,
    events: params.events,
    keyWaitMs: params.keyWaitMs,
    x402HoldBeyondReceiptMs: params.x402HoldBeyondReceiptMs,
  });
  if (!composed.ok) {
    await opened.close();
    throw new Error(`the origin would refuse to start:\n  - ${composed.error.errors.join("\n  - ")}`);
  }
  const origin = composed.value;
  const server = await startHttpServer(origin.app, "127.0.0.1", params.port ?? 0);
  let closing: Promise<void> | undefined;
  // The transaction tracker only, unless the test asks for more: the key pool and identity workers
  // are for the tests that start them.
  origin.start(params.workers ?? ["money"]);
  return {
    url: server.url,
    base: `${server.url}${config.http.basePath}`,
    deps: { ...infrastructure, money: origin.money.runtime },
    app: origin.app,
    tracker: origin.money.tracker,
    // Once, whoever asks first: a test may close an origin its stack closes again at the end.
    close() {
      closing ??= (async () => {
        origin.endStreams();
        await server.close(1_000);
        await origin.stop();
        await opened.close();
      })();
      return closing;
    },
  };
}
