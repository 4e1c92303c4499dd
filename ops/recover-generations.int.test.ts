import { execFile } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { toHex } from "../shared/hex.ts";
import { err } from "../shared/result.ts";
import { makeAgents } from "../testing/agent-factory.ts";
import { loseAndReplaceEnclave } from "../testing/replace-enclave.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { useMoneyStack } from "../testing/stack.ts";

const _run = promisify(execFile);

// A node recovered once has batches of two enclaves in its backup folder: those the lost enclave
// backed up (signed by its backup signer) and those its successor's refill made since (signed by
// the successor's, derived from its own sealing key). When the successor is lost too, a recovery
// that takes one --backup-signer refuses one generation or the other, whichever is named: "run it
// again until it says 0 refused" could never end, and the older wallets stayed out unless the
// operator guessed to run it once per signer.
describe("a second recovery: the backup folder holds batches of two enclave generations (real stack)", () => {
  const stack = useMoneyStack({}, { timeoutMs: 180_000 });

  const recover = (...args: string[]): Promise<ToolRun> =>
    runTool("ops/recover.ts", [...args, "--socket", stack.enclave.socketPath]);

  const backupSignerNow = async (): Promise<string> =>
    (JSON.parse((await recover("backup-signer")).stdout) as { backup_signer: string }).backup_signer;

  it("recover takes each generation's --backup-signer and restores both, and the restore drill drills both with the lost one's named; one signer alone refuses the other generation's batch, saying to name it", async () => {
    const keyDir = path.join(stack.enclave.dir, "offline-keys");
    await mkdir(keyDir, { recursive: true });
    await writeFile(path.join(keyDir, "recovery.key"), toHex(stack.enclave.recoverySecret), { mode: 0o600 });
    await writeFile(path.join(keyDir, "recovery-enc.key"), toHex(stack.enclave.recoveryEncKey), {
      mode: 0o600,
    });
    const recoverFolder = (...signers: string[]): Promise<ToolRun> =>
      recover(
        "--backup-dir",
        stack.backupDir,
        "--recovery-key",
        path.join(keyDir, "recovery.key"),
        "--recovery-enc-key",
        path.join(keyDir, "recovery-enc.key"),
        ...signers.flatMap((signer) => ["--backup-signer", signer]),
      );

    // The first enclave: an agent's batch, signed by its backup signer.
    const older = await stack.newAgent({ drilled: false, verified: false });
    const firstSigner = await backupSignerNow();

    // The first loss, recovered as the runbook says, with the lost enclave's signer.
    await loseAndReplaceEnclave(stack.enclave);
    const first = await recoverFolder(firstSigner);
    expect(first.stdout).toContain(`batch ${older.batchId} (agent-transfer): 1 keys held, 1 imported`);
    expect(first.stdout).toMatch(/recover: \d+ restored, 0 refused/);
    const secondSigner = await backupSignerNow();
    expect(secondSigner).not.toBe(firstSigner);

    // The successor's refill makes a batch (its admin minter reads the new instance id).
    const [newer] = await makeAgents(
      {
        db: stack.db.handle.db,
        signer: stack.signer,
        authorities: {
          admin: createCapabilityMinter({
            authority: stack.enclave.adminSecret,
            envId: stack.enclave.envId,
            client: stack.signer,
          }),
        },
        driller: { drill: async () => err("not drilled here"), close: async () => {} },
        devnetUrl: stack.devnet.url,
        envId: stack.enclave.envId,
        backupDir: stack.backupDir,
      },
      1,
      { drilled: false, verified: false },
    );

    // The restore drill, after the first recovery, of one batch of each generation: the lost
    // enclave's signer named, beside the live one's, which it does not replace.
    const drilled = await runTool(
      "ops/restore-drill.ts",
      [
        ...["--batch", older.batchId, "--batch", newer!.batchId],
        ...["--recovery-key", path.join(keyDir, "recovery.key")],
        ...["--recovery-enc-key", path.join(keyDir, "recovery-enc.key")],
        ...["--backup-signer", firstSigner, "--socket", stack.enclave.socketPath],
      ],
      { env: stack.processEnv() },
    );
    for (const batchId of [older.batchId, newer!.batchId]) {
      expect(drilled.stdout).toContain(
        `restore-drill: batch ${batchId}: 1 keys restored into a throwaway enclave`,
      );
    }
    expect(drilled.code).toBe(0);

    // The second loss. The lost enclave's signer alone: the first enclave's batch is refused, and
    // the refusal says what to do.
    await loseAndReplaceEnclave(stack.enclave);
    const lostOnly = await recoverFolder(secondSigner);
    expect(lostOnly.stdout).toContain(`batch ${newer!.batchId} (agent-transfer): 1 keys held, 1 imported`);
    expect(lostOnly.stdout).toContain(
      `${older.batchId}.backup: refused: signed by backup signer ${firstSigner}`,
    );
    expect(lostOnly.stdout).toContain("An enclave a recovery replaced signed its backups with its own");
    expect(lostOnly.code).toBe(1);

    // Both generations' signers: every batch is restored.
    const both = await recoverFolder(secondSigner, firstSigner);
    expect(both.stdout).toContain(`batch ${older.batchId} (agent-transfer): 1 keys held, 1 imported`);
    expect(both.stdout).toContain(`batch ${newer!.batchId} (agent-transfer): 1 keys held, 0 imported`);
    expect(both.stdout).toMatch(/recover: \d+ restored, 0 refused/);
    expect(both.code).toBe(0);
    for (const agent of [older, newer!]) {
      const held = await stack.signer.publicIdentity({ keyRef: agent.keyRef });
      expect(held.ok && held.value.address.toLowerCase()).toBe(agent.wallet.toLowerCase());
    }
  }, 240_000);
});
