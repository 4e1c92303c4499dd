import { execFile } from "node:child_process";
import { copyFile, mkdir, readdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { errorMessage } from "../shared/error-message.ts";
import { toHex } from "../shared/hex.ts";
import type { StackAgent } from "../testing/money-stack.ts";
import { loseAndReplaceEnclave } from "../testing/replace-enclave.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { useMoneyStack } from "../testing/stack.ts";

const _run = promisify(execFile);

// A recovery from a backup folder that lacks one batch's file (copied before that batch was
// written, or the file lost since) restores every other batch and says `0 refused`: recover reads
// the folder and cannot know a file that is not there. The origin, which has the database, must
// then refuse to start naming that batch, its backup file and the wallets it leaves without a
// key, rather than start healthy and leave those agents' transfers refused (and the sweep
// disabling them) while its start check asked only the oldest and the newest identity's key.
describe("a recovery from a backup folder missing batches' files (real stack)", () => {
  const stack = useMoneyStack({}, { timeoutMs: 180_000 });
  const agents: StackAgent[] = [];
  let keyDir = "";
  let backupSigner = "";

  const recover = (...args: string[]): Promise<ToolRun> =>
    runTool("ops/recover.ts", [...args, "--socket", stack.enclave.socketPath]);

  const recoverFrom = (dir: string): Promise<ToolRun> =>
    recover(
      "--backup-dir",
      dir,
      "--recovery-key",
      path.join(keyDir, "recovery.key"),
      "--recovery-enc-key",
      path.join(keyDir, "recovery-enc.key"),
      "--backup-signer",
      backupSigner,
    );

  /** Starts an in-process origin as main.ts would; answers "started", or why it refused. */
  const originStart = async (): Promise<string> => {
    try {
      // The treasury is not this test's matter: the faucet off, so its restore is not needed.
      const origin = await stack.startOrigin({ AGENT_FAUCET_ENABLED: "false" });
      await origin.close();
      return "started";
    } catch (error) {
      return errorMessage(error);
    }
  };

  beforeAll(async () => {
    // Four agents, each on a batch of its own: the middle two are neither the oldest nor the newest.
    for (let i = 0; i < 4; i++) agents.push(await stack.newAgent({ drilled: false, verified: false }));
    keyDir = path.join(stack.enclave.dir, "offline-keys");
    await mkdir(keyDir, { recursive: true });
    await writeFile(path.join(keyDir, "recovery.key"), toHex(stack.enclave.recoverySecret), { mode: 0o600 });
    await writeFile(path.join(keyDir, "recovery-enc.key"), toHex(stack.enclave.recoveryEncKey), {
      mode: 0o600,
    });
    const printed = await recover("backup-signer");
    backupSigner = (JSON.parse(printed.stdout) as { backup_signer: string }).backup_signer;
  }, 180_000);

  it("recover restores the rest and the origin refuses to start naming each missing batch, its file and its wallets; a batch whose agents are revoked is let go, and once the other file is restored it starts", async () => {
    const [, missing, lost] = agents as [StackAgent, StackAgent, StackAgent, StackAgent];
    const missingFile = `${missing.batchId}.backup`;
    const lostFile = `${lost.batchId}.backup`;
    // The folder the operator brings: every backup but two agents' batches. One file turns up
    // later; the other has no copy left anywhere.
    const partial = path.join(keyDir, "backups-partial");
    await mkdir(partial, { recursive: true });
    for (const name of await readdir(stack.backupDir)) {
      if (name.endsWith(".backup") && name !== missingFile && name !== lostFile) {
        await copyFile(path.join(stack.backupDir, name), path.join(partial, name));
      }
    }

    // The loss, and a new enclave with the same env id and public keys (runbook steps 2 and 3).
    const { enclave } = stack;
    await loseAndReplaceEnclave(enclave);

    const restored = await recoverFrom(partial);
    // The tool sees only the folder: every file in it was restored.
    expect(restored.stdout).toMatch(/recover: \d+ restored, 0 refused/);
    expect(restored.stdout).not.toContain(missing.batchId);
    // Runbook step 4: the signing policy sealed again with the offline policy key, for the new enclave.
    const policyKey = createCapabilityMinter({
      authority: enclave.policySecret,
      envId: enclave.envId,
      client: stack.signer,
    });
    expect((await stack.signer.configurePolicy(stack.policy, policyKey)).ok).toBe(true);

    const refusal = await originStart();
    expect(refusal).toContain(
      "the enclave does not hold the keys this database assigns to its agents in 2 of",
    );
    for (const [agent, file] of [
      [missing, missingFile],
      [lost, lostFile],
    ] as const) {
      expect(refusal).toContain(`batch ${agent.batchId}`);
      expect(refusal).toContain(path.join(stack.backupDir, file));
      expect(refusal).toContain(agent.wallet.toLowerCase());
    }
    for (const held of agents.filter((agent) => agent !== missing && agent !== lost)) {
      expect(refusal).not.toContain(held.wallet.toLowerCase());
    }

    // The lost batch's agents revoked, as the refusal says: the origin still refuses, for the other alone.
    const revoked = await runTool(
      "ops/agents.ts",
      ["revoke", "--agent", lost.agentId, "--reason", "its key batch's backup is lost"],
      { env: stack.processEnv() },
    );
    expect(revoked.code).toBe(0);
    const narrowed = await originStart();
    expect(narrowed).toContain("in 1 of");
    expect(narrowed).toContain(missing.wallet.toLowerCase());
    expect(narrowed).not.toContain(lost.wallet.toLowerCase());

    // The file found and restored: every assigned key is held, and the origin starts.
    const again = await recoverFrom(stack.backupDir);
    expect(again.stdout).toContain(`batch ${missing.batchId} (agent-transfer): 1 keys held, 1 imported`);
    expect(await originStart()).toBe("started");
  }, 240_000);
});
