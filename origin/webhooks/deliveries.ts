/**
 * The delivery rows' statements (docs/operations.md#webhooks): claim the due ones, record what an
 * attempt came to. Short statements on the pool: no connection is held while a receiver answers.
 */
import { sql } from "drizzle-orm";
import { type Db, pgArrayLiteral, queryRows } from "../db/client.ts";
import { retryDelaySeconds } from "./retry-delay.ts";

/** A claimed delivery, with what sending it needs. */
export type ClaimedDelivery = {
  id: bigint;
  /** Attempts made before this one. */
  attempts: number;
  /** The replays queued before this claim: the attempt is recorded only while no other came. */
  replays: number;
  endpointId: string;
  url: string;
  /** The endpoint's secret, then the one a rotation replaced while it still signs (endpoints.ts). */
  secrets: string[];
  endpointEnabled: boolean;
  /** Undefined when the retention sweep deleted the event before it was delivered. */
  event: { id: bigint; type: string; occurredAt: string; data: Record<string, unknown> } | undefined;
};

type ClaimedRow = {
  id: string;
  attempts: number;
  replays: number;
  endpoint_id: string;
  url: string;
  secret: string;
  previous_secret: string | null;
  enabled: boolean;
  event_id: string;
  type: string | null;
  occurred_at: string | null;
  data: Record<string, unknown> | null;
};

export type ClaimDueDeliveriesParams = {
  /** Deliveries to claim at most: the worker's free slots. */
  limit: number;
  leaseSeconds: number;
  /** The worker's slots, shared among the endpoints with work (due here, or in flight here). */
  slots: number;
  /** The most slots one endpoint holds, however few endpoints have work. */
  perEndpoint: number;
  /** This origin's deliveries in flight, by endpoint: they count against the endpoint's share. */
  inFlight: ReadonlyMap<string, number>;
};

/**
 * Claims up to `limit` due deliveries, the earliest due first, each endpoint no more than its
 * share of the slots: `slots` divided among the endpoints with work, at most `perEndpoint`, less
 * what it has in flight here. So a receiver that hangs holds its share while it times out and the
 * other endpoints' deliveries go on in the rest (docs/operations.md#webhooks). Rows another origin
 * is claiming are skipped (SKIP LOCKED), and each claimed row's next attempt moves `leaseSeconds`
 * ahead, so no other origin sends it while this one does, and one that died mid-send leaves it to
 * be sent again after the lease.
 */
export async function claimDueDeliveries(
  db: Db,
  params: ClaimDueDeliveriesParams,
): Promise<ClaimedDelivery[]> {
  const here = [...params.inFlight].filter(([, n]) => n > 0);
  const rows = await queryRows<ClaimedRow>(
    db,
    sql`with here as (
          select * from unnest(${pgArrayLiteral(here.map(([id]) => id))}::uuid[],
                               ${pgArrayLiteral(here.map(([, n]) => String(n)))}::int[]) as h(endpoint_id, n)),
        busy as (
          select w.id, coalesce(h.n, 0) as n
          from webhook_endpoints w left join here h on h.endpoint_id = w.id
          where h.n is not null
             or exists (select 1 from webhook_deliveries d
                        where d.endpoint_id = w.id and d.status = 'pending' and d.next_attempt_at <= now())),
        share as (
          select least(${params.perEndpoint}::int,
                       ceil(${params.slots}::numeric / greatest(count(*), 1)))::int as n
          from busy),
        due as (
          select picked.id
          from busy b cross join share s
          cross join lateral (
            select d.id, d.next_attempt_at from webhook_deliveries d
            where d.endpoint_id = b.id and d.status = 'pending' and d.next_attempt_at <= now()
            order by d.next_attempt_at
            limit greatest(s.n - b.n, 0)
            for update skip locked) picked
          order by picked.next_attempt_at
          limit ${params.limit}),
        claimed as (
          update webhook_deliveries d
          set next_attempt_at = now() + make_interval(secs => ${params.leaseSeconds}::int), updated_at = now()
          from due where d.id = due.id
          returning d.id, d.attempts, d.replays, d.endpoint_id, d.event_id)
        select c.id::text as id, c.attempts, c.replays, c.endpoint_id, w.url, w.secret,
               case when w.previous_secret_until > now() then w.previous_secret end as previous_secret, w.enabled,
               c.event_id::text as event_id, e.type, js_iso_timestamp(e.occurred_at) as occurred_at, e.data
        from claimed c
        join webhook_endpoints w on w.id = c.endpoint_id
        left join events e on e.id = c.event_id`,
  );
  return rows.map((row) => ({
    id: BigInt(row.id),
    attempts: row.attempts,
    replays: row.replays,
    endpointId: row.endpoint_id,
    url: row.url,
    secrets: row.previous_secret === null ? [row.secret] : [row.secret, row.previous_secret],
    endpointEnabled: row.enabled,
    event:
      row.type === null
        ? undefined
        : { id: BigInt(row.event_id), type: row.type, occurredAt: row.occurred_at!, data: row.data ?? {} },
  }));
}

/** What one attempt came to, as the worker classifies it. */
export type AttemptOutcome =
  | { kind: "delivered"; httpStatus: number }
  /** 410 Gone: the receiver wants no more; the endpoint is disabled. */
  | { kind: "gone"; httpStatus: number }
  | {
      kind: "failed";
      httpStatus: number | undefined;
      error: string;
      /** The receiver's `Retry-After` on a 429 or 503, in seconds. */
      retryAfterSeconds: number | undefined;
    }
  /** Never to be attempted again (the endpoint is disabled, the event swept). */
  | { kind: "dropped"; status: "disabled" | "failed"; error: string };

/**
 * Records an attempt of a claimed delivery. A failure is retried after the schedule's step
 * `retrySeconds[attempt]`, with jitter and any `Retry-After` (retry-delay.ts), while the schedule
 * lasts, and ends `failed` after its last entry. Only the claim that made the attempt records it
 * (the attempt count must still be the claimed one), and only while no replay queued the delivery
 * again since the claim: the replay then stands, due now, whatever this attempt came to.
 *
 * A delivery makes its endpoint's other deliveries that got no answer (a timeout, a refused
 * connection or address: no status, attempted at least once) due now: the receiver is back, and
 * its backlog should not wait out the schedule's hours. Those it answered with an error status keep
 * their schedule: a receiver that refuses one event must not get it again at every success.
 * Deliveries due within a lease are left as they are: that is where a claim puts the ones in
 * flight, and sending one of those again would deliver it twice.
 */
export async function recordAttempt(
  db: Db,
  params: {
    delivery: ClaimedDelivery;
    outcome: AttemptOutcome;
    retrySeconds: readonly number[];
    /** In [0, 1): the jitter's draw. */
    random: number;
    /** The claim's lease (claimDueDeliveries): a delivery due within it may be in flight. */
    leaseSeconds: number;
  },
): Promise<void> {
  const { delivery, outcome } = params;
  const id = delivery.id.toString();
  const made = delivery.attempts + 1;
  const guard = sql`id = ${id}::bigint and attempts = ${delivery.attempts}
    and replays = ${delivery.replays} and status = 'pending'`;
  switch (outcome.kind) {
    case "delivered":
      await db.execute(
        sql`with delivered as (
              update webhook_deliveries set status = 'delivered', attempts = ${made},
                last_http_status = ${outcome.httpStatus}, last_error = null, updated_at = now()
              where ${guard}
              returning endpoint_id)
            update webhook_deliveries set next_attempt_at = now(), updated_at = now()
            where endpoint_id = (select endpoint_id from delivered)
              and status = 'pending' and attempts > 0 and last_http_status is null
              and next_attempt_at > now() + make_interval(secs => ${params.leaseSeconds}::int)`,
      );
      return;
    case "gone":
      await db.transaction(async (tx) => {
        // The endpoint first, as a replay locks it (manage.ts), so the two never wait on each other
        // in a cycle; and a replay that committed meanwhile is seen by the guard below.
        await tx.execute(
          sql`select id from webhook_endpoints where id = ${delivery.endpointId}::uuid for update`,
        );
        const recorded = await queryRows<{ id: string }>(
          tx as unknown as Db,
          sql`update webhook_deliveries set status = 'disabled', attempts = ${made},
                last_http_status = ${outcome.httpStatus}, last_error = 'gone', updated_at = now()
              where ${guard}
              returning id`,
        );
        // An attempt whose claim a replay overtook records nothing, as any other outcome: the
        // operator's replay (the receiver is back) stands, the endpoint enabled and its queue due.
        if (recorded.length === 0) return;
        await tx.execute(
          sql`update webhook_endpoints set enabled = false,
                disabled_reason = ${`the receiver answered ${outcome.httpStatus} Gone`}
              where id = ${delivery.endpointId}::uuid`,
        );
        // The rest of the endpoint's queue ends with it.
        await tx.execute(
          sql`update webhook_deliveries set status = 'disabled', last_error = 'endpoint disabled', updated_at = now()
              where endpoint_id = ${delivery.endpointId}::uuid and status = 'pending'`,
        );
      });
      return;
    case "failed": {
      const step = params.retrySeconds[made];
      const next =
        step === undefined
          ? sql`status = 'failed'`
          : sql`next_attempt_at = now() + make_interval(secs => ${String(
              retryDelaySeconds({
                scheduledSeconds: step,
                retryAfterSeconds: outcome.retryAfterSeconds,
                random: params.random,
              }),
            )}::double precision)`;
      await db.execute(
        sql`update webhook_deliveries set ${next}, attempts = ${made},
              last_http_status = ${outcome.httpStatus ?? null}, last_error = ${outcome.error.slice(0, 500)},
              updated_at = now()
            where ${guard}`,
      );
      return;
    }
    case "dropped":
      await db.execute(
        sql`update webhook_deliveries set status = ${outcome.status}, last_error = ${outcome.error},
              updated_at = now()
            where ${guard}`,
      );
      return;
  }
}
