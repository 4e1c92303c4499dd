import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { send } from "../../testing/http.ts";
import { newKey } from "../../testing/money-client.ts";
import { type OriginProcess, spawnOrigin } from "../../testing/origin-process.ts";
import { parsePrometheusText } from "../../testing/prometheus.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { queryRows } from "../db/client.ts";

// An origin stopping (SIGTERM, as a restart does) while agents wait on `?wait=` for their actions
// (docs/events.md#waiting-for-an-action): the real origin process on a real Postgres.

describe("an origin stopped while it holds ?wait= requests (origin process, real Postgres)", () => {
  let database: TestDatabase;
  let origin: OriginProcess | undefined;
  const adminToken = randomBytes(32).toString("hex");

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await origin?.stop();
    await database?.drop();
  });

  it("answers each wait at once with the action as it stands, and exits 0 without waiting out its drain", async () => {
    const db = database.handle.db;
    await seedFreeKeys(db, 1);
    const agent = await provisionedIdentity(db, { capabilities: ["read"], origin: "operator" });
    // An action in flight that nothing moves: only the wait's end, or the origin's, answers it.
    const [{ action_id: actionId } = { action_id: "" }] = await queryRows<{ action_id: string }>(
      db,
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address)
          values (${agent.agentId}::uuid, 'transfer', ${newKey()}, 'test', 1234567, '0x00000000000000000000000000000000000000aa')
          returning action_id`,
    );
    origin = await spawnOrigin({
      env: { DATABASE_URL: database.url, AGENT_GATEWAY_ENABLED: "true", AGENT_ADMIN_API_TOKEN: adminToken },
    });
    const base = origin.base;
    const waiting = send(`${base}/agent/v1/actions/${actionId}?wait=30`, {
      headers: { authorization: `Bearer ${agent.token}` },
    }).then(
      (answer) => ({ answer, at: Date.now() }),
      (error: unknown) => ({ error, at: Date.now() }),
    );
    // The request has read its action and waits for a change.
    await expect
      .poll(
        async () => {
          const metrics = await fetch(`${base}/metrics`, {
            headers: { authorization: `Bearer ${adminToken}` },
          });
          return parsePrometheusText(await metrics.text()).value("origin_events_action_waits");
        },
        { timeout: 10_000, interval: 50 },
      )
      .toBe(1);

    const stoppedAt = Date.now();
    const exited = origin.stop();
    const waited = await waiting;
    expect("answer" in waited ? waited.answer.status : waited.error).toBe(200);
    if (!("answer" in waited)) return;
    expect((waited.answer.body as ActionView).status).toBe("requested");
    expect(waited.at - stoppedAt).toBeLessThan(3_000);
    expect(await exited).toBe(0);
    expect(Date.now() - stoppedAt).toBeLessThan(5_000);
  }, 60_000);
});
