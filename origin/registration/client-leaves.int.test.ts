import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HEADER_EDGE_SECRET, HEADER_REGISTRATION, HEADER_REGISTRATION_IP } from "../../shared/constants.ts";
import { toHex } from "../../shared/hex.ts";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { type EdgeHandle, startTestEdge } from "../../testing/edge.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../../testing/enclave-process.ts";
import { type HeldLock, holdLock } from "../../testing/held-lock.ts";
import { waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { queryRows } from "../db/client.ts";
import { START_BATCH_LOCK } from "../keypool/batch-repository.ts";
import { updateRegistrationPolicy } from "./policy-repository.ts";

// A registration whose client leaves before its answer (issue-when-keys.ts: "once it is gone, no
// key is taken for it"), against the real parts: Postgres, the enclave making every batch, the
// origin with its key-pool refill, and, for the edge, the worker in Miniflare behind its local
// front (dev/edge.ts), which cuts the worker's request to the origin when its client leaves. The
// test's own locks on the real tables hold the request at the point named, so the client leaves
// there and not somewhere near it.

const EDGE_SECRET = randomBytes(32).toString("hex");

/**
 * How long a cut takes to reach the origin (through the edge: the front, workerd, the origin), as
 * testing/x402-payer-leaves.ts has it. Too short, and the tests fail with the fix in place: the
 * origin would rightly go on for a client it still sees.
 */
const CUT_REACHES_ORIGIN_MS = 500;

let nextAddress = 1;
/** A public address no other request of the file uses (81.3.0.0/16 is ordinary unicast space). */
function publicIp(): string {
  const n = nextAddress++;
  return `81.3.${n >> 8}.${n & 255}`;
}
let nextLoopback = 10;
/** A loopback source address no other request of the file uses: its own IP group at the edge. */
function loopbackIp(): string {
  return `127.0.0.${nextLoopback++}`;
}

/** A registration sent and never read: `leave` closes its connection before any answer. */
type LeavingClient = { leave(): Promise<void> };

function registerAndLeave(
  url: string,
  headers: Record<string, string>,
  localAddress?: string,
): LeavingClient {
  const sent = request(url, {
    method: "POST",
    headers: {
      ...headers,
      [HEADER_REGISTRATION]: "1",
      "content-type": "application/json",
      "content-length": "2",
    },
    ...(localAddress ? { localAddress } : {}),
  });
  let answered = false;
  sent.on("response", () => {
    answered = true;
  });
  // The cut below is the client's own doing.
  sent.on("error", () => {});
  sent.end("{}");
  return {
    async leave() {
      expect(answered, "the registration was answered before its client left").toBe(false);
      const closed = new Promise((resolve) => sent.once("close", resolve));
      sent.destroy();
      await closed;
    },
  };
}

describe("a registration whose client leaves is issued nothing (real enclave; straight and through the edge)", () => {
  let testDb: TestDatabase;
  let enclave: EnclaveProcess;
  let dir: string;
  let origin: TestOrigin;
  let edge: EdgeHandle;
  const db = () => testDb.handle.db;
  const logLines: string[] = [];

  const count = async (query: ReturnType<typeof sql>): Promise<number> =>
    (await queryRows<{ n: number }>(db(), query))[0]!.n;
  /** What a registration takes: an identity, a key, the day's counts. */
  const taken = async () => ({
    publicIdentities: await count(
      sql`select count(*)::int as n from agent_identities where origin = 'public'`,
    ),
    assignedKeys: await count(sql`select count(*)::int as n from key_pool where status = 'assigned'`),
    issued: await count(sql`select count(*)::int as n from registration_issued`),
    countedToday: await count(sql`select coalesce(sum(count), 0)::int as n from registration_admissions`),
  });
  const freeKeys = (): Promise<number> =>
    count(sql`select count(*)::int as n from key_pool where status = 'free'`);
  const attempts = (): Promise<number> =>
    count(sql`select coalesce(sum(count), 0)::int as n from registration_attempts where ip_group = '*'`);

  /** Waits for the origin's log line of the next registration to end, and returns it parsed. */
  const nextRegistrationLine = async (from: number, timeout = 30_000): Promise<Record<string, unknown>> => {
    const ended = (): string | undefined =>
      logLines.slice(from).find((line) => line.includes('"msg":"request"') && line.includes("register"));
    await expect.poll(ended, { timeout, interval: 50 }).toBeDefined();
    return JSON.parse(ended()!) as Record<string, unknown>;
  };

  /** Straight to the origin (the test acts as the edge) or through the edge from a loopback address. */
  const ways = [
    {
      name: "straight to the origin",
      send: (): LeavingClient =>
        registerAndLeave(`${origin.base}/agent/v1/register`, {
          [HEADER_EDGE_SECRET]: EDGE_SECRET,
          [HEADER_REGISTRATION_IP]: publicIp(),
        }),
    },
    {
      name: "through the edge",
      send: (): LeavingClient => registerAndLeave(`${edge.url}/77/agent/v1/register`, {}, loopbackIp()),
    },
  ];

  beforeAll(async () => {
    testDb = await createTestDatabase();
    enclave = await startEnclaveProcess({ envId: "client-leaves" });
    dir = await mkdtemp(path.join(tmpdir(), "client-leaves-"));
    const adminKeyFile = path.join(dir, "admin-authority.key");
    await writeFile(adminKeyFile, toHex(enclave.adminSecret), { mode: 0o600 });
    origin = await startTestOrigin({
      database: testDb.handle,
      workers: ["keypool"],
      onLogLine: (line) => logLines.push(line),
      env: {
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_REGISTRATION_ALLOW_LOOPBACK: "true",
        AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
        AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
        AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
        AGENT_SIGNER_LIVE_IDENTITY_ENABLED: "true",
        AGENT_ADMIN_AUTHORITY_KEY_FILE: adminKeyFile,
        AGENT_ENV_ID: enclave.envId,
        BACKUP_DIR: path.join(dir, "backups"),
        KEY_POOL_TARGET: "20",
        KEY_POOL_BATCH_SIZE: "10",
      },
    });
    edge = await startTestEdge({ originUrl: origin.url, edgeSharedSecret: EDGE_SECRET, onLine: () => {} });
    // The worker's first round: the pool at its target, 10 keys above the spec's reserve of 10.
    const deadline = Date.now() + 60_000;
    while ((await freeKeys()) < 20 && Date.now() < deadline) await sleep(200);
    expect(await freeKeys()).toBe(20);
    await updateRegistrationPolicy(db(), { changes: { paused: false }, reason: "client leaves test" });
  }, 120_000);
  afterAll(async () => {
    await edge?.stop();
    await origin?.close();
    await enclave?.dispose();
    await testDb?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  for (const way of ways) {
    // Before the fix the first issuance was tried whoever was still there: an identity, its key
    // and a place in the day's quotas for a client that had left while its attempt was admitted.
    it(`${way.name}: a client that leaves while its attempt is admitted is issued nothing; the attempt counts`, async () => {
      const before = await taken();
      const attemptsBefore = await attempts();
      const freeBefore = await freeKeys();
      const from = logLines.length;
      // The admission's upsert waits on the test's lock: the request is past every check, before
      // its issuance.
      const admission = await holdLock(db(), sql`lock table registration_attempts in share mode`);
      const client = way.send();
      await waitUntilBlockedBy(db(), {
        holder: admission.pid,
        statement: "insert into registration_attempts",
        what: "the registration's admission at the test's lock",
      });
      await client.leave();
      await sleep(CUT_REACHES_ORIGIN_MS);
      await admission.release();

      const line = await nextRegistrationLine(from);
      expect(await taken(), "nothing taken for a client that left").toEqual(before);
      expect(await freeKeys()).toBe(freeBefore);
      expect(await attempts(), "its attempt was admitted and counted").toBe(attemptsBefore + 1);
      expect(line).toMatchObject({ outcome: "client_gone", admitted: true });
    }, 60_000);

    // Issuances queue on one lock, the policy's row, across every node: under a flood a request
    // waits there longest. Before the fix one whose client left while it queued was issued once
    // its turn came, an identity, a key and a place in the day's quotas for nobody.
    it(`${way.name}: a client that leaves while its issuance waits for the policy lock is issued nothing`, async () => {
      const before = await taken();
      const freeBefore = await freeKeys();
      const from = logLines.length;
      const policy = await holdLock(db(), sql`select 1 from registration_policy where id = 1 for update`);
      const client = way.send();
      await waitUntilBlockedBy(db(), {
        holder: policy.pid,
        statement: "registration_policy",
        what: "the registration's issuance at the policy lock",
      });
      await client.leave();
      await sleep(CUT_REACHES_ORIGIN_MS);
      await policy.release();

      const line = await nextRegistrationLine(from);
      expect(await taken(), "nothing taken for a client that left").toEqual(before);
      expect(await freeKeys()).toBe(freeBefore);
      expect(line).toMatchObject({ outcome: "client_gone", admitted: true });
    }, 60_000);

    // Before the fix the request that left gave up at the refill's next batch and was answered as
    // refused at the reserve: the node reported itself refusing (a registration.at_reserve event
    // to webhooks, a key_reserve refusal on the console's chart) though the refill had just made
    // the keys the next client is issued.
    it(`${way.name}: a client that leaves while it waits for the refill is issued nothing, and the node reports no refusal`, async () => {
      const atReserveEvents = (): Promise<number> =>
        count(sql`select count(*)::int as n from events where type = 'registration.at_reserve'`);
      // The node not refusing, as after any issuance (issuance.ts clears it), whatever the test before left.
      await db().execute(sql`update registration_refusal_state set refusing = null, day = null`);
      const eventsBefore = await atReserveEvents();
      const from = logLines.length;
      await expect.poll(freeKeys, { timeout: 30_000, interval: 100 }).toBeGreaterThanOrEqual(20);
      const freeBefore = await freeKeys();
      await updateRegistrationPolicy(db(), { changes: { keyReserve: freeBefore }, reason: "at the reserve" });
      // Taken in the test, let go in its finally before the policy is put back: that update waits
      // on the policy's lock, and behind a lock of the test's own, held by a failed expectation, it
      // waited out the test's statement bound and hid the failure (a CI run's 'Failed query:
      // rollback', 'Connection terminated unexpectedly').
      const held: HeldLock[] = [];
      try {
        const before = await taken();
        // The refill's batch waits on its start lock; the request's first try waits at the policy's
        // lock, and the test's second take of it queues behind that try before the first is let go:
        // granted once the try has ended, refused at the reserve, and the request waits for the
        // refill's batch. Taken only after the first was let go, the second could be granted before
        // the try (a row's lock goes to whoever asks first once it is free), which then waited for
        // the test, not the refill, and ended only when the test let it go.
        const refill = await holdLock(db(), sql`select pg_advisory_xact_lock(${START_BATCH_LOCK})`);
        held.push(refill);
        const lockPolicy = sql`select 1 from registration_policy where id = 1 for update`;
        const policy = await holdLock(db(), lockPolicy);
        held.push(policy);
        const client = way.send();
        await waitUntilBlockedBy(db(), {
          holder: policy.pid,
          statement: "registration_policy",
          what: "the registration's first try at the policy lock",
        });
        const takingAgain = holdLock(db(), lockPolicy);
        await waitUntilBlockedBy(db(), {
          holder: policy.pid,
          statement: "registration_policy",
          count: 2,
          what: "the test's second take of the policy lock, queued behind the registration's first try",
        });
        await policy.release();
        const policyAgain = await takingAgain;
        held.push(policyAgain);
        await client.leave();
        // Ended as its client left, while the refill's batch still waits on the test's lock: before,
        // it was seen only once the refill's round ended, here at the end of the request's whole
        // wait of 10 s. Within 6 s: a loaded CI machine took the cut longer than 2.5 s to reach
        // the origin through the edge.
        const line = await nextRegistrationLine(from, CUT_REACHES_ORIGIN_MS + 5_500);
        await policyAgain.release();
        await refill.release();

        expect(await taken(), "nothing taken for a client that left").toEqual(before);
        // The batch is made: the next client would be issued a key.
        await expect.poll(freeKeys, { timeout: 30_000, interval: 100 }).toBeGreaterThan(freeBefore);
        expect(await atReserveEvents(), "no registration.at_reserve for a client that left").toBe(
          eventsBefore,
        );
        expect(line).toMatchObject({ outcome: "client_gone", admitted: true });
      } finally {
        for (const lock of held) await lock.release();
        await updateRegistrationPolicy(db(), { changes: { keyReserve: 10 }, reason: "back to the spec's" });
      }
    }, 60_000);
  }
});
