import type { ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256 } from "../origin/backup-store.ts";
import { queryRows } from "../origin/db/client.ts";
import { batchIdOf, makeBatch, refillOnce } from "../origin/keypool/refill.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { toHex } from "../shared/hex.ts";
import {
  randomX25519PrivateKey,
  recoveryKeyFingerprint,
  x25519PublicKey,
} from "../shared/recovery-envelope.ts";
import { sleep } from "../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import {
  createEnclaveFixture,
  type EnclaveProcess,
  startEnclaveProcess,
} from "../testing/enclave-process.ts";
import { forgeEnvelope, unsignedCopy } from "../testing/forged-backup-envelope.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { createRestoreDriller } from "./lib/restore-driller.ts";
import { startThrowawayEnclave } from "./lib/throwaway-enclave.ts";

describe("npm run restore-drill (into a throwaway enclave, from the recovery key)", () => {
  let testDb: TestDatabase;
  let enclave: EnclaveProcess;
  let dir: string;
  /** The drill's TMPDIR: its throwaway enclave's folder must be gone after every run. */
  let drillTmp: string;
  let batchIds: string[];
  const file = (name: string) => path.join(dir, name);

  const drill = (...args: string[]): Promise<ToolRun> =>
    runTool("ops/restore-drill.ts", args, {
      env: {
        TMPDIR: drillTmp,
        DATABASE_URL: testDb.url,
        AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
        AGENT_ENV_ID: enclave.envId,
      },
    });
  const keys = ["--recovery-key", "", "--recovery-enc-key", ""];
  const withKeys = (batch: string, authority = "recovery.key", encryption = "recovery-enc.key") => {
    keys[1] = file(authority);
    keys[3] = file(encryption);
    return ["--batch", batch, ...keys];
  };
  const evidence = () =>
    queryRows<{
      batch_id: string;
      key_count: number;
      method: string;
      recovery_key_sha256: string;
      proven_key_ref: string;
    }>(
      testDb.handle.db,
      sql`select batch_id, key_count, method, recovery_key_sha256, proven_key_ref from restore_evidence order by restored_at`,
    );
  const backupOf = async (batchId: string) =>
    (
      await queryRows<{ backup_path: string }>(
        testDb.handle.db,
        sql`select backup_path from key_batches where batch_id = ${batchId}`,
      )
    )[0]!.backup_path;
  /** Replaces a batch's backup file and the hash recorded for it (a fault before the hash was taken). */
  const replaceBackup = async (batchId: string, bytes: Uint8Array) => {
    const backupPath = await backupOf(batchId);
    await writeFile(backupPath, bytes);
    await testDb.handle.db.execute(
      sql`update key_batches set backup_sha256 = ${sha256(bytes)} where batch_id = ${batchId}`,
    );
  };
  /** Nothing of a throwaway enclave is left: no folder under its TMPDIR, no process using one. */
  const expectNothingLeft = async () => {
    // tsx keeps its compile cache there too (tsx-N); the drill's own folders are restore-drill-*.
    expect((await readdir(drillTmp)).filter((name) => !name.startsWith("tsx-"))).toEqual([]);
    const running = async (): Promise<string[]> => {
      const pids: string[] = [];
      for (const pid of await readdir("/proc")) {
        if (!/^\d+$/.test(pid)) continue;
        const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
        if (cmdline.includes(drillTmp)) pids.push(pid);
      }
      return pids;
    };
    // A throwaway told by its parent's exit deletes its folder and then exits: on a loaded machine
    // a suite run found it between the two (CI-like load, twice), so its end is waited for, bounded.
    await expect.poll(running, { timeout: 10_000, interval: 100 }).toEqual([]);
  };

  beforeAll(async () => {
    testDb = await createTestDatabase();
    enclave = await startEnclaveProcess({ envId: "drill-env" });
    dir = await mkdtemp(path.join(tmpdir(), "restore-drill-test-"));
    drillTmp = file("tmp");
    await mkdir(drillTmp);
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
        backupDir: file("backups"),
        logger: pino({ level: "silent" }),
      },
      { target: 18, batchSize: 3 },
    );
    batchIds = outcomes.map(batchIdOf);
    await signer.close();
    await writeFile(file("recovery.key"), toHex(enclave.recoverySecret), { mode: 0o600 });
    await writeFile(file("admin.key"), toHex(enclave.adminSecret), { mode: 0o600 });
    await writeFile(file("recovery-enc.key"), toHex(enclave.recoveryEncKey), { mode: 0o600 });
    await writeFile(file("other-enc.key"), toHex(randomX25519PrivateKey()), { mode: 0o600 });
  });
  afterAll(async () => {
    await enclave?.dispose();
    await testDb?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("restores a batch into a throwaway enclave, matches it, proves a key and records evidence; nothing restored stays", async () => {
    const liveKeySets = (await readdir(path.join(enclave.dataDir, "keys"))).length;
    const result = await drill(...withKeys(batchIds[0]!));
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /restore-drill: batch [0-9a-f-]{36}: 3 keys restored into a throwaway enclave and matched; key [0-9a-f]{64} signed and verified; evidence recorded\n/,
    );
    const [row] = await evidence();
    const poolRefs = await queryRows<{ key_ref: string }>(
      testDb.handle.db,
      sql`select key_ref from key_pool where batch_id = ${batchIds[0]!}`,
    );
    expect(row).toMatchObject({
      batch_id: batchIds[0],
      key_count: 3,
      method: "recovery_key_new_enclave",
      recovery_key_sha256: recoveryKeyFingerprint(x25519PublicKey(enclave.recoveryEncKey)),
    });
    expect(poolRefs.map((key) => key.key_ref)).toContain(row!.proven_key_ref);
    // The live enclave was only asked for its public identity: it holds no new key set.
    expect((await readdir(path.join(enclave.dataDir, "keys"))).length).toBe(liveKeySets);
    await expectNothingLeft();
  });

  it("has the throwaway enclave open the envelope: the recovery key is loaded into it and the envelope restored as it is on disk", async () => {
    // In process, to read the throwaway enclave's own log lines.
    const lines: string[] = [];
    const signer = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    const identity = await signer.getSealedIdentity();
    await signer.close();
    if (!identity.ok) throw new Error(identity.error.code);
    const driller = createRestoreDriller({
      identity: identity.value,
      recoveryAuthority: enclave.recoverySecret,
      recoveryEncryptionKey: enclave.recoveryEncKey,
      onLog: (line) => lines.push(line),
    });
    try {
      expect(await driller.drill(testDb.handle.db, batchIds[5]!)).toMatchObject({
        ok: true,
        value: { keys: 3 },
      });
    } finally {
      await driller.close();
    }
    // Each line is "[drill-enclave] " and the enclave's JSON log record.
    const records = lines
      .filter((line) => line.includes("{"))
      .map((line) => JSON.parse(line.slice(line.indexOf("{"))) as { msg?: string; op?: string });
    const messages = records.map((record) => record.msg);
    expect(messages).toEqual(
      expect.arrayContaining(["capability accepted", "recovery key loaded", "backup restored"]),
    );
    expect(messages.indexOf("recovery key loaded")).toBeLessThan(messages.indexOf("backup restored"));
    const accepted = records
      .filter((record) => record.msg === "capability accepted")
      .map((record) => record.op);
    expect(accepted).toEqual(["load_recovery_key", "restore_backup"]);
    expect(await evidence()).toHaveLength(2);
    await expectNothingLeft();
  });

  it("records no evidence when the restored key's identity proof does not verify", async () => {
    // A throwaway enclave that restores the batch faithfully but answers the identity proof with
    // another restored key's signature: a fault the real program does not make, so a fake in front
    // of it, named. Mutation: recording evidence without verifying the proof records it here.
    const signer = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    const identity = await signer.getSealedIdentity();
    await signer.close();
    if (!identity.ok) throw new Error(identity.error.code);
    const [other] = await queryRows<{ key_ref: string }>(
      testDb.handle.db,
      sql`select max(key_ref) as key_ref from key_pool where batch_id = ${batchIds[5]!}`,
    );
    const before = (await evidence()).length;
    const driller = createRestoreDriller({
      identity: identity.value,
      recoveryAuthority: enclave.recoverySecret,
      recoveryEncryptionKey: enclave.recoveryEncKey,
      startEnclave: async (params) => {
        const real = await startThrowawayEnclave(params);
        const lying: SignerClient = Object.assign(Object.create(real.signer) as SignerClient, {
          proveIdentity: ((request) =>
            real.signer.proveIdentity({
              ...request,
              keyRef: other!.key_ref,
            })) satisfies SignerClient["proveIdentity"],
        });
        return { ...real, signer: lying };
      },
    });
    try {
      expect(await driller.drill(testDb.handle.db, batchIds[5]!)).toMatchObject({
        ok: false,
        error: expect.stringMatching(/^the restored key's signature does not verify/),
      });
    } finally {
      await driller.close();
    }
    expect(await evidence()).toHaveLength(before);
    await expectNothingLeft();
  });

  it("refuses the admin key in place of the recovery authority, recording nothing", async () => {
    const result = await drill(...withKeys(batchIds[1]!, "admin.key"));
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(`batch ${batchIds[1]}: failed: load_recovery_key: capability_rejected`);
    expect(await evidence()).toHaveLength(2);
    await expectNothingLeft();
  });

  it("refuses a wrong recovery encryption key with a clear reason, recording nothing", async () => {
    const result = await drill(...withKeys(batchIds[1]!, "recovery.key", "other-enc.key"));
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(
      `batch ${batchIds[1]}: failed: wrong recovery key: the envelope is sealed to the recovery key with fingerprint ${recoveryKeyFingerprint(x25519PublicKey(enclave.recoveryEncKey))}`,
    );
    expect(await evidence()).toHaveLength(2);
    await expectNothingLeft();
  });

  it("refuses a corrupted envelope: a file changed since it was written, and a recovery copy that does not open", async () => {
    const changed = await readFile(await backupOf(batchIds[2]!));
    changed[10]! ^= 0xff;
    await writeFile(await backupOf(batchIds[2]!), changed);
    const hashRefused = await drill(...withKeys(batchIds[2]!));
    expect(hashRefused).toMatchObject({
      code: 1,
      stdout: `restore-drill: batch ${batchIds[2]}: failed: backup file ${await backupOf(batchIds[2]!)}: hash_mismatch\n`,
    });

    const envelope = decodeCbor(await readFile(await backupOf(batchIds[3]!))) as {
      recovery: { enc: Uint8Array; ct: Uint8Array };
    };
    const ct = new Uint8Array(envelope.recovery.ct);
    ct[ct.length - 1]! ^= 0x01;
    await replaceBackup(batchIds[3]!, encodeCbor({ ...envelope, recovery: { ...envelope.recovery, ct } }));
    // The backup signature covers the recovery copy: refused before any enclave starts.
    const signatureRefused = await drill(...withKeys(batchIds[3]!));
    expect(signatureRefused).toMatchObject({
      code: 1,
      stdout: `restore-drill: batch ${batchIds[3]}: failed: backup file ${await backupOf(batchIds[3]!)}: the backup signature does not verify: the envelope was altered or forged\n`,
    });
    // Unsigned (as before envelopes were signed) and let through: only the throwaway enclave opens
    // the recovery copy, so the refusal is its own.
    await replaceBackup(batchIds[3]!, unsignedCopy(await readFile(await backupOf(batchIds[3]!))));
    const openRefused = await drill(...withKeys(batchIds[3]!), "--accept-unsigned-backups");
    expect(openRefused).toMatchObject({
      code: 1,
      stdout: `restore-drill: batch ${batchIds[3]}: failed: restore_backup: seal_failed: the recovery copy does not open: the envelope is corrupted or its header was altered\n`,
    });
    expect(await evidence()).toHaveLength(2);
    await expectNothingLeft();
  });

  it("refuses an envelope of another env id, recording nothing", async () => {
    // A real envelope of another enclave (env other-env), same offline keys, in place of the batch's.
    const other = await createEnclaveFixture({ envId: "other-env", keys: enclave });
    try {
      const signer = createSignerClient({
        endpoint: `unix://${other.socketPath}`,
        liveIdentityEnabled: true,
      });
      const made = await makeBatch(
        {
          db: testDb.handle.db,
          signer,
          authorize: createCapabilityMinter({
            authority: other.adminSecret,
            envId: other.envId,
            client: signer,
          }),
          backupDir: file("other-backups"),
          logger: pino({ level: "silent" }),
        },
        1,
      );
      await signer.close();
      expect(made.ok).toBe(true);
      await replaceBackup(batchIds[4]!, await readFile(await backupOf(batchIdOf(made))));
    } finally {
      await other.dispose();
    }
    const result = await drill(...withKeys(batchIds[4]!));
    expect(result).toMatchObject({
      code: 1,
      stdout: `restore-drill: batch ${batchIds[4]}: failed: the envelope belongs to env other-env on chain 77, not to env drill-env on chain 77\n`,
    });
    expect(await evidence()).toHaveLength(2);
    await expectNothingLeft();
  });

  it("records no evidence when the pool's records differ from what the backup restores", async () => {
    // A real fault, no fake: the database's public key of one key no longer matches its backup.
    await testDb.handle.db.execute(
      sql`update key_pool set public_key = '0x04' || repeat('ab', 64)
          where key_ref = (select min(key_ref) from key_pool where batch_id = ${batchIds[1]!})`,
    );
    const result = await drill(...withKeys(batchIds[1]!));
    expect(result).toMatchObject({
      code: 1,
      stdout: `restore-drill: batch ${batchIds[1]}: failed: restored keys differ from the batch (1 mismatched of 3, 3 in the pool)\n`,
    });
    expect(await evidence()).toHaveLength(2);
    await expectNothingLeft();
  });

  it("records no evidence when the pool holds a key the backup lacks", async () => {
    // A real fault, no fake: a key of another batch is recorded in this one, so the pool has four
    // keys where the backup restores three, every one of them matching.
    // Mutation: comparing only the restored keys with the pool (not the counts) records evidence.
    const before = (await evidence()).length;
    const [moved] = await queryRows<{ key_ref: string }>(
      testDb.handle.db,
      sql`update key_pool set batch_id = ${batchIds[5]!}
          where key_ref = (select min(key_ref) from key_pool where batch_id = ${batchIds[0]!}) returning key_ref`,
    );
    try {
      const result = await drill(...withKeys(batchIds[5]!));
      expect(result).toMatchObject({
        code: 1,
        stdout: `restore-drill: batch ${batchIds[5]}: failed: restored keys differ from the batch (0 mismatched of 3, 4 in the pool)\n`,
      });
      expect(await evidence()).toHaveLength(before);
      await expectNothingLeft();
    } finally {
      await testDb.handle.db.execute(
        sql`update key_pool set batch_id = ${batchIds[0]!} where key_ref = ${moved!.key_ref}`,
      );
    }
  });

  it("--pending drills every backed-up batch without restore evidence, each once, and nothing else", async () => {
    const pending = async () =>
      (
        await queryRows<{ batch_id: string }>(
          testDb.handle.db,
          sql`select batch_id from key_batches b where status = 'available' and not exists
              (select 1 from restore_evidence r where r.batch_id = b.batch_id) order by created_at, batch_id`,
        )
      ).map((row) => row.batch_id);
    // One more batch, clean and not yet drilled, beside those earlier tests broke (a changed
    // envelope, another env's envelope, a changed pool row), which stay pending.
    const signer = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    const authorize = createCapabilityMinter({
      authority: enclave.adminSecret,
      envId: enclave.envId,
      client: signer,
    });
    const [fresh] = await refillOnce(
      {
        db: testDb.handle.db,
        signer,
        authorize,
        backupDir: file("backups"),
        logger: pino({ level: "silent" }),
      },
      { target: 21, batchSize: 3 },
    );
    await signer.close();
    const before = await pending();
    expect(before).toContain(batchIdOf(fresh!));
    const drilledBefore = (await evidence()).map((row) => row.batch_id);
    // Earlier tests drilled some batches and broke others (a changed envelope, a changed pool row).
    const first = await drill("--pending", ...keys);
    expect(first.stdout).toContain(`restore-drill: ${before.length} batch(es) without restore evidence\n`);
    for (const batchId of before) {
      expect(first.stdout.split(`restore-drill: batch ${batchId}: `)).toHaveLength(2);
    }
    for (const batchId of drilledBefore) expect(first.stdout).not.toContain(`batch ${batchId}:`);
    const after = await pending();
    // What was drilled now has evidence; what failed is still pending, and the exit code says so.
    expect(after).toEqual(before.filter((batchId) => batchId !== batchIdOf(fresh!)));
    expect(first.stdout).toMatch(new RegExp(`restore-drill: batch ${batchIdOf(fresh!)}: \\d+ keys restored`));
    expect(first.code).toBe(1);
    // Again, through --socket: only the batches that still fail are tried.
    const second = await drill("--pending", ...keys, "--socket", enclave.socketPath);
    expect(second.stdout).toContain(`restore-drill: ${after.length} batch(es) without restore evidence\n`);
    expect(second.stdout.match(/restore-drill: batch /g) ?? []).toHaveLength(after.length);
    await expectNothingLeft();
  });

  it("leaves no restored key on disk when the drill is SIGKILLed while its throwaway enclave holds the batch: the throwaway, told by its parent's exit, deletes its data folder", async () => {
    /** The throwaway enclaves' data folders under the drill's TMPDIR, and how many key sets each holds. */
    const throwaways = async (): Promise<Array<{ data: string; keySets: number }>> => {
      const found: Array<{ data: string; keySets: number }> = [];
      for (const name of await readdir(drillTmp)) {
        if (!name.startsWith("restore-drill-")) continue;
        // The data folder is the drill's folder itself, or a folder in it.
        for (const data of [path.join(drillTmp, name), path.join(drillTmp, name, "data")]) {
          const keySets = await readdir(path.join(data, "keys")).catch(() => undefined);
          if (keySets)
            found.push({ data, keySets: keySets.filter((file) => file.endsWith(".sealed")).length });
        }
      }
      return found;
    };
    const signer = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    const authorize = createCapabilityMinter({
      authority: enclave.adminSecret,
      envId: enclave.envId,
      client: signer,
    });
    const deps = {
      db: testDb.handle.db,
      signer,
      authorize,
      backupDir: file("backups"),
      logger: pino({ level: "silent" }),
    };
    let caught = false;
    try {
      // The kill must land between the restore and the drill's own cleanup, tens of milliseconds:
      // watched for as fast as the folder can be read, and tried again with a new batch if missed.
      for (let attempt = 0; attempt < 5 && !caught; attempt++) {
        const batch = await makeBatch(deps, 3);
        let child: ChildProcess | undefined;
        const run = runTool("ops/restore-drill.ts", withKeys(batchIdOf(batch)), {
          env: {
            TMPDIR: drillTmp,
            DATABASE_URL: testDb.url,
            AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
            AGENT_ENV_ID: enclave.envId,
          },
          onSpawn: (spawned) => {
            child = spawned;
          },
        });
        let ended = false;
        void run.then(() => {
          ended = true;
        });
        // The payee key set `init` makes, and the restored batch's: the drill holds the batch now.
        while (!ended && !(await throwaways()).some((throwaway) => throwaway.keySets >= 2)) {
          await new Promise((resolve) => setImmediate(resolve));
        }
        if (ended) continue;
        child!.kill("SIGSTOP");
        caught = (await throwaways()).some((throwaway) => throwaway.keySets >= 2);
        child!.kill("SIGKILL");
        await run;
      }
    } finally {
      await signer.close();
    }
    expect(caught, "the drill was never caught holding a restored batch").toBe(true);
    // The throwaway enclave is gone with its parent, and so is every folder that held a key of it
    // (its sealing key sat beside the restored key sets: together, the wallets' private keys).
    for (let waited = 0; waited < 100 && (await throwaways()).length > 0; waited++) await sleep(100);
    expect(await throwaways(), "the throwaway enclave's data folder after the drill was killed").toEqual([]);
    await expectNothingLeft();
  });

  it("refuses an envelope made from public values alone, though the pool's rows were changed to match it, and drills an unsigned one only when told to", async () => {
    // The backup folder and the database are both on the origin host. Without the signature
    // check, a planted envelope whose key the attacker knows, with the pool's row changed to its
    // public key and address, was drilled and its evidence recorded: the funding gate opened.
    const signer = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    const deps = {
      db: testDb.handle.db,
      signer,
      authorize: createCapabilityMinter({
        authority: enclave.adminSecret,
        envId: enclave.envId,
        client: signer,
      }),
      backupDir: file("backups"),
      logger: pino({ level: "silent" }),
    };
    const planted = batchIdOf(await makeBatch(deps, 1));
    const old = batchIdOf(await makeBatch(deps, 1));
    await signer.close();
    const before = (await evidence()).length;

    const [target] = await queryRows<{ key_ref: string }>(
      testDb.handle.db,
      sql`select key_ref from key_pool where batch_id = ${planted}`,
    );
    const forged = await forgeEnvelope({
      envId: enclave.envId,
      recoveryPublicKey: x25519PublicKey(enclave.recoveryEncKey),
      keyRef: target!.key_ref,
      batchId: planted,
    });
    await replaceBackup(planted, forged.envelope);
    await testDb.handle.db.execute(
      sql`update key_pool set public_key = ${forged.publicKey}, address = ${forged.address.toLowerCase()}
          where key_ref = ${target!.key_ref}`,
    );
    const plantedRun = await drill(...withKeys(planted));
    expect(plantedRun).toMatchObject({
      code: 1,
      stdout: `restore-drill: batch ${planted}: failed: backup file ${await backupOf(planted)}: unsigned envelope (v2, made before backups were signed): anyone holding the public recovery key can make one; restore it only with --accept-unsigned-backups\n`,
    });
    expect(await evidence()).toHaveLength(before);

    // A genuine backup of before the upgrade (v2): refused unless the operator accepts it.
    await replaceBackup(old, unsignedCopy(await readFile(await backupOf(old))));
    const refusedRun = await drill(...withKeys(old));
    expect(refusedRun.stdout).toMatch(/failed: backup file .*: unsigned envelope \(v2/);
    expect(refusedRun.code).toBe(1);
    const accepted = await drill(...withKeys(old), "--accept-unsigned-backups");
    expect(accepted.stdout).toContain(
      `restore-drill: batch ${old}: warning: ${await backupOf(old)} is an unsigned envelope (v2), drilled without a signer check (--accept-unsigned-backups)\n`,
    );
    expect(accepted.stdout).toMatch(new RegExp(`restore-drill: batch ${old}: 1 keys restored`));
    expect(accepted.code).toBe(0);
    expect(await evidence()).toHaveLength(before + 1);
    await expectNothingLeft();
  });

  it("explains its usage", async () => {
    expect((await drill()).code).toBe(2);
    expect((await drill("--batch", batchIds[0]!, "--recovery-key", file("recovery.key"))).code).toBe(2);
    expect((await drill(...withKeys("00000000-0000-4000-8000-000000000000"))).stdout).toContain("no batch");
    // Of a UUID's length and letters, but no UUID: a usage error, before the database is asked.
    expect((await drill(...withKeys("0".repeat(36)))).code).toBe(2);
    // --pending and --batch together: one or the other.
    expect((await drill("--pending", ...withKeys(batchIds[0]!))).code).toBe(2);
  });
});
