import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows } from "../origin/db/client.ts";
import { refillOnce } from "../origin/keypool/refill.ts";
import { runRestoreDrill } from "../origin/keypool/restore-drill.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import { createTestDatabase, type TestDatabase } from "./test/database.ts";
import { type EnclaveProcess, startEnclaveProcess } from "./test/enclave-process.ts";
import { startRewritingEnclaveProxy } from "./test/fault-enclave.ts";

type Run = { code: number; stdout: string; stderr: string };

describe("npm run restore-drill", () => {
  let testDb: TestDatabase;
  let enclave: EnclaveProcess;
  let dir: string;
  let batchIds: string[];

  const drill = (...args: string[]): Promise<Run> =>
    new Promise((resolve) => {
      execFile(
        process.execPath,
        ["--import", "tsx", "scripts/restore-drill.ts", ...args],
        {
          env: {
            ...process.env,
            DATABASE_URL: testDb.url,
            AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
            AGENT_ENV_ID: enclave.envId,
          },
        },
        (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      );
    });
  const evidence = () =>
    queryRows<{ batch_id: string; key_count: number }>(
      testDb.handle.db,
      sql`select batch_id, key_count from restore_evidence order by restored_at`,
    );

  beforeAll(async () => {
    testDb = await createTestDatabase();
    enclave = await startEnclaveProcess({ envId: "drill-env" });
    dir = await mkdtemp(path.join(tmpdir(), "restore-drill-"));
    const signer = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    const authorize = createCapabilityMinter({
      authority: enclave.adminSecret,
      envId: enclave.envId,
      client: signer,
    });
    const outcomes = await refillOnce(
      {
        db: testDb.handle.db,
        signer,
        authorize,
        backupDir: path.join(dir, "backups"),
        logger: pino({ level: "silent" }),
      },
      { target: 9, batchSize: 3 },
    );
    batchIds = outcomes.map((outcome) => outcome.batchId);
    await signer.close();
    await writeFile(path.join(dir, "recovery.key"), Buffer.from(enclave.recoverySecret).toString("hex"));
    await writeFile(path.join(dir, "admin.key"), Buffer.from(enclave.adminSecret).toString("hex"));
  });
  afterAll(async () => {
    await enclave?.dispose();
    await testDb?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("restores a batch into a scratch namespace, matches its public keys and records evidence", async () => {
    const result = await drill("--batch", batchIds[0]!, "--recovery-key", path.join(dir, "recovery.key"));
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/restored into scratch-[0-9a-f]{16} and matched; evidence recorded/);
    expect(await evidence()).toEqual([{ batch_id: batchIds[0], key_count: 3 }]);
  });

  it("refuses an admin key in place of the recovery key, recording nothing", async () => {
    const result = await drill("--batch", batchIds[1]!, "--recovery-key", path.join(dir, "admin.key"));
    expect(result.code).toBe(1);
    expect(result.stdout).toContain("capability_rejected");
    expect(await evidence()).toHaveLength(1);
  });

  it("refuses a backup file that no longer matches its recorded hash", async () => {
    const [batch] = await queryRows<{ backup_path: string }>(
      testDb.handle.db,
      sql`select backup_path from key_batches where batch_id = ${batchIds[1]!}`,
    );
    const bytes = await readFile(batch!.backup_path);
    bytes[10]! ^= 0xff;
    await writeFile(batch!.backup_path, bytes);
    const result = await drill("--batch", batchIds[1]!, "--recovery-key", path.join(dir, "recovery.key"));
    expect(result).toMatchObject({ code: 1, stdout: "restore-drill: failed: backup file hash_mismatch\n" });
    expect(await evidence()).toHaveLength(1);
  });

  it("explains its usage", async () => {
    expect((await drill()).code).toBe(2);
    expect(
      (await drill("--batch", "00000000-0000-4000-8000-000000000000", "--recovery-key", "x")).stdout,
    ).toContain("no batch");
  });

  it("records no evidence when the restored keys differ from the batch's (fake: a proxy rewriting restore_backup)", async () => {
    // The real enclave cannot be made to restore other keys; the named fake forwards everything
    // to it and swaps the public key of one restored key for another's.
    const proxy = await startRewritingEnclaveProxy(enclave.socketPath, (op, response) => {
      if (op !== "restore_backup" || response.ok !== true) return response;
      const result = response.result as { keys: Array<{ public_key: string }> };
      const [first, second] = result.keys;
      return {
        ...response,
        result: { ...result, keys: [{ ...first, public_key: second!.public_key }, ...result.keys.slice(1)] },
      };
    });
    const signer = createSignerClient({ endpoint: proxy.endpoint, liveIdentityEnabled: true });
    try {
      const authorize = createCapabilityMinter({
        authority: enclave.recoverySecret,
        envId: enclave.envId,
        client: signer,
      });
      const before = (await evidence()).length;
      const result = await runRestoreDrill(testDb.handle.db, signer, authorize, batchIds[2]!);
      expect(result).toEqual({
        ok: false,
        reason: "restored keys differ from the batch (1 mismatched of 3)",
      });
      expect(await evidence()).toHaveLength(before);
    } finally {
      await signer.close();
      await proxy.close();
    }
  });
});
