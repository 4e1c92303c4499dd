import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { useDatabasesBefore } from "../../testing/migrations-before.ts";
import { fanOutOnce } from "../webhooks/fan-out.ts";
import { queryRows } from "./client.ts";
import { migrateDatabase } from "./migrate.ts";

describe("migration 0040 (the snapshot a webhook endpoint was added at)", () => {
  const { databases, migrationsBefore } = useDatabasesBefore("0040_webhook_created_snapshot");

  it("leaves an endpoint added before it with none, still fanned out by its time; one added after takes its snapshot", async () => {
    const { db } = databases[0]!;
    await migrateDatabase(db, migrationsBefore());
    const [older] = await queryRows<{ id: string }>(
      db,
      sql`insert into webhook_endpoints (url, event_types, secret)
          values ('https://93.184.216.34/hook', '{action.confirmed}', ${`whsec_${randomBytes(32).toString("base64")}`})
          returning id`,
    );

    await migrateDatabase(db);

    const [newer] = await queryRows<{ id: string }>(
      db,
      sql`insert into webhook_endpoints (url, event_types, secret)
          values ('https://93.184.216.34/hook', '{action.confirmed}', ${`whsec_${randomBytes(32).toString("base64")}`})
          returning id`,
    );
    const snapshots = await queryRows<{ id: string; taken: boolean }>(
      db,
      sql`select id, created_snapshot is not null as taken from webhook_endpoints`,
    );
    expect(Object.fromEntries(snapshots.map((row) => [row.id, row.taken]))).toEqual({
      [older!.id]: false,
      [newer!.id]: true,
    });
    const [event] = await queryRows<{ id: string }>(
      db,
      sql`insert into events (agent_id, type, data) values (null, 'action.confirmed', '{}') returning id::text as id`,
    );
    // The fan-out reads below the cluster's horizon: another file's open transaction holds it back.
    for (let run = 0; run < 300; run++) {
      await fanOutOnce(db, { maxPending: 10 });
      const [queued] = await queryRows<{ n: number }>(
        db,
        sql`select count(*)::int as n from webhook_deliveries where event_id = ${event!.id}::bigint`,
      );
      if (queued!.n === 2) break;
      await sleep(100);
    }
    const rows = await queryRows<{ endpoint_id: string }>(
      db,
      sql`select endpoint_id from webhook_deliveries where event_id = ${event!.id}::bigint order by endpoint_id`,
    );
    expect(rows.map((row) => row.endpoint_id)).toEqual([older!.id, newer!.id].sort());
  });
});
