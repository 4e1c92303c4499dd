import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, open, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import { toHex } from "../shared/hex.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../testing/enclave-process.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { backupKey } from "./lib/recovery.ts";

// `npm run recover` and its backup-key step when something is wrong, against a real enclave
// process: a recovery that refuses a batch must not exit 0 (a runbook would read it as done), and
// a backup of a key must hold that key and no other.
describe("recover: refusals (real enclave)", () => {
  let enclave: EnclaveProcess;
  let signer: SignerClient;
  let dir: string;
  const file = (name: string) => path.join(dir, name);
  let keys: Array<{ keyRef: string }>;
  /** The enclave's backup signer: its own backups are what these recoveries restore. */
  let backupSigner: string;

  beforeAll(async () => {
    enclave = await startEnclaveProcess({ envId: "recover-refusals" });
    signer = createSignerClient({ endpoint: `unix://${enclave.socketPath}`, liveIdentityEnabled: true });
    dir = await mkdtemp(path.join(tmpdir(), "recover-refusals-"));
    await writeFile(file("recovery.key"), toHex(enclave.recoverySecret), { mode: 0o600 });
    await writeFile(file("recovery-enc.key"), toHex(enclave.recoveryEncKey), { mode: 0o600 });
    const authorize = createCapabilityMinter({
      authority: enclave.adminSecret,
      envId: enclave.envId,
      client: signer,
    });
    const made = await signer.generateKeys(
      { namespace: "settler", count: 1, batchId: "refusals-one" },
      authorize,
    );
    const other = await signer.generateKeys(
      { namespace: "settler", count: 1, batchId: "refusals-two" },
      authorize,
    );
    if (!made.ok || !other.ok) throw new Error("generate_keys failed");
    keys = [made.value.keys[0]!, other.value.keys[0]!];
    const identity = await signer.getSealedIdentity();
    if (!identity.ok) throw new Error("get_sealed_identity failed");
    backupSigner = identity.value.backupSigner;
  });
  afterAll(async () => {
    await signer?.close();
    await enclave?.dispose();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const recover = (...args: string[]): Promise<ToolRun> =>
    runTool("ops/recover.ts", [...args, "--socket", enclave.socketPath]);
  /** `npm run recover` of a backup folder with the test enclave's recovery keys. */
  const recoverFolder = (backups: string): Promise<ToolRun> =>
    recover(
      "--backup-dir",
      backups,
      "--recovery-key",
      file("recovery.key"),
      "--recovery-enc-key",
      file("recovery-enc.key"),
      "--backup-signer",
      backupSigner,
    );

  it("exits 1 when a batch of the folder was refused, though another was restored", async () => {
    // Mutation: exiting 0 whatever the batches came to fails this.
    const backups = path.join(dir, "backups");
    const good = await backupKey({
      signer,
      adminAuthority: enclave.adminSecret,
      keyRef: keys[0]!.keyRef,
      backupDir: backups,
    });
    expect(good.ok, JSON.stringify(good)).toBe(true);
    await writeFile(path.join(backups, "damaged.backup"), Buffer.from("not an envelope"));
    const result = await recoverFolder(backups);
    expect(result.stdout).toMatch(/damaged\.backup: refused: /);
    expect(result.stdout).toMatch(/recover: 1 restored, 1 refused\n$/);
    expect(result.code).toBe(1);
  });

  it("refuses a file it cannot read by name and goes on with the rest of the folder", async () => {
    // Mutation: reading each file outside the per-file refusal (as it did) ends the whole run at
    // the unreadable one with a stack trace: the good backup after it is never restored.
    const backups = path.join(dir, "backups-unreadable");
    // A folder where a backup file is expected reads as EISDIR, for any user (a file without read
    // permission would still be read by root).
    await mkdir(path.join(backups, "a-unreadable.backup"), { recursive: true });
    const good = await backupKey({
      signer,
      adminAuthority: enclave.adminSecret,
      keyRef: keys[1]!.keyRef,
      backupDir: backups,
    });
    expect(good.ok, JSON.stringify(good)).toBe(true);
    const result = await recoverFolder(backups);
    expect(result.stdout).toMatch(/a-unreadable\.backup: refused: cannot read the file: .*EISDIR/);
    expect(result.stdout).toMatch(/: batch refusals-two \(settler\): 1 keys held/);
    expect(result.stdout).toMatch(/recover: 1 restored, 1 refused\n$/);
    expect(result.code).toBe(1);
  });

  it("refuses a backup folder that holds no backup instead of reporting nothing restored as done", async () => {
    // The wrong folder (a typo, the parent of the copied backups): the enclave is reachable and
    // the keys are good, so only the empty folder can make it refuse. Exiting 0 with "0 restored,
    // 0 refused" would read as a finished recovery in the runbook, whose enclave holds no key.
    const empty = path.join(dir, "no-backups");
    await mkdir(empty);
    await writeFile(path.join(empty, "notes.txt"), "copied from the backup host\n");
    const result = await recoverFolder(empty);
    expect(result.stdout).not.toMatch(/0 refused/);
    expect(result.stderr).toMatch(/--backup-dir .*no-backups holds no backup/);
    expect(result.code).toBe(2);
  });

  it("refuses a flag of another form (exit 2) instead of passing over it and reporting done", async () => {
    // --package beside --backup-dir restored the folder alone and exited 0 "1 restored": the
    // package the operator named was never looked at.
    const backups = path.join(dir, "backups-and-package");
    const good = await backupKey({
      signer,
      adminAuthority: enclave.adminSecret,
      keyRef: keys[0]!.keyRef,
      backupDir: backups,
    });
    expect(good.ok, JSON.stringify(good)).toBe(true);
    await writeFile(file("offline.package"), Buffer.from("a package made offline"));
    const both = await recover(
      "--backup-dir",
      backups,
      "--package",
      file("offline.package"),
      "--recovery-key",
      file("recovery.key"),
      "--recovery-enc-key",
      file("recovery-enc.key"),
    );
    expect(both).toMatchObject({ code: 2, stdout: "" });
    expect(both.stderr).toMatch(/^recover: --backup-dir takes no --package\nusage:/);
    const transport = await recover("transport-key", "--admin-key", file("recovery.key"));
    expect(transport).toMatchObject({ code: 2, stdout: "" });
    expect(transport.stderr).toMatch(/^recover: transport-key takes no --admin-key\n/);
  });

  it("backup-key of a key by ref with no enclave on the socket is an error (3), not a refusal (1)", async () => {
    // --treasury asked get_policy first and ended 3; --key-ref went straight to public_identity,
    // whose unanswered call was printed as "failed" and ended 1, the code of a decision.
    const result = await runTool("ops/recover.ts", [
      "backup-key",
      "--key-ref",
      keys[0]!.keyRef,
      "--admin-key",
      file("recovery.key"),
      "--backup-dir",
      path.join(dir, "no-enclave"),
      "--socket",
      path.join(dir, "no-enclave.sock"),
    ]);
    expect(result).toMatchObject({ code: 3, stdout: "" });
    expect(result.stderr).toMatch(/^recover: error: public_identity: signer_unreachable: .*ENOENT/);
  });

  it("ends as an error (3), not refused (1), when the enclave stops answering part way through the folder", async () => {
    // The enclave answered the tool's first call (its identity) and was gone for the backups: each
    // was printed "refused" and the run ended 1, the code of a decision that the same command
    // repeats, where the docs give 3 for an enclave that stopped answering. The backup file is a
    // named pipe, for the timing only: the tool blocks reading it, the enclave is stopped, then
    // the real envelope is written into it.
    const gone = await startEnclaveProcess({ envId: "recover-gone" });
    const goneSigner = createSignerClient({
      endpoint: `unix://${gone.socketPath}`,
      liveIdentityEnabled: true,
    });
    try {
      const authorize = createCapabilityMinter({
        authority: gone.adminSecret,
        envId: gone.envId,
        client: goneSigner,
      });
      const made = await goneSigner.generateKeys(
        { namespace: "settler", count: 1, batchId: "gone-one" },
        authorize,
      );
      if (!made.ok) throw new Error("generate_keys failed");
      const goneIdentity = await goneSigner.getSealedIdentity();
      if (!goneIdentity.ok) throw new Error("get_sealed_identity failed");
      const backups = path.join(dir, "backups-gone");
      const backedUp = await backupKey({
        signer: goneSigner,
        adminAuthority: gone.adminSecret,
        keyRef: made.value.keys[0]!.keyRef,
        backupDir: backups,
      });
      if (!backedUp.ok) throw new Error(backedUp.error.message);
      const envelope = await readFile(backedUp.value.path);
      await rm(backedUp.value.path);
      execFileSync("mkfifo", [backedUp.value.path]);
      await writeFile(file("gone-recovery.key"), toHex(gone.recoverySecret), { mode: 0o600 });
      await writeFile(file("gone-recovery-enc.key"), toHex(gone.recoveryEncKey), { mode: 0o600 });
      const running = runTool("ops/recover.ts", [
        "--backup-dir",
        backups,
        "--recovery-key",
        file("gone-recovery.key"),
        "--recovery-enc-key",
        file("gone-recovery-enc.key"),
        "--backup-signer",
        goneIdentity.value.backupSigner,
        "--socket",
        gone.socketPath,
      ]);
      // Opening the pipe for writing returns once the tool opened it to read: past its identity call.
      const pipe = await open(backedUp.value.path, "w");
      await gone.stop();
      await pipe.writeFile(envelope);
      await pipe.close();
      const result = await running;
      expect(result.stdout).not.toMatch(/refused/);
      expect(result.stderr).toMatch(
        /^recover: error: .*gone-one\.backup: new_transport_key: signer_unreachable: /,
      );
      expect(result.code).toBe(3);
    } finally {
      await goneSigner.close();
      await gone.dispose();
    }
  });

  it("backup-key --key-ref that is no key_ref is a usage error (2), the enclave not asked", async () => {
    // It went to the enclave, whose refusal ended 1 as if the line were right and the key unknown.
    const result = await recover(
      "backup-key",
      "--key-ref",
      keys[0]!.keyRef.slice(0, 63),
      "--admin-key",
      file("recovery.key"),
      "--backup-dir",
      path.join(dir, "bad-ref"),
    );
    expect(result).toMatchObject({ code: 2, stdout: "" });
    expect(result.stderr).toMatch(/^recover: --key-ref must be a key_ref \(64 hex digits\)/);
  });

  it("backup-key refuses a backup that holds another key than the one asked for", async () => {
    // A fault the real enclave does not make, so a fake, named: an enclave whose export_backup
    // returns another key's backup. Mutation: not checking the verified backup's keys accepts it.
    const wrongKey: SignerClient = Object.assign(Object.create(signer) as SignerClient, {
      exportBackup: ((_params, authorize) =>
        signer.exportBackup(
          { batchId: "refusals-two", keyRefs: [keys[1]!.keyRef] },
          authorize,
        )) satisfies SignerClient["exportBackup"],
    });
    const result = await backupKey({
      signer: wrongKey,
      adminAuthority: enclave.adminSecret,
      keyRef: keys[0]!.keyRef,
      backupDir: path.join(dir, "wrong"),
    });
    expect(result).toEqual({
      ok: false,
      error: { message: "verify_backup: the backup holds other keys", unreachable: false },
    });
  });
});
