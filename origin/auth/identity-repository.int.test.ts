import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { startWsRelay, type WsRelay } from "../../testing/ws-relay.ts";
import type { Db } from "../db/client.ts";
import { createTokenLookup, findIdentitiesByTokenIds } from "./identity-repository.ts";

// The hottest query of the service: run through node-postgres and through the Neon serverless
// driver (WebSocket → relay → the same Postgres), whose named prepared statements must work too.
describe.each(["pg", "neon"] as const)("token lookup batching (real database, %s driver)", (driver) => {
  let relay: WsRelay | undefined;
  let testDb: TestDatabase;
  type Agent = { agentId: string; tokenId: string };
  const agents: Agent[] = [];

  beforeAll(async () => {
    relay = driver === "neon" ? await startWsRelay() : undefined;
    testDb = await createTestDatabase({ driver, neonWsProxy: relay?.address });
    expect(testDb.handle.driver).toBe(driver);
    await seedFreeKeys(testDb.handle.db, 3);
    for (let i = 0; i < 3; i++) {
      const result = await provisionedIdentity(testDb.handle.db, {
        capabilities: ["read"],
        origin: "operator",
      });
      agents.push({
        agentId: result.agentId,
        tokenId: parseBearerHeader(`Bearer ${result.token}`)!.tokenId,
      });
    }
  });
  afterAll(async () => {
    await testDb.drop();
    await relay?.close();
  });

  function countingFind() {
    const calls: number[] = [];
    const find = (db: Db, ids: readonly string[]) => {
      calls.push(ids.length);
      return findIdentitiesByTokenIds(db, ids);
    };
    return { calls, find };
  }

  it("reads any number of ids, each identity once, whatever the padding of the statement", async () => {
    const unknown = randomBytes(16).toString("hex");
    for (const count of [1, 2, 3, 5]) {
      const ids = [...agents.map((agent) => agent.tokenId), unknown].slice(0, count);
      const found = await findIdentitiesByTokenIds(testDb.handle.db, ids);
      const expected = agents.slice(0, count).map((agent) => agent.agentId);
      expect(found.map((identity) => identity.agentId).sort()).toEqual(expected.sort());
    }
    expect(await findIdentitiesByTokenIds(testDb.handle.db, [])).toEqual([]);
    if (relay) expect(relay.connections).toBeGreaterThan(0);
  });

  it("answers concurrent lookups of one turn with one query, each with its own identity", async () => {
    const { calls, find } = countingFind();
    const lookup = createTokenLookup(testDb.handle.db, { find });
    const unknown = randomBytes(16).toString("hex");
    const asked = Array.from({ length: 30 }, (_, i) => (i % 4 === 3 ? unknown : agents[i % 4]!.tokenId));
    const answers = await Promise.all(asked.map((tokenId) => lookup(tokenId)));
    answers.forEach((identity, i) => {
      const expected = agents.find((agent) => agent.tokenId === asked[i]);
      expect(identity?.agentId).toBe(expected?.agentId);
    });
    expect(calls).toEqual([4]); // three known ids and one unknown, each asked once
  });

  it("splits a turn into batches of at most maxBatch distinct ids", async () => {
    const { calls, find } = countingFind();
    const lookup = createTokenLookup(testDb.handle.db, { find, maxBatch: 2 });
    const ids = [...agents.map((agent) => agent.tokenId), randomBytes(16).toString("hex")];
    const answers = await Promise.all(ids.map((tokenId) => lookup(tokenId)));
    expect(answers.map((identity) => identity?.agentId)).toEqual([
      ...agents.map((agent) => agent.agentId),
      undefined,
    ]);
    expect(calls).toEqual([2, 2]);
  });

  it("while reads are out, later lookups gather into the next batch, read after they arrived", async () => {
    const calls: string[][] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    // The first read is answered by the database at once but handed back only on release.
    const find = async (db: Db, ids: readonly string[]) => {
      calls.push([...ids]);
      const found = await findIdentitiesByTokenIds(db, ids);
      if (calls.length === 1) await held;
      return found;
    };
    const lookup = createTokenLookup(testDb.handle.db, { find, maxInFlight: 1 });
    const [first, second, third] = agents as [Agent, Agent, Agent];
    const firstAnswer = lookup(first.tokenId);
    await sleep(20);
    await testDb.handle.db.execute(
      sql`update agent_identities set revoked = true where agent_id = ${second.agentId}`,
    );
    const later = [lookup(second.tokenId), lookup(third.tokenId)];
    await sleep(20);
    const later2 = lookup(first.tokenId);
    expect(calls).toHaveLength(1);
    release();
    expect((await firstAnswer)?.agentId).toBe(first.agentId);
    const [secondAnswer, thirdAnswer, firstAgain] = await Promise.all([...later, later2]);
    expect(secondAnswer?.revoked).toBe(true);
    expect(thirdAnswer?.agentId).toBe(third.agentId);
    expect(firstAgain?.agentId).toBe(first.agentId);
    expect(calls).toEqual([[first.tokenId], [second.tokenId, third.tokenId, first.tokenId]]);
    await testDb.handle.db.execute(
      sql`update agent_identities set revoked = false where agent_id = ${second.agentId}`,
    );
  });

  it("reads anew in every turn: a revocation shows on the next lookup", async () => {
    const lookup = createTokenLookup(testDb.handle.db);
    const target = agents[2]!;
    expect((await lookup(target.tokenId))?.revoked).toBe(false);
    await testDb.handle.db.execute(
      sql`update agent_identities set revoked = true where agent_id = ${target.agentId}`,
    );
    expect((await lookup(target.tokenId))?.revoked).toBe(true);
  });

  it("fails every waiter of a batch when the read fails", async () => {
    // A fault the database cannot be made to produce on cue: the read itself rejects.
    const lookup = createTokenLookup(testDb.handle.db, {
      find: () => Promise.reject(new Error("connection lost")),
    });
    const results = await Promise.allSettled([lookup(agents[0]!.tokenId), lookup(agents[1]!.tokenId)]);
    expect(results.map((result) => result.status)).toEqual(["rejected", "rejected"]);
  });
});
