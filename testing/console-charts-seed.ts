/**
 * Rows with known timestamps for the console's charts tests (origin/console/charts*.int.test.ts):
 * issued identities, admission attempts, actions, settlements and findings placed inside and just
 * outside the charts' windows around `now`, written as the origin's statements would leave them.
 */
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../origin/db/client.ts";

const MINUTE = 60_000;
const HOUR = 3_600_000;

/** The minute and the hour holding `now`, as the charts' buckets start them. */
export function chartBuckets(now: Date): { minute: number; hour: number } {
  return {
    minute: Math.floor(now.getTime() / MINUTE) * MINUTE,
    hour: Math.floor(now.getTime() / HOUR) * HOUR,
  };
}

const hex = (bytes: number): string => randomBytes(bytes).toString("hex");
const at = (ms: number): string => new Date(ms).toISOString();

async function identity(db: Db): Promise<string> {
  const [row] = await queryRows<{ agent_id: string }>(
    db,
    sql`insert into agent_identities (assigned_wallet, agent_transfer_key_ref, capabilities, origin)
        values (${`0x${hex(20)}`}, ${hex(32)}, array['read','transfer']::text[], 'public')
        returning agent_id`,
  );
  return row!.agent_id;
}

async function action(
  db: Db,
  agentId: string,
  row: { kind: string; status: string; created: number; updated: number },
): Promise<void> {
  await db.execute(
    sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, status, created_at, updated_at)
        values (${agentId}, ${row.kind}, ${hex(8)}, ${hex(32)}, ${row.status}, ${at(row.created)}, ${at(row.updated)})`,
  );
}

async function settlement(db: Db, row: { status: string; created: number; updated: number }): Promise<void> {
  await db.execute(
    sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
                                      valid_after, valid_before, signature, status, created_at, updated_at)
        values (${`0x${hex(20)}`}, ${`0x${hex(32)}`}, ${`0x${hex(20)}`}, 1000, ${hex(32)}, ${hex(32)}, 0,
                4000000000, ${`0x${hex(65)}`}, ${row.status}, ${at(row.created)}, ${at(row.updated)})`,
  );
}

/**
 * What `seedChartRows` puts in the windows (the API test compares the answer with it):
 *  - per hour: issued 1 in the current hour, 2 the hour before; admitted attempts 2 and 4;
 *  - per minute: 5 confirmed transfers 10 minutes ago, 2 submitted payouts 2 minutes ago, 1 failed
 *    x402 action this minute;
 *  - transfers confirmed in the last hour after 1, 2, 3, 4, 10 s and 20 min (p50 3000, p99 1200000);
 *    settlements settled after 500 and 700 ms (p50 500, p99 700);
 *  - findings in the last 24 h: terminal_unknown 2, retryable 1.
 * Each kind also has a row just outside its window, which no chart may count.
 */
export async function seedChartRows(db: Db, now: Date): Promise<{ agentId: string }> {
  const { minute, hour } = chartBuckets(now);
  const [a, b, c, d] = [await identity(db), await identity(db), await identity(db), await identity(db)];

  for (const [agentId, issued] of [
    [a, hour + 5 * MINUTE],
    [b, hour - HOUR + 10 * MINUTE],
    [c, hour - HOUR + 20 * MINUTE],
    [d, hour - 30 * HOUR],
  ] as const) {
    await db.execute(
      sql`insert into registration_issued (agent_id, ip_group, issued_at) values (${agentId}, 'g', ${at(issued)})`,
    );
  }
  for (const [minuteAt, group, count] of [
    [hour + 5 * MINUTE, "*", 2],
    [hour + 5 * MINUTE, "g", 7],
    [hour - HOUR + 10 * MINUTE, "*", 4],
    [hour - 30 * HOUR, "*", 9],
  ] as const) {
    await db.execute(
      sql`insert into registration_attempts (minute, ip_group, count) values (${at(minuteAt)}, ${group}, ${count})`,
    );
  }

  for (const ms of [1_000, 2_000, 3_000, 4_000, 10_000]) {
    const created = minute - 10 * MINUTE;
    await action(db, a, { kind: "transfer", status: "confirmed", created, updated: created + ms });
  }
  // Created before the minute window, confirmed in it: a duration, not an action of the window.
  await action(db, a, {
    kind: "transfer",
    status: "confirmed",
    created: minute - 70 * MINUTE,
    updated: minute - 50 * MINUTE,
  });
  for (let i = 0; i < 2; i++) {
    const created = minute - 2 * MINUTE + 5_000;
    // Moved on a minute later: bucketed by when it was created, not by its last change.
    await action(db, b, { kind: "faucet", status: "submitted", created, updated: created + MINUTE });
  }
  await action(db, c, { kind: "x402", status: "failed", created: minute + 1_000, updated: minute + 2_000 });
  // Outside every window.
  await action(db, c, {
    kind: "transfer",
    status: "confirmed",
    created: minute - 2 * HOUR,
    updated: minute - 2 * HOUR + 5_000,
  });

  for (const ms of [500, 700]) {
    const created = minute - 5 * MINUTE;
    await settlement(db, { status: "settled", created, updated: created + ms });
  }
  await settlement(db, { status: "submitted", created: minute - MINUTE, updated: minute - MINUTE });
  await settlement(db, { status: "settled", created: minute - 3 * HOUR, updated: minute - 3 * HOUR + 900 });

  for (const [cls, when] of [
    ["terminal_unknown", hour + MINUTE],
    ["terminal_unknown", hour + 2 * MINUTE],
    ["retryable", hour - 3 * HOUR],
    ["destructive", hour - 30 * HOUR],
  ] as const) {
    await db.execute(
      sql`insert into identity_findings (agent_id, class, code, at) values (${a}, ${cls}, 'seeded', ${at(when)})`,
    );
  }
  return { agentId: a };
}
