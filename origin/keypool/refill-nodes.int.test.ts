import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../../testing/enclave-process.ts";
import { queryRows } from "../db/client.ts";
import { createCapabilityMinter } from "../signer/capability-minter.ts";
import { createSignerClient } from "../signer/create-signer-client.ts";
import type { SignerClient } from "../signer/types.ts";
import { makeBatch, type RefillDeps, refillOnce } from "./refill.ts";

const logger = pino({ level: "silent" });

// Several origins share one database and one enclave, each with its own refill worker
// (docs/operations.md#the-key-pool-refills-on-demand).
describe("origins refilling one key pool at once (real enclave, real database)", () => {
  let testDb: TestDatabase;
  let enclave: EnclaveProcess;
  const signers: SignerClient[] = [];
  let backupDir: string;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    enclave = await startEnclaveProcess({ envId: "keypool-nodes" });
    backupDir = await mkdtemp(path.join(tmpdir(), "keypool-nodes-"));
  });
  afterEach(async () => {
    await testDb.handle.db.execute(sql`truncate key_pool, key_batches cascade`);
  });
  afterAll(async () => {
    for (const signer of signers) await signer.close();
    await enclave?.dispose();
    await testDb?.drop();
    if (backupDir) await rm(backupDir, { recursive: true, force: true });
  });

  /** An origin's refill: its own connection to the enclave, minting from the shared admin key. */
  const origin = (): RefillDeps => {
    const signer = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    signers.push(signer);
    return {
      db: testDb.handle.db,
      signer,
      authorize: createCapabilityMinter({
        authority: enclave.adminSecret,
        envId: enclave.envId,
        client: signer,
      }),
      backupDir,
      logger,
    };
  };
  const freeKeys = async (): Promise<number> => {
    const [row] = await queryRows<{ n: number }>(
      testDb.handle.db,
      sql`select count(*)::int as n from key_pool where status = 'free'`,
    );
    return row!.n;
  };

  it("two refills woken together make the target between them, not each", async () => {
    // One enclave connection for both rounds, so this test sees only the database's side.
    const deps = origin();
    const params = { target: 20, batchSize: 10, wholeBatches: true };
    const rounds = await Promise.all([refillOnce(deps, params), refillOnce(deps, params)]);
    expect(rounds.flat().filter((outcome) => !outcome.ok)).toEqual([]);
    expect(rounds.flat()).toHaveLength(2);
    expect(await freeKeys()).toBe(20);
  });

  it("two origins making batches at once, each minting from the admin key, both get their batches", async () => {
    // Each origin asks the enclave for the next counter and mints with it: the two take turns
    // only inside one origin, so across them both can mint the same counter.
    const [a, b] = [origin(), origin()];
    const outcomes = await Promise.all([a, b, a, b, a, b].map((deps) => makeBatch(deps, 2)));
    expect(outcomes.filter((outcome) => !outcome.ok)).toEqual([]);
    expect(await freeKeys()).toBe(12);
  });
});
