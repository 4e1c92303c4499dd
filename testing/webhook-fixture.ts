/**
 * The webhook tests' set-up: a test database, a signing key file, origins running the webhooks'
 * workers on it, events written as the triggers write them, and the delivery rows read back.
 */
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterAll } from "vitest";
import { queryRows } from "../origin/db/client.ts";
import type { FanOutOutcome } from "../origin/metrics/metrics.ts";
import type { Resolve } from "../origin/webhooks/address-guard.ts";
import { addEndpoint, type WebhookEndpoint } from "../origin/webhooks/endpoints.ts";
import { ensureWebhookSigningKeyFile } from "../origin/webhooks/signing.ts";
import { sleep } from "../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "./database.ts";
import { startTestOrigin, type TestOrigin } from "./origin.ts";
import { startOwnPostgres } from "./own-postgres.ts";
import { parsePrometheusText } from "./prometheus.ts";
import { recordSecret } from "./secret-sink.ts";
import { useFixture } from "./stack.ts";
import { startWebhookReceiver, type WebhookReceiver } from "./webhook-receiver.ts";

/** A short schedule, so a test sees several attempts. */
export const TEST_RETRY = "0,1,1,2,2";
/** AGENT_WEBHOOKS_TIMEOUT_MS of the tests' origins. */
export const TEST_TIMEOUT_MS = 1_000;

/** Polls `read` every 100 ms until it gives something other than undefined or false. */
export async function until<T>(
  what: string,
  read: () => Promise<T | undefined> | T | undefined,
  ms = 15_000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

export type WebhookFixture = { db: TestDatabase; keyFile: string; origins: TestOrigin[] };

/**
 * The fan-out runs an origin has ended (origin_webhooks_fan_out_runs_total), of one outcome or of
 * any.
 */
export async function fanOutRuns(origin: TestOrigin, outcome?: FanOutOutcome): Promise<number> {
  const metrics = parsePrometheusText(await origin.deps.metrics.render());
  return metrics.samples
    .filter(
      (sample) =>
        sample.name === "origin_webhooks_fan_out_runs_total" &&
        (outcome === undefined || sample.labels.outcome === outcome),
    )
    .reduce((sum, sample) => sum + sample.value, 0);
}

/**
 * Resolves once the fan-out has read the log `runs` times from start to end since the call: one
 * origin has ended `runs + 1` more runs that ran (an origin's runs never overlap, so all but the
 * first of them began after the call). What a test waits for before it says nothing was queued.
 */
export async function fanOutRunsThrough(fixture: WebhookFixture, runs = 1): Promise<void> {
  const before = await Promise.all(fixture.origins.map((origin) => fanOutRuns(origin, "ran")));
  await until(`${runs} fan-out runs`, async () => {
    const now = await Promise.all(fixture.origins.map((origin) => fanOutRuns(origin, "ran")));
    return now.some((count, i) => count >= before[i]! + runs + 1);
  });
}

export type StartWebhookFixtureParams = {
  allowPrivate: boolean;
  origins: number;
  resolve?: Resolve;
  retry?: string;
  fanOutPollMs?: number;
  /** AGENT_WEBHOOKS_MAX_PENDING; the origin's default when undefined. */
  maxPending?: number;
  /**
   * "own cluster": a cluster started for the fixture, for tests that time a wake. On the suite's
   * shared cluster another file's open transaction holds the event log's horizon back
   * (testing/events-horizon.ts), and an event written meanwhile waits for the fan-out's poll.
   */
  database?: "shared" | "own cluster";
};

/** The origins' environment for a fixture's key file and parameters. */
export function webhookEnv(
  keyFile: string,
  params: Pick<StartWebhookFixtureParams, "allowPrivate" | "retry" | "maxPending">,
): Record<string, string> {
  return {
    AGENT_WEBHOOKS_SIGNING_KEY_FILE: keyFile,
    AGENT_WEBHOOKS_RETRY_SECONDS: params.retry ?? TEST_RETRY,
    AGENT_WEBHOOKS_TIMEOUT_MS: String(TEST_TIMEOUT_MS),
    ...(params.allowPrivate ? { AGENT_WEBHOOKS_ALLOW_PRIVATE: "true" } : {}),
    ...(params.maxPending === undefined ? {} : { AGENT_WEBHOOKS_MAX_PENDING: String(params.maxPending) }),
  };
}

/** A PEM file's key material: its Base64 lines, without the BEGIN and END lines. */
function pemBody(pem: string): string {
  return pem
    .split("\n")
    .filter((line) => line !== "" && !line.startsWith("-----"))
    .join("");
}

export async function startWebhookFixture(params: StartWebhookFixtureParams): Promise<WebhookFixture> {
  const db =
    params.database === "own cluster" ? (await startOwnPostgres()).database : await createTestDatabase();
  const keyFile = path.join(await mkdtemp(path.join(tmpdir(), "webhooks-")), "webhook-signing.key");
  await ensureWebhookSigningKeyFile(keyFile);
  // docs/security.md#webhooks: the key file is never logged. Its key material goes to the run's
  // secret scan, which fails the run if any origin log line or error body carries it.
  recordSecret(pemBody(await readFile(keyFile, "utf8")));
  const origins: TestOrigin[] = [];
  for (let i = 0; i < params.origins; i++) {
    origins.push(
      await startTestOrigin({
        database: db.handle,
        env: webhookEnv(keyFile, params),
        workers: ["webhooks"],
        webhooks: { resolve: params.resolve, fanOutPollMs: params.fanOutPollMs },
      }),
    );
  }
  return { db, keyFile, origins };
}

export async function stopWebhookFixture(fixture: WebhookFixture): Promise<void> {
  for (const origin of fixture.origins) await origin.close();
  await fixture.db.drop();
}

/**
 * Writes events as the triggers do (node events: no agent), one transaction each, each with its
 * notification carrying the id; returns their ids.
 */
export async function writeEvents(
  fixture: WebhookFixture,
  type: string,
  count: number,
  marker: string,
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const [row] = await queryRows<{ id: string }>(
      fixture.db.handle.db,
      sql`with written as (
            insert into events (agent_id, type, data) values (null, ${type}, ${JSON.stringify({ marker, i })}::jsonb)
            returning id)
          select id::text as id, pg_notify('events', id::text) from written`,
    );
    ids.push(row!.id);
  }
  return ids;
}

export type DeliveryRow = {
  status: string;
  attempts: number;
  last_http_status: number | null;
  last_error: string | null;
  event_id: string;
};

/** The endpoint's delivery rows, by event id. */
export const deliveriesOf = (fixture: WebhookFixture, endpointId: string): Promise<DeliveryRow[]> =>
  queryRows<DeliveryRow>(
    fixture.db.handle.db,
    sql`select status, attempts, last_http_status, last_error, event_id::text as event_id
        from webhook_deliveries where endpoint_id = ${endpointId}::uuid order by webhook_deliveries.event_id`,
  );

/**
 * A loopback receiver with an endpoint for it, subscribed to `events`: it knows the endpoint's
 * secret and the origin's published keys, so it verifies v1 and v1a.
 */
export async function receiverWithEndpoint(
  fixture: WebhookFixture,
  events: string[],
): Promise<{ receiver: WebhookReceiver; endpoint: WebhookEndpoint }> {
  const receiver = await startWebhookReceiver();
  await receiver.loadKeys(`${fixture.origins[0]!.base}/.well-known/webhooks/keys`);
  const endpoint = await addEndpoint(fixture.db.handle.db, { url: `${receiver.url}/hook`, events });
  receiver.secret = endpoint.secret;
  // docs/security.md#webhooks: an endpoint's secret is never logged (the run's secret scan).
  recordSecret(endpoint.secret);
  return { receiver, endpoint };
}

/**
 * A fixture for the describe block it is called in (stack.ts useFixture), and the receivers its
 * tests start, each closed before the fixture stops. `receiverFor` starts one with its endpoint;
 * `closeAfter` takes one a test started itself.
 */
export function useWebhookFixture(params: StartWebhookFixtureParams): {
  fixture: WebhookFixture;
  receiverFor(events: string[]): Promise<{ receiver: WebhookReceiver; endpoint: WebhookEndpoint }>;
  closeAfter(receiver: WebhookReceiver): WebhookReceiver;
} {
  const fixture = useFixture("webhook fixture", () => startWebhookFixture(params), stopWebhookFixture);
  const receivers: WebhookReceiver[] = [];
  // Registered after the fixture's own: vitest runs a block's afterAll hooks last first.
  afterAll(async () => {
    for (const receiver of receivers) await receiver.close();
  });
  const closeAfter = (receiver: WebhookReceiver): WebhookReceiver => {
    receivers.push(receiver);
    return receiver;
  };
  return {
    fixture,
    closeAfter,
    async receiverFor(events) {
      const made = await receiverWithEndpoint(fixture, events);
      closeAfter(made.receiver);
      return made;
    },
  };
}
