import { sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { holdLock } from "../../testing/held-lock.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import { findIdentityByTokenId } from "../auth/identity-repository.ts";
import { secretMatches } from "../auth/token.ts";
import { queryRows } from "../db/client.ts";
import { setIdentityEnabled } from "../identity/identity-admin.ts";
import { applyOutcome } from "../identity/sweep.ts";
import { provisionIdentity } from "./provision.ts";

describe("provisionIdentity", () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase({ maxConnections: 20 });
  });
  afterEach(async () => {
    await testDb.handle.db.execute(
      sql`truncate agent_tokens, identity_findings, key_pool, key_batches, agent_identities cascade`,
    );
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it("issues a token that authenticates, bound to one claimed key", async () => {
    const { db } = testDb.handle;
    const [key] = await seedFreeKeys(db, 1);
    const result = await provisionIdentity(db, { capabilities: ["transfer", "read"], origin: "operator" });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value).toMatchObject({
      assignedWallet: key!.address,
      keyRef: key!.keyRef,
      capabilities: ["read", "transfer"],
    });
    const parsed = parseBearerHeader(`Bearer ${result.value.token}`);
    const stored = await findIdentityByTokenId(db, parsed!.tokenId);
    expect(stored?.agentId).toBe(result.value.agentId);
    expect(secretMatches(parsed!.secret, stored!.secretHash)).toBe(true);
    // Only the hash is stored: the secret appears in no column of the token or identity rows.
    const leaked = await queryRows(
      db,
      sql`select 1 from agent_tokens t join agent_identities i using (agent_id)
          where t::text like ${`%${parsed!.secret}%`} or i::text like ${`%${parsed!.secret}%`}`,
    );
    expect(leaked).toEqual([]);
    const [row] = await queryRows<{ status: string; assigned_agent_id: string }>(
      db,
      sql`select status, assigned_agent_id from key_pool where key_ref = ${key!.keyRef}`,
    );
    expect(row).toEqual({ status: "assigned", assigned_agent_id: result.value.agentId });
  });

  it("refuses an unknown capability before writing anything", async () => {
    const { db } = testDb.handle;
    await seedFreeKeys(db, 1);
    for (const capabilities of [["read", "admin"], [], ["READ"]]) {
      const result = await provisionIdentity(db, { capabilities, origin: "operator" });
      expect(result).toMatchObject({ ok: false, error: { code: "validation_failed" } });
    }
    expect(await queryRows(db, sql`select 1 from agent_identities`)).toEqual([]);
    expect(await queryRows(db, sql`select status from key_pool`)).toEqual([{ status: "free" }]);
  });

  it("gives 200 concurrent callers 150 distinct keys and 50 pool_exhausted, leaving no identity without a key", async () => {
    const { db } = testDb.handle;
    await seedFreeKeys(db, 150);
    const results = await Promise.all(
      Array.from({ length: 200 }, () =>
        provisionIdentity(db, { capabilities: ["read"], origin: "operator" }),
      ),
    );
    const issued = results.flatMap((result) => (result.ok ? [result.value] : []));
    const refused = results.flatMap((result) => (result.ok ? [] : [result.error.code]));
    expect(issued).toHaveLength(150);
    expect(new Set(issued.map((identity) => identity.assignedWallet)).size).toBe(150);
    expect(refused).toEqual(Array(50).fill("agent_key_pool_exhausted"));

    const [counts] = await queryRows<{ identities: number; assigned: number; free: number; orphans: number }>(
      db,
      sql`select
        (select count(*)::int from agent_identities) as identities,
        (select count(*)::int from key_pool where status = 'assigned') as assigned,
        (select count(*)::int from key_pool where status = 'free') as free,
        (select count(*)::int from agent_identities i
           left join key_pool k on k.key_ref = i.agent_transfer_key_ref and k.assigned_agent_id = i.agent_id
           where k.key_ref is null) as orphans`,
    );
    expect(counts).toEqual({ identities: 150, assigned: 150, free: 0, orphans: 0 });
  });

  it("provisions callers of one turn together: one transaction for each kind of identity, each caller its own token, key and capabilities, a batch's keys oldest first in call order", async () => {
    const { db } = testDb.handle;
    await seedFreeKeys(db, 12);
    const oldestFirst = await queryRows<{ key_ref: string }>(
      db,
      sql`select key_ref from key_pool order by created_at, key_ref`,
    );
    const kinds = [...Array(6).fill(["read"]), ...Array(4).fill(["transfer", "read"])] as string[][];
    const results = await Promise.all(
      kinds.map((capabilities) => provisionIdentity(db, { capabilities, origin: "operator" })),
    );
    const issued = results.map((result) => {
      if (!result.ok) throw new Error(result.error.code);
      return result.value;
    });
    expect(new Set(issued.map((identity) => identity.keyRef)).size).toBe(10);
    // The two kinds' batches run at once, so either may lock the oldest keys first; within a batch
    // its callers get its keys oldest first, in the order they called.
    const age = new Map(oldestFirst.map((row, rank) => [row.key_ref, rank]));
    for (const kind of [issued.slice(0, 6), issued.slice(6)]) {
      const ranks = kind.map((identity) => age.get(identity.keyRef)!);
      expect(ranks).toEqual([...ranks].sort((a, b) => a - b));
    }
    for (const [index, identity] of issued.entries()) {
      const parsed = parseBearerHeader(`Bearer ${identity.token}`)!;
      const stored = await findIdentityByTokenId(db, parsed.tokenId);
      expect(stored?.agentId).toBe(identity.agentId);
      expect(secretMatches(parsed.secret, stored!.secretHash)).toBe(true);
      expect(stored?.capabilities).toEqual(index < 6 ? ["read"] : ["read", "transfer"]);
    }
    // now() is the transaction's start: one created_at for each kind means one transaction each.
    const transactions = await queryRows<{ capabilities: string; at: number }>(
      db,
      sql`select capabilities::text, count(distinct created_at)::int as at
          from agent_identities group by capabilities order by cardinality(capabilities)`,
    );
    expect(transactions).toEqual([
      { capabilities: "{read}", at: 1 },
      { capabilities: "{read,transfer}", at: 1 },
    ]);
  });

  it("answers pool_busy when every free row is locked by another transaction, and writes nothing", async () => {
    const { db } = testDb.handle;
    await seedFreeKeys(db, 3);
    const free = await holdLock(db, sql`select key_ref from key_pool where status = 'free' for update`);
    const result = await provisionIdentity(db, { capabilities: ["read"], origin: "public" });
    expect(result).toEqual({ ok: false, error: { code: "agent_key_pool_busy" } });
    await free.release();
    expect(await queryRows(db, sql`select 1 from agent_identities`)).toEqual([]);

    // Once the locks are gone the same call succeeds.
    const after = await provisionIdentity(db, { capabilities: ["read"], origin: "public" });
    expect(after.ok).toBe(true);
  });

  it("never hands out again the key of an identity disabled by the operator or by the sweep", async () => {
    const db = testDb.handle.db;
    await seedFreeKeys(db, 3);
    const provision = () => provisionIdentity(db, { capabilities: ["read"], origin: "operator" });
    const [byOperator, bySweep] = [await provision(), await provision()];
    if (!byOperator.ok || !bySweep.ok) throw new Error("provisioning failed");
    const disabled = await setIdentityEnabled(db, {
      agentId: byOperator.value.agentId,
      enabled: false,
      reason: "suspicious traffic",
      source: "console",
    });
    expect(disabled.ok).toBe(true);
    expect(
      await applyOutcome(db, bySweep.value.agentId, {
        verified: false,
        class: "destructive",
        code: "wallet_mismatch",
        detail: "test",
      }),
    ).toBe("disabled");
    const keysOf = () =>
      queryRows<{ key_ref: string; status: string; assigned_agent_id: string | null }>(
        db,
        sql`select key_ref, status, assigned_agent_id::text from key_pool
            where key_ref in (${byOperator.value.keyRef}, ${bySweep.value.keyRef}) order by key_ref`,
      );
    const held = [
      { key_ref: byOperator.value.keyRef, status: "assigned", assigned_agent_id: byOperator.value.agentId },
      { key_ref: bySweep.value.keyRef, status: "assigned", assigned_agent_id: bySweep.value.agentId },
    ].sort((a, b) => (a.key_ref < b.key_ref ? -1 : 1));
    expect(await keysOf()).toEqual(held);
    // The one free key left goes to the next identity; after it the pool is empty, the two
    // disabled identities' keys notwithstanding.
    const next = await provision();
    if (!next.ok) throw new Error(next.error.code);
    expect([byOperator.value.keyRef, bySweep.value.keyRef]).not.toContain(next.value.keyRef);
    expect(await provision()).toEqual({ ok: false, error: { code: "agent_key_pool_exhausted" } });
    expect(await keysOf()).toEqual(held);
  });

  it("answers pool_exhausted on an empty pool", async () => {
    const result = await provisionIdentity(testDb.handle.db, { capabilities: ["read"], origin: "operator" });
    expect(result).toEqual({ ok: false, error: { code: "agent_key_pool_exhausted" } });
  });
});
