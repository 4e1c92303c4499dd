import type { MiddlewareHandler } from "hono";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { PolicyDecision } from "../../shared/agent-policy.ts";
import {
  REGISTRATION_REFUSAL_REASONS,
  type RegistrationRefusalReason,
} from "../../shared/console-charts-schema.ts";
import { RPC_READ_ALLOWLIST } from "../../shared/constants.ts";
import { withinMs } from "../../shared/within-ms.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { Db } from "../db/client.ts";
import type { AppEnv } from "../http/env.ts";
import { REFUSAL_TIERS, type RefusalCounter } from "../http/refusals.ts";
import { routeLabel } from "../http/route-label.ts";
import type { BatchObserver } from "../outbox/index.ts";
import type { SignerClient } from "../signer/types.ts";
import type { Worker, WorkerTicks } from "../workers/loop.ts";
import { type HourCounts, HourlyCounts } from "./hourly-counts.ts";
import { readStateCounts, type StateCounts } from "./state-counts.ts";

/**
 * The origin's Prometheus metrics (docs/operations.md), one registry per instance (never prom-client's
 * global one, so two apps in one process, as in tests, never share or collide):
 *  - HTTP requests by matched route pattern, method and status, with latency;
 *  - limiter refusals by tier;
 *  - key stock, key batches, identity findings, actions and x402 settlements by state, read from
 *    the database when scraped, through a short cache so a burst of scrapes reads it once;
 *  - enclave and chain call latency and errors, measured by wrapping the clients where the
 *    dependencies are built;
 *  - the outbox's batches: their sizes, and where each one's time goes, step by step;
 *  - the agents' spending policy decisions by kind, rule and outcome, and what their budgets used today;
 *  - registration refusals by reason, also kept per UTC hour for the console's chart;
 *  - the background workers' ticks, by outcome (a loop that stopped ticking is stuck);
 *  - the action waits this origin holds, and the webhooks' fan-out runs that queued or skipped.
 */
export type OriginMetrics = {
  readonly registry: Registry;
  /** Counts one refusal of a limiter tier. */
  readonly refused: RefusalCounter;
  /**
   * Counts one decision of an agent's spending policy (docs/x402.md#many-sellers-the-node-ceiling-and-the-agents-policy): allow, hold or
   * deny, by the rule that decided (payee addresses folded out of the rule: bounded labels).
   */
  readonly policyDecided: (kind: "transfer" | "x402", decision: PolicyDecision) => void;
  /** Counts one refused registration, by why (origin/registration/router.ts), in its UTC hour. */
  readonly registrationRefused: (reason: RegistrationRefusalReason, at: Date) => void;
  /** This process's registration refusals per UTC hour, the last 24 up to `now`'s, oldest first. */
  readonly registrationRefusalsByHour: (now: Date) => HourCounts[];
  /**
   * Reads at each scrape the `?wait=` requests this origin holds waiting for their action's status
   * to change (origin/events/action-wait.ts); 0 until the events capability hands its count.
   */
  readonly followActionWaits: (held: () => number) => void;
  /**
   * Reads the reads of this origin's event feed (origin/events/feed.ts) at each scrape; 0 until the
   * events capability hands its count.
   */
  readonly followEventFeedReads: (reads: () => WorkerTicks) => void;
  /** Counts one run of the webhooks' fan-out (origin/webhooks/fan-out.ts) by how it ended. */
  readonly fanOutRun: (outcome: FanOutOutcome) => void;
  /** Times each request; outermost, after the request context. */
  http(): MiddlewareHandler<AppEnv>;
  /** The same client, each call timed and its failures counted by class. */
  observeSigner(client: SignerClient): SignerClient;
  /** The same upstream, each call timed and its failures counted. */
  observeRpc(upstream: JsonRpcUpstream): JsonRpcUpstream;
  /** Each outbox batch's size and the time from its start to the end of each step, by kind. */
  readonly outboxBatches: BatchObserver;
  /** Counts the ticks of the workers `running` lists, at each scrape (the origin's started workers). */
  observeWorkers(running: () => readonly Worker[]): void;
  /** The Prometheus text exposition of every metric. */
  render(): Promise<string>;
};

export type CreateOriginMetricsParams = {
  /** The database the state gauges are read from; absent, they are not exported. */
  db?: Db;
  /** How long one reading of the database serves scrapes (default 5 s). */
  cacheMs?: number;
  /** How long a scrape waits for that reading before it answers without the counts (default 2 s). */
  readTimeoutMs?: number;
  /** Milliseconds now (the cache's clock). */
  now?: () => number;
  /** Also export the process's CPU, memory and event-loop metrics (the running origin does). */
  processMetrics?: boolean;
};

/**
 * How a run of the webhooks' fan-out that did not fail ended: it queued what was due (`ran`), or
 * another origin on the database held its turn (`skipped`). One that failed is a failed tick of
 * its worker, `webhooks_fan_out` (origin_worker_ticks_total).
 */
export type FanOutOutcome = "ran" | "skipped";
const FAN_OUT_OUTCOMES: readonly FanOutOutcome[] = ["ran", "skipped"];

const PREFIX = "origin_";
const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Methods the origin sends upstream; anything else is labelled `other` (bounded cardinality). */
const CHAIN_METHODS = new Set<string>([
  ...RPC_READ_ALLOWLIST,
  "eth_call",
  "eth_estimateGas",
  "eth_feeHistory",
  "eth_gasPrice",
  "eth_getTransactionCount",
  "eth_maxPriorityFeePerGas",
  "eth_sendRawTransaction",
]);

export function createOriginMetrics(params: CreateOriginMetricsParams = {}): OriginMetrics {
  const registry = new Registry();
  if (params.processMetrics) collectDefaultMetrics({ register: registry, prefix: PREFIX });

  const httpDuration = new Histogram({
    name: `${PREFIX}http_request_duration_seconds`,
    help: "HTTP requests by matched route pattern, method and status, and their latency",
    labelNames: ["route", "method", "status"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const refusals = new Counter({
    name: `${PREFIX}limiter_refusals_total`,
    help: "Requests refused by a limiter, by tier",
    labelNames: ["tier"] as const,
    registers: [registry],
  });
  for (const tier of REFUSAL_TIERS) refusals.inc({ tier }, 0);
  const enclaveDuration = new Histogram({
    name: `${PREFIX}enclave_call_duration_seconds`,
    help: "Enclave signer calls by operation and outcome (ok, or the failure class), and their latency",
    labelNames: ["op", "outcome"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const enclaveErrors = new Counter({
    name: `${PREFIX}enclave_call_errors_total`,
    help: "Enclave signer calls that failed, by operation and failure class",
    labelNames: ["op", "class"] as const,
    registers: [registry],
  });
  const chainDuration = new Histogram({
    name: `${PREFIX}chain_call_duration_seconds`,
    help: "Chain JSON-RPC calls by method (batch for a batch) and outcome, and their latency",
    labelNames: ["method", "outcome"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const chainErrors = new Counter({
    name: `${PREFIX}chain_call_errors_total`,
    help: "Chain JSON-RPC calls that failed in transport, by method and failure",
    labelNames: ["method", "failure"] as const,
    registers: [registry],
  });

  const batchSteps = new Histogram({
    name: `${PREFIX}outbox_batch_step_seconds`,
    help: "Outbox batches by kind: the time from a batch's start to the end of each step (chain_read, facts, signed, committed, ended)",
    labelNames: ["kind", "step"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const batchItems = new Histogram({
    name: `${PREFIX}outbox_batch_items`,
    help: "Outbox batches by kind, and the items each carried",
    labelNames: ["kind"] as const,
    buckets: [1, 2, 4, 8, 16, 32, 64],
    registers: [registry],
  });

  const policyDecisions = new Counter({
    name: `${PREFIX}policy_decisions_total`,
    help: "Decisions of the agents' spending policies, by kind (transfer, x402), outcome and the rule that decided",
    labelNames: ["kind", "outcome", "rule"] as const,
    registers: [registry],
  });

  const registrationRefusals = new Counter({
    name: `${PREFIX}registration_refusals_total`,
    help: "Public registrations refused, by reason",
    labelNames: ["reason"] as const,
    registers: [registry],
  });
  for (const reason of REGISTRATION_REFUSAL_REASONS) registrationRefusals.inc({ reason }, 0);

  let workers: () => readonly Worker[] = () => [];
  new Counter({
    name: `${PREFIX}worker_ticks_total`,
    help: "Ticks of the background workers' loops, by worker and outcome (ok, or failed: logged as worker tick failed)",
    labelNames: ["worker", "outcome"] as const,
    registers: [registry],
    // Read from the loops at scrape time: a tick costs the loop a number, not a metric call.
    collect() {
      this.reset();
      for (const worker of workers()) {
        const ticks = worker.ticks();
        this.inc({ worker: worker.name, outcome: "ok" }, ticks.ok);
        this.inc({ worker: worker.name, outcome: "failed" }, ticks.failed);
      }
    },
  });
  new Counter({
    name: `${PREFIX}worker_sweeps_total`,
    help: "Sweeps of the transaction tracker (its ticks that look for transactions to send again and actions to end), by worker and outcome",
    labelNames: ["worker", "outcome"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const worker of workers()) {
        const sweeps = worker.sweeps?.();
        if (!sweeps) continue;
        this.inc({ worker: worker.name, outcome: "ok" }, sweeps.ok);
        this.inc({ worker: worker.name, outcome: "failed" }, sweeps.failed);
      }
    },
  });
  const refusalsByHour = new HourlyCounts<RegistrationRefusalReason>(24);

  let actionWaitsHeld: () => number = () => 0;
  new Gauge({
    name: `${PREFIX}events_action_waits`,
    help: "Requests of GET /agent/v1/actions/{id}?wait= this origin holds, waiting for their action's status to change",
    registers: [registry],
    collect() {
      this.set(actionWaitsHeld());
    },
  });
  let feedReads: () => WorkerTicks = () => ({ ok: 0, failed: 0 });
  new Counter({
    name: `${PREFIX}events_feed_reads_total`,
    help: "Reads of the event log by this origin's feed, which serves its streams and action waits, by outcome (ok, or failed: logged as worker tick failed)",
    labelNames: ["outcome"] as const,
    registers: [registry],
    collect() {
      this.reset();
      const reads = feedReads();
      this.inc({ outcome: "ok" }, reads.ok);
      this.inc({ outcome: "failed" }, reads.failed);
    },
  });
  const fanOutRuns = new Counter({
    name: `${PREFIX}webhooks_fan_out_runs_total`,
    help: "Runs of the webhooks' fan-out that did not fail, by outcome: ran (queued what was due), skipped (another origin's turn)",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  for (const outcome of FAN_OUT_OUTCOMES) fanOutRuns.inc({ outcome }, 0);

  if (params.db)
    registerStateGauges(registry, params.db, {
      cacheMs: params.cacheMs ?? 5_000,
      timeoutMs: params.readTimeoutMs ?? 2_000,
      now: params.now ?? Date.now,
    });

  return {
    registry,
    refused: (tier) => refusals.inc({ tier }),
    registrationRefused: (reason, at) => {
      registrationRefusals.inc({ reason });
      refusalsByHour.add(reason, at);
    },
    registrationRefusalsByHour: (now) => refusalsByHour.read(now),
    followActionWaits: (held) => {
      actionWaitsHeld = held;
    },
    followEventFeedReads: (reads) => {
      feedReads = reads;
    },
    fanOutRun: (outcome) => fanOutRuns.inc({ outcome }),
    policyDecided: (kind, decision) =>
      policyDecisions.inc({
        kind,
        outcome: decision.decision,
        rule: decision.decision === "allow" ? "" : ruleLabel(decision.rule),
      }),
    http() {
      return async (c, next) => {
        const started = performance.now();
        await next();
        const route = routeLabel(c);
        httpDuration.observe(
          { route, method: c.req.method, status: String(c.res.status) },
          (performance.now() - started) / 1000,
        );
      };
    },
    observeSigner(client) {
      return new Proxy(client, {
        get(target, property, receiver) {
          const value = Reflect.get(target, property, receiver);
          if (typeof value !== "function" || property === "close" || typeof property !== "string")
            return value;
          const op = property;
          return async (...args: unknown[]) => {
            const started = performance.now();
            let outcome = "exception";
            try {
              const result = (await value.apply(target, args)) as { ok: boolean; error?: { class: string } };
              outcome = result.ok ? "ok" : (result.error?.class ?? "error");
              return result;
            } finally {
              enclaveDuration.observe({ op, outcome }, (performance.now() - started) / 1000);
              if (outcome !== "ok") enclaveErrors.inc({ op, class: outcome });
            }
          };
        },
      });
    },
    observeRpc(upstream) {
      return {
        maxBatchCalls: upstream.maxBatchCalls,
        async send(payload) {
          const method = chainMethod(payload);
          const started = performance.now();
          const result = await upstream.send(payload);
          const outcome = result.ok ? "ok" : result.error;
          chainDuration.observe({ method, outcome }, (performance.now() - started) / 1000);
          if (!result.ok) chainErrors.inc({ method, failure: result.error });
          return result;
        },
        close: () => upstream.close(),
      };
    },
    outboxBatches: {
      began: (kind, items) => batchItems.observe({ kind }, items),
      step: (kind, step, seconds) => batchSteps.observe({ kind, step }, seconds),
    },
    observeWorkers: (running) => {
      workers = running;
    },
    render: () => registry.metrics(),
  };
}

/** A policy rule as a label: `x402.payees[0x…].daily_units` → `x402.payees[].daily_units`. */
export function ruleLabel(rule: string): string {
  return rule.replace(/\[[^\]]*\]/g, "[]").slice(0, 64);
}

function chainMethod(payload: unknown): string {
  if (Array.isArray(payload)) return "batch";
  const method = (payload as { method?: unknown } | null)?.method;
  return typeof method === "string" && CHAIN_METHODS.has(method) ? method : "other";
}

/**
 * Gauges read from the database at scrape time. One reading serves every gauge and every scrape
 * within `cacheMs`; concurrent scrapes share the reading in progress. A reading that fails, or has
 * not come within `timeoutMs`, leaves these gauges without samples for that scrape and sets
 * `origin_state_counts_read_ok` to 0: the rest of the scrape (requests, refusals, the enclave's and
 * the chain's calls) is what an operator needs while Postgres is away, so it is never held back.
 */
function registerStateGauges(
  registry: Registry,
  db: Db,
  options: { cacheMs: number; timeoutMs: number; now: () => number },
): void {
  const { cacheMs, timeoutMs, now } = options;
  let cached: { at: number; counts: Promise<StateCounts | undefined> } | undefined;
  const read = (): Promise<StateCounts | undefined> => {
    const at = now();
    if (!cached || at - cached.at >= cacheMs) {
      const counts = withinMs(
        readStateCounts(db).catch(() => undefined),
        timeoutMs,
      );
      cached = { at, counts };
      // A failed reading is not kept: the next scrape tries again.
      void counts.then((read) => {
        if (read === undefined && cached?.counts === counts) cached = undefined;
      });
    }
    return cached.counts;
  };

  new Gauge({
    name: `${PREFIX}state_counts_read_ok`,
    help: "1 when this scrape read the counts by state from the database, 0 when it failed or timed out (those gauges are then absent)",
    registers: [registry],
    async collect() {
      this.set((await read()) === undefined ? 0 : 1);
    },
  });

  const gauge = <L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    fill: (counts: StateCounts, set: (labels: Record<L, string>, value: number) => void) => void,
  ): void => {
    new Gauge({
      name: `${PREFIX}${name}`,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const counts = await read();
        this.reset();
        if (counts) fill(counts, (labels, value) => this.set(labels as never, value));
      },
    });
  };

  gauge("key_pool_keys", "Keys of the pool by state (free = verified and backed up)", ["state"], (c, set) => {
    for (const row of c.keys) set({ state: row.state }, row.count);
  });
  gauge("key_batches", "Key batches by state", ["state"], (c, set) => {
    for (const row of c.batches) set({ state: row.state }, row.count);
  });
  gauge("identity_findings", "Identity sweep findings recorded, by class", ["class"], (c, set) => {
    for (const row of c.findings) set({ class: row.class }, row.count);
  });
  gauge("agent_actions", "Agent actions by kind and state", ["kind", "state"], (c, set) => {
    for (const row of c.actions) set({ kind: row.kind, state: row.state }, row.count);
  });
  gauge("x402_settlements", "x402 settlements by state", ["state"], (c, set) => {
    for (const row of c.settlements) set({ state: row.state }, row.count);
  });
  gauge(
    "policy_used_units",
    'Units (6 decimals) the agents with a spending policy have used of their budgets today (UTC), by kind; held actions are origin_agent_actions{state="held"}',
    ["kind"],
    (c, set) => {
      for (const row of c.budgets) set({ kind: row.kind }, Number(row.units));
    },
  );
}
