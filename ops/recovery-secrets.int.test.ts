import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256 } from "../origin/backup-store.ts";
import { queryRows } from "../origin/db/client.ts";
import { batchIdOf, refillOnce } from "../origin/keypool/refill.ts";
import { createLogger } from "../origin/logger.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { toHex } from "../shared/hex.ts";
import {
  headerAad,
  hpkeOpen,
  parseBackupEnvelope,
  parseSecrets,
  RECOVERY_HPKE_INFO,
  randomX25519PrivateKey,
} from "../shared/recovery-envelope.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { unsignedCopy } from "../testing/forged-backup-envelope.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { createRestoreDriller } from "./lib/restore-driller.ts";

// No private key, and no recovery private key, in any log line, error text or database row that a
// drill, a refused drill and a recovery produce. The test knows the secrets (it opens
// the envelopes with the offline recovery key) and scans everything those runs wrote.
describe("recovery keeps every secret out of logs, errors and rows", () => {
  let testDb: TestDatabase;
  let live: EnclaveFixture;
  let dir: string;
  const produced: string[] = [];
  const secrets = new Map<string, string>();

  const cli = async (script: string, args: string[], env: Record<string, string> = {}): Promise<ToolRun> => {
    const run = await runTool(script, args, { env });
    produced.push(run.stdout, run.stderr);
    return run;
  };

  beforeAll(async () => {
    testDb = await createTestDatabase();
    live = await createEnclaveFixture({ envId: "secrets-env", logLevel: "debug" });
    dir = await mkdtemp(path.join(tmpdir(), "recovery-secrets-"));
    const originLog = new Writable({
      write(chunk, _encoding, done) {
        produced.push(String(chunk));
        done();
      },
    });
    const signer = createSignerClient({ endpoint: `unix://${live.socketPath}`, liveIdentityEnabled: true });
    const outcomes = await refillOnce(
      {
        db: testDb.handle.db,
        signer,
        authorize: createCapabilityMinter({ authority: live.adminSecret, envId: live.envId, client: signer }),
        backupDir: path.join(dir, "backups"),
        logger: createLogger("debug", originLog),
      },
      { target: 4, batchSize: 2 },
    );
    const [first, second] = outcomes.map(batchIdOf);

    // The secrets to look for: every batch key (opened here with the offline recovery key), the
    // recovery encryption key, the authority seeds.
    for (const batchId of [first!, second!]) {
      const parsed = parseBackupEnvelope(await readFile(path.join(dir, "backups", `${batchId}.backup`)));
      if (!parsed.ok) throw new Error(parsed.error);
      const plaintext = await hpkeOpen(
        live.recoveryEncKey,
        RECOVERY_HPKE_INFO,
        headerAad(parsed.value.header),
        parsed.value.recovery,
      );
      for (const secret of parseSecrets(plaintext, parsed.value.header) ?? []) {
        secrets.set(`private key ${secret.key_ref}`, toHex(secret.private_key).slice(2));
        // pino writes a Buffer as {"type":"Buffer","data":[…]}: its first bytes in that form too.
        secrets.set(
          `private key bytes ${secret.key_ref}`,
          Array.from(secret.private_key.subarray(0, 6)).join(","),
        );
      }
    }
    expect(secrets.size).toBe(8);
    secrets.set("recovery encryption key", toHex(live.recoveryEncKey).slice(2));
    secrets.set("recovery authority", toHex(live.recoverySecret).slice(2));
    secrets.set("admin authority", toHex(live.adminSecret).slice(2));
    await writeFile(path.join(dir, "recovery.key"), toHex(live.recoverySecret), { mode: 0o600 });
    await writeFile(path.join(dir, "recovery-enc.key"), toHex(live.recoveryEncKey), { mode: 0o600 });
    await writeFile(path.join(dir, "wrong-enc.key"), toHex(randomX25519PrivateKey()), { mode: 0o600 });

    // A drill in process, with the throwaway enclave's own log lines collected.
    const identity = await signer.getSealedIdentity();
    if (!identity.ok) throw new Error(identity.error.code);
    const driller = createRestoreDriller({
      identity: identity.value,
      recoveryAuthority: live.recoverySecret,
      recoveryEncryptionKey: live.recoveryEncKey,
      onLog: (line) => produced.push(line),
    });
    const drilled = await driller.drill(testDb.handle.db, first!);
    await driller.close();
    produced.push(JSON.stringify(drilled));
    expect(drilled.ok).toBe(true);
    await signer.close();

    // The CLI drill: a success, a wrong recovery key and a corrupted envelope (refusals).
    const env = {
      DATABASE_URL: testDb.url,
      AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${live.socketPath}`,
      AGENT_ENV_ID: live.envId,
      LOG_LEVEL: "debug",
    };
    const keyArgs = (enc: string) => [
      "--recovery-key",
      path.join(dir, "recovery.key"),
      "--recovery-enc-key",
      path.join(dir, enc),
    ];
    expect(
      (await cli("ops/restore-drill.ts", ["--batch", second!, ...keyArgs("recovery-enc.key")], env)).code,
    ).toBe(0);
    expect(
      (await cli("ops/restore-drill.ts", ["--batch", second!, ...keyArgs("wrong-enc.key")], env)).code,
    ).toBe(1);
    const backup = path.join(dir, "backups", `${second}.backup`);
    const envelope = decodeCbor(await readFile(backup)) as { recovery: { enc: Uint8Array; ct: Uint8Array } };
    const ct = new Uint8Array(envelope.recovery.ct);
    ct[ct.length - 1]! ^= 0x01;
    // Unsigned (v2, as before envelopes were signed) and let through below, so that the enclave
    // itself refuses the recovery copy: the signature would refuse it before any enclave is asked.
    const bytes = unsignedCopy(encodeCbor({ ...envelope, recovery: { ...envelope.recovery, ct } }));
    await writeFile(backup, bytes);
    await testDb.handle.db.execute(
      sql`update key_batches set backup_sha256 = ${sha256(bytes)} where batch_id = ${second!}`,
    );
    const corrupted = await cli(
      "ops/restore-drill.ts",
      ["--batch", second!, ...keyArgs("recovery-enc.key"), "--accept-unsigned-backups"],
      env,
    );
    expect(corrupted.stdout).toContain("failed:");

    // A recovery into a new enclave (the live one's data folder gone), logging at debug.
    const printed = await cli("ops/recover.ts", ["backup-signer", "--socket", live.socketPath]);
    const { backup_signer: backupSigner } = JSON.parse(printed.stdout) as { backup_signer: string };
    await live.stop();
    await rm(live.dataDir, { recursive: true, force: true });
    const fresh = await createEnclaveFixture({ envId: "secrets-env", keys: live, logLevel: "debug" });
    try {
      const recovered = await cli("ops/recover.ts", [
        "--backup-dir",
        path.join(dir, "backups"),
        ...keyArgs("recovery-enc.key"),
        "--backup-signer",
        backupSigner,
        "--accept-unsigned-backups",
        "--socket",
        fresh.socketPath,
      ]);
      // The corrupted batch is refused; the other restores.
      expect(recovered.stdout).toContain("recover: 1 restored, 1 refused");
    } finally {
      await fresh.stop();
      produced.push(fresh.stderr());
      await fresh.dispose();
    }
    produced.push(live.stderr());
  });
  afterAll(async () => {
    await live?.dispose();
    await testDb?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("finds no secret in any log line or error text of the drills and the recovery", () => {
    const text = produced.join("\n").toLowerCase();
    // The scan saw real output: the enclaves' restore logs and the CLIs' lines. The throwaway and
    // the new enclave were given the recovery key, and opened the envelopes themselves.
    expect(text).toContain("backup restored");
    expect(text).toContain("recovery key loaded");
    expect(text).toContain("wrong recovery key");
    expect(text).toContain("does not open");
    for (const [name, secret] of secrets) expect(text.includes(secret), name).toBe(false);
  });

  it("finds no secret in the rows of the key-pool and evidence tables", async () => {
    const rows = await queryRows<{ row: unknown }>(
      testDb.handle.db,
      sql`select to_jsonb(x) as row from (
            select 'key_batches' as tbl, to_jsonb(b) as r from key_batches b
            union all select 'key_pool', to_jsonb(k) from key_pool k
            union all select 'restore_evidence', to_jsonb(e) from restore_evidence e) x`,
    );
    expect(rows.length).toBeGreaterThan(6);
    const text = JSON.stringify(rows).toLowerCase();
    for (const [name, secret] of secrets) expect(text.includes(secret), name).toBe(false);
  });
});
