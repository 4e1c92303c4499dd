import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { programArgs } from "../../ops/lib/program-bundles.mjs";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../../testing/enclave-process.ts";
import { startRewritingEnclaveProxy } from "../../testing/fault-enclave.ts";
import { createBackupStore, fileBackupStore, nodeBackupFiles } from "../backup-store.ts";
import { queryRows } from "../db/client.ts";
import { createCapabilityMinter } from "../signer/capability-minter.ts";
import { createSignerClient } from "../signer/create-signer-client.ts";
import type { CapabilityProvider, SignerClient } from "../signer/types.ts";
import { provisionIdentity } from "./provision.ts";
import { makeBatch, type RefillDeps, refillOnce } from "./refill.ts";
import { sweepStuckBatches } from "./sweeper.ts";

const logger = pino({ level: "silent" });

describe("key pool refill, backup writer and sweeper (real enclave, real database)", () => {
  let testDb: TestDatabase;
  let enclave: EnclaveProcess;
  let signer: SignerClient;
  let authorize: CapabilityProvider;
  let backupDir: string;
  let deps: RefillDeps;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    enclave = await startEnclaveProcess({ envId: "keypool-test" });
    signer = createSignerClient({ endpoint: `unix://${enclave.socketPath}`, liveIdentityEnabled: true });
    authorize = createCapabilityMinter({
      authority: enclave.adminSecret,
      envId: enclave.envId,
      client: signer,
    });
    backupDir = await mkdtemp(path.join(tmpdir(), "keypool-backups-"));
    deps = { db: testDb.handle.db, signer, authorize, backupDir, logger };
  });
  afterEach(async () => {
    await testDb.handle.db.execute(
      sql`truncate agent_tokens, key_pool, key_batches, agent_identities cascade`,
    );
  });
  afterAll(async () => {
    await signer?.close();
    await enclave?.dispose();
    await testDb?.drop();
    if (backupDir) await rm(backupDir, { recursive: true, force: true });
  });

  const batches = () =>
    queryRows<{ batch_id: string; status: string; size: number; failure_reason: string | null }>(
      testDb.handle.db,
      sql`select batch_id, status, size, failure_reason from key_batches order by created_at`,
    );
  const keyStates = (batchId: string) =>
    queryRows<{ status: string; n: number }>(
      testDb.handle.db,
      sql`select status, count(*)::int as n from key_pool where batch_id = ${batchId} group by status`,
    );

  it("tops the pool up to the target with backed-up, verified keys the enclave holds", async () => {
    const outcomes = await refillOnce(deps, { target: 12, batchSize: 5 });
    expect(outcomes.map((outcome) => outcome.ok && outcome.value.keys)).toEqual([5, 5, 2]);
    expect((await batches()).map((batch) => batch.status)).toEqual(["available", "available", "available"]);
    const free = await queryRows<{ key_ref: string; address: string; public_key: string }>(
      testDb.handle.db,
      sql`select key_ref, address, public_key from key_pool where status = 'free'`,
    );
    expect(free).toHaveLength(12);
    for (const key of free.slice(0, 3)) {
      const identity = await signer.publicIdentity({ keyRef: key.key_ref });
      expect(identity.ok && identity.value.address.toLowerCase()).toBe(key.address);
      expect(identity.ok && identity.value.namespace).toBe("agent-transfer");
    }
    const files = (await readdir(backupDir)).filter((name) => name.endsWith(".backup"));
    expect(files).toHaveLength(3);
    // Nothing to do once the stock is at the target.
    expect(await refillOnce(deps, { target: 12, batchSize: 5 })).toEqual([]);
  });

  it("makes batches three at a time, and starts none after one fails: the ones already running finish", async () => {
    let writes = 0;
    const outcomes = await refillOnce(
      {
        ...deps,
        // A disk that refuses the round's first backup (fake: a full disk cannot be made here).
        backups: {
          write: async (params) =>
            ++writes === 1
              ? { ok: false, error: { code: "io_error", detail: "ENOSPC: no space left on device" } }
              : fileBackupStore.write(params),
          read: fileBackupStore.read,
        },
      },
      { target: 30, batchSize: 5 },
    );
    // Three started at once; the failure stopped the other three of the round from starting.
    expect(outcomes).toHaveLength(3);
    expect(outcomes.filter((outcome) => !outcome.ok)).toHaveLength(1);
    expect((await batches()).map((batch) => batch.status).sort()).toEqual([
      "available",
      "available",
      "failed",
    ]);
    const [free] = await queryRows<{ n: number }>(
      testDb.handle.db,
      sql`select count(*)::int as n from key_pool where status = 'free'`,
    );
    expect(free!.n).toBe(10);
  });

  it("throws a batch's exception only once the batches running beside it have finished, and starts no other", async () => {
    let writes = 0;
    const round = refillOnce(
      {
        ...deps,
        // A store that throws on the round's first backup (fake: stands for a database or disk
        // failing under the step, which the worker's loop logs and backs off from).
        backups: {
          write: async (params) => {
            if (++writes === 1) throw new Error("the disk went away");
            return fileBackupStore.write(params);
          },
          read: fileBackupStore.read,
        },
      },
      { target: 30, batchSize: 5 },
    );
    await expect(round).rejects.toThrow("the disk went away");
    // The two beside it had finished when the round threw; the other three never started.
    expect((await batches()).map((batch) => batch.status).sort()).toEqual([
      "available",
      "available",
      "generated",
    ]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await batches()).toHaveLength(3);
  });

  it("fails a batch whose backup folder cannot be made, and says why in its failure reason and log", async () => {
    // A real disk refusal: the backup folder's parent is a file, so the folder cannot be created.
    const blocker = path.join(backupDir, "not-a-folder");
    await writeFile(blocker, "");
    const lines: string[] = [];
    const outcome = await makeBatch(
      {
        ...deps,
        backupDir: path.join(blocker, "backups"),
        logger: pino({ level: "warn" }, { write: (line: string) => void lines.push(line) }),
      },
      2,
    );
    expect(outcome).toMatchObject({ ok: false, error: { code: "failed" } });
    const [batch] = await batches();
    expect(batch!.failure_reason).toMatch(/^backup_writer: io_error: ENOTDIR/);
    expect(lines.join("")).toContain("ENOTDIR");
  });

  it("fails a batch whose backup is corrupted before the re-read check, and never frees its keys", async () => {
    const outcome = await makeBatch(
      {
        ...deps,
        // A disk that corrupts the temporary file once it is durable, before the rename.
        backups: createBackupStore({
          ...nodeBackupFiles,
          rename: async (from, to) => {
            const [temp] = (await readdir(backupDir)).filter((name) => name.endsWith(".tmp"));
            const file = path.join(backupDir, temp!);
            const bytes = await readFile(file);
            bytes[bytes.length - 1]! ^= 0xff;
            await writeFile(file, bytes);
            await nodeBackupFiles.rename(from, to);
          },
        }),
      },
      3,
    );
    expect(outcome).toMatchObject({
      ok: false,
      error: {
        code: "failed",
        reason: "backup_writer: reread_hash_mismatch: the file read back differs from the envelope",
      },
    });
    const [batch] = await batches();
    expect(batch).toMatchObject({
      status: "failed",
      failure_reason: "backup_writer: reread_hash_mismatch: the file read back differs from the envelope",
    });
    expect(await keyStates(batch!.batch_id)).toEqual([{ status: "quarantined", n: 3 }]);
    // The corrupted file is not left as a backup: a recovery of the folder would refuse it on every
    // run, and its runbook runs `recover` again until nothing is refused.
    expect(await readdir(backupDir)).not.toContain(`${batch!.batch_id}.backup`);
  });

  it("fails a batch whose written backup is corrupted before the enclave verifies it", async () => {
    const outcome = await makeBatch(
      {
        ...deps,
        // The backup is written and re-read whole; the file is corrupted when the batch reads it
        // back for the enclave to verify (after it is recorded as backup_written).
        backups: {
          write: (params) => fileBackupStore.write(params),
          read: async (file, expectedSha256) => {
            const bytes = await readFile(file);
            bytes[Math.floor(bytes.length / 2)]! ^= 0x01;
            await writeFile(file, bytes);
            return fileBackupStore.read(file, expectedSha256);
          },
        },
      },
      3,
    );
    expect(outcome).toMatchObject({
      ok: false,
      error: { code: "failed", reason: "backup_file: hash_mismatch" },
    });
    const [batch] = await batches();
    expect(batch!.status).toBe("failed");
    expect(await keyStates(batch!.batch_id)).toEqual([{ status: "quarantined", n: 3 }]);
    expect(await provisionIdentity(testDb.handle.db, { capabilities: ["read"], origin: "operator" })).toEqual(
      {
        ok: false,
        error: { code: "agent_key_pool_exhausted" },
      },
    );
  });

  it("fails a batch whose backup the enclave verifies as other keys (fake: a proxy rewriting verify_backup)", async () => {
    // The real enclave cannot be made to verify other keys; the named fake forwards everything to
    // it and swaps the public key of one verified key for another's.
    const proxy = await startRewritingEnclaveProxy(enclave.socketPath, (op, response) => {
      if (op !== "verify_backup" || response.ok !== true) return response;
      const result = response.result as { keys: Array<{ public_key: string }> };
      const [first, second] = result.keys;
      return {
        ...response,
        result: { ...result, keys: [{ ...first, public_key: second!.public_key }, ...result.keys.slice(1)] },
      };
    });
    const proxied = createSignerClient({ endpoint: proxy.endpoint, liveIdentityEnabled: true });
    try {
      const outcome = await makeBatch(
        {
          ...deps,
          signer: proxied,
          authorize: createCapabilityMinter({
            authority: enclave.adminSecret,
            envId: enclave.envId,
            client: proxied,
          }),
        },
        3,
      );
      expect(outcome).toMatchObject({
        ok: false,
        error: { code: "failed", reason: "verify_backup: keys differ from the batch" },
      });
      const [batch] = await batches();
      expect(batch).toMatchObject({
        status: "failed",
        failure_reason: "verify_backup: keys differ from the batch",
      });
      expect(await keyStates(batch!.batch_id)).toEqual([{ status: "quarantined", n: 3 }]);
    } finally {
      await proxied.close();
      await proxy.close();
    }
  });

  it("leaves a batch the sweeper fails when the process is killed between the temporary write and the rename", async () => {
    const keyFile = path.join(backupDir, "admin.key");
    await writeFile(keyFile, Buffer.from(enclave.adminSecret).toString("hex"), { mode: 0o600 });
    const crashDir = path.join(backupDir, "crash");
    const signal = await new Promise<string | null>((resolve) => {
      const child = execFile(process.execPath, programArgs("testing/refill-crash.ts"), {
        env: {
          ...process.env,
          DATABASE_URL: testDb.url,
          ENCLAVE_SOCKET: enclave.socketPath,
          ADMIN_KEY_FILE: keyFile,
          ENV_ID: enclave.envId,
          BACKUP_DIR: crashDir,
        },
      });
      child.once("exit", (_code, killedBy) => resolve(killedBy));
    });
    expect(signal).toBe("SIGKILL");

    const [batch] = await batches();
    expect(batch!.status).toBe("generated");
    expect(await keyStates(batch!.batch_id)).toEqual([{ status: "pending", n: 4 }]);
    const left = await readdir(crashDir);
    expect(left.some((name) => name.endsWith(".tmp"))).toBe(true);
    expect(left.some((name) => name.endsWith(".backup"))).toBe(false);

    // Not stuck long enough yet: the sweeper leaves it alone.
    const sweep = () => sweepStuckBatches(testDb.handle.db, logger, { stuckAfterSeconds: 300 });
    expect(await sweep()).toEqual([]);
    // Its last step 301 s ago, by the database's clock, which stamps the steps and reads their age.
    await testDb.handle.db.execute(
      sql`update key_batches set status_changed_at = status_changed_at - interval '301 seconds'
          where batch_id = ${batch!.batch_id}`,
    );
    expect(await sweep()).toEqual([batch!.batch_id]);
    expect((await batches())[0]).toMatchObject({ status: "failed", failure_reason: "stuck in generated" });
    expect(await keyStates(batch!.batch_id)).toEqual([{ status: "quarantined", n: 4 }]);
    // Sweeping again changes nothing; the quarantined keys are never handed out.
    expect(await sweep()).toEqual([]);
    expect(await provisionIdentity(testDb.handle.db, { capabilities: ["read"], origin: "operator" })).toEqual(
      {
        ok: false,
        error: { code: "agent_key_pool_exhausted" },
      },
    );
  });
});
