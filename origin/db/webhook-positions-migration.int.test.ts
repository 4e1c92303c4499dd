import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { useDatabasesBefore } from "../../testing/migrations-before.ts";
import { type DatabaseHandle, queryRows } from "./client.ts";
import { migrateDatabase } from "./migrate.ts";

const hex = (bytes: number): string => randomBytes(bytes).toString("hex");

/** Whether the endpoint's place is past the event: the fan-out reads only what is after it. */
const pastEvent = async (db: DatabaseHandle["db"], endpointId: string, eventId: string): Promise<boolean> =>
  (
    await queryRows<{ past: boolean }>(
      db,
      sql`select (w.fan_out_xid, w.fan_out_event_id) >= (e.xid, e.id) as past
          from webhook_endpoints w, events e
          where w.id = ${endpointId}::uuid and e.id = ${eventId}::bigint`,
    )
  )[0]!.past;

describe("migration 0026 (each webhook endpoint's place in the log)", () => {
  const { databases, migrationsBefore } = useDatabasesBefore("0026_webhook_positions", 2);

  const endpoint = async (db: DatabaseHandle["db"]): Promise<string> =>
    (
      await queryRows<{ id: string }>(
        db,
        sql`insert into webhook_endpoints (url, event_types, secret)
            values ('https://93.184.216.34/hook', '{action.confirmed}', ${`whsec_${hex(32)}`}) returning id`,
      )
    )[0]!.id;
  const event = async (db: DatabaseHandle["db"]): Promise<string> =>
    (
      await queryRows<{ id: string }>(
        db,
        sql`insert into events (agent_id, type, data) values (null, 'action.confirmed', '{}') returning id::text as id`,
      )
    )[0]!.id;

  it("starts every endpoint where the shared cursor was, so an event after it is still queued, and drops the cursor", async () => {
    const { db } = databases[0]!;
    await migrateDatabase(db, migrationsBefore());
    const [enabled, disabled] = [await endpoint(db), await endpoint(db)];
    await db.execute(sql`update webhook_endpoints set enabled = false where id = ${disabled!}::uuid`);
    const fannedOut = await event(db);
    // The shared cursor at the first event: the second is not fanned out yet.
    await db.execute(
      sql`insert into webhook_fan_out_cursor (singleton, xid, event_id)
          select 1, xid, id from events where id = ${fannedOut}::bigint`,
    );
    const notYet = await event(db);

    await migrateDatabase(db);

    for (const id of [enabled, disabled]) {
      expect(await pastEvent(db, id!, fannedOut)).toBe(true);
      expect(await pastEvent(db, id!, notYet)).toBe(false);
    }
    const [cursor] = await queryRows<{ exists: boolean }>(
      db,
      sql`select to_regclass('webhook_fan_out_cursor') is not null as exists`,
    );
    expect(cursor!.exists).toBe(false);
  });

  it("starts them at the log's horizon when the fan-out never ran: not behind the horizon it began at, not past what comes after", async () => {
    const { db } = databases[1]!;
    await migrateDatabase(db, migrationsBefore());
    const id = await endpoint(db);
    await event(db);
    // The horizon is the cluster's: another transaction still open anywhere on it (another test
    // file's, with two at once) holds it below an event this test wrote and committed, so the place
    // is held to the horizon read as the migration begins, not to that event.
    const [before] = await queryRows<{ horizon: string }>(
      db,
      sql`select pg_snapshot_xmin(pg_current_snapshot())::text as horizon`,
    );

    await migrateDatabase(db);

    const later = await event(db);
    const [place] = await queryRows<{ xid: string }>(
      db,
      sql`select fan_out_xid::text as xid from webhook_endpoints where id = ${id}::uuid`,
    );
    // Mutation: a default of '0'::xid8 (the log's start) fails this.
    expect(BigInt(place!.xid)).toBeGreaterThanOrEqual(BigInt(before!.horizon));
    expect(await pastEvent(db, id, later)).toBe(false);
  });
});
