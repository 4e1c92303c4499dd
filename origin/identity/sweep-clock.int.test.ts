import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../../testing/enclave-process.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { provisionedIdentity } from "../../testing/seed.ts";
import { afterWholeTicks } from "../../testing/worker-ticks.ts";
import { queryRows } from "../db/client.ts";
import { refillOnce } from "../keypool/refill.ts";
import { createCapabilityMinter } from "../signer/capability-minter.ts";
import { createSignerClient } from "../signer/create-signer-client.ts";
import type { SignerClient } from "../signer/types.ts";

// The identity sweep's window (docs/api.md#identities-keys-and-the-sweep) against a real database,
// the real enclave and a real origin whose clock is off the database host's by five minutes, as an
// operator's hosts may be: the database stamps each proof, so how long ago it was is the
// database's to say. The origin's clock is the test's (an injected clock, the one thing faked).

const ENV_ID = "sweep-clock";
const SKEW_MS = 5 * 60_000;
const WINDOW_SECONDS = 60;

describe("the identity sweep under a clock skew between the origin and the database", () => {
  let testDb: TestDatabase;
  let enclave: EnclaveProcess;
  let live: SignerClient;
  let backupDir: string;
  let origin: TestOrigin | undefined;
  const db = () => testDb.handle.db;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    enclave = await startEnclaveProcess({ envId: ENV_ID });
    live = createSignerClient({ endpoint: `unix://${enclave.socketPath}`, liveIdentityEnabled: true });
    backupDir = await mkdtemp(path.join(tmpdir(), "sweep-clock-"));
  });
  afterEach(async () => {
    await origin?.close();
    origin = undefined;
    await db().execute(
      sql`truncate identity_findings, agent_tokens, key_pool, key_batches, agent_identities cascade`,
    );
  });
  afterAll(async () => {
    await live?.close();
    await enclave?.dispose();
    await testDb?.drop();
    if (backupDir) await rm(backupDir, { recursive: true, force: true });
  });

  /** An identity over a key the real enclave holds, last proved `secondsAgo` by the database's clock. */
  const provedAgo = async (secondsAgo: number): Promise<string> => {
    const authorize = createCapabilityMinter({ authority: enclave.adminSecret, envId: ENV_ID, client: live });
    await refillOnce(
      { db: db(), signer: live, authorize, backupDir, logger: pino({ level: "silent" }) },
      { target: 1, batchSize: 1 },
    );
    const made = await provisionedIdentity(db(), { capabilities: ["read"], origin: "operator" });
    await db().execute(
      sql`update agent_identities set last_verified_at = now() - make_interval(secs => ${secondsAgo})
          where agent_id = ${made.agentId}`,
    );
    return made.agentId;
  };
  /** Seconds since the identity's last proof, by the database's clock. */
  const provedSecondsAgo = async (agentId: string): Promise<number> =>
    (
      await queryRows<{ ago: number }>(
        db(),
        sql`select extract(epoch from now() - last_verified_at)::float8 as ago from agent_identities
            where agent_id = ${agentId}`,
      )
    )[0]!.ago;
  const startSkewed = async (skewMs: number): Promise<void> => {
    origin = await startTestOrigin({
      database: testDb.handle,
      clock: { now: () => new Date(Date.now() + skewMs) },
      workers: ["identity"],
      env: {
        AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
        AGENT_SIGNER_LIVE_IDENTITY_ENABLED: "true",
        AGENT_ENV_ID: ENV_ID,
        IDENTITY_SWEEP_WINDOW_SECONDS: String(WINDOW_SECONDS),
        IDENTITY_SWEEP_PERIOD_SECONDS: "1",
      },
    });
  };
  const untilProved = async (agentId: string): Promise<void> => {
    const deadline = Date.now() + 15_000;
    while ((await provedSecondsAgo(agentId)) > WINDOW_SECONDS && Date.now() < deadline) await sleep(100);
  };

  it("an origin whose clock is five minutes ahead re-proves the identity past the window, not the one proved a moment ago, tick after tick", async () => {
    const fresh = await provedAgo(1);
    const due = await provedAgo(WINDOW_SECONDS + 60);
    await startSkewed(SKEW_MS);
    // The due identity proved again shows the sweep's ticks have run.
    await untilProved(due);
    expect(await provedSecondsAgo(due)).toBeLessThan(WINDOW_SECONDS);
    // Three more whole ticks: read against the origin's clock, the fresh identity looked five
    // minutes old and was proved again at every one of them.
    await afterWholeTicks([origin!], "identity-sweep", 3);
    expect(await provedSecondsAgo(fresh)).toBeGreaterThan(3);
  });

  it("an origin whose clock is five minutes behind still re-proves an identity past the window", async () => {
    const due = await provedAgo(WINDOW_SECONDS + 60);
    await startSkewed(-SKEW_MS);
    await untilProved(due);
    // Read against the origin's clock, its proof looked a minute old: not due for five minutes more.
    expect(await provedSecondsAgo(due)).toBeLessThan(WINDOW_SECONDS);
  });
});
