import { execFile } from "node:child_process";
import { readdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { payWithToken } from "../dev/x402-token-payer.ts";
import { newAccount, publicClientFor } from "../devnet/testing.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import type { ActionView } from "../shared/gateway-schemas.ts";
import { toHex } from "../shared/hex.ts";
import { agentCalls, isAccepted, newKey } from "../testing/money-client.ts";
import type { StackAgent } from "../testing/money-stack.ts";
import { loseAndReplaceEnclave } from "../testing/replace-enclave.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { useMoneyStack } from "../testing/stack.ts";

const run = promisify(execFile);

// Disaster recovery (docs/operations.md): the enclave's data folder is lost entirely; a new enclave
// initialised with the same env id and authority keys, restored from the backup folder through the offline
// re-encryption step, signs for an agent provisioned before the loss, at the same wallet address,
// pays the faucet from the same treasury once its backed-up key is restored too, and settles x402
// payments from the same settler once the policy key points the settler at its restored key.
describe("disaster recovery: the enclave's data folder is deleted (real stack)", () => {
  // x402 on, so the stack has a settler key (configure_settler) to back up beside the treasury's.
  const stack = useMoneyStack({ x402: { amountUnits: 10_000n, payTo: newAccount().address } });
  let agent: StackAgent;
  let other: StackAgent;
  let keyDir: string;

  const recover = (...args: string[]): Promise<ToolRun> =>
    runTool("ops/recover.ts", [...args, "--socket", stack.enclave.socketPath]);

  const cli = (script: string, args: string[]): Promise<ToolRun> => runTool(script, args);

  beforeAll(async () => {
    agent = await stack.newAgent({ units: 20_000_000n });
    // Another batch, so the recovery restores more than the agent's own.
    other = await stack.newAgent({ drilled: false, verified: false });
    keyDir = path.join(stack.enclave.dir, "offline-keys");
    await run("mkdir", ["-p", keyDir]);
    await writeFile(path.join(keyDir, "recovery.key"), toHex(stack.enclave.recoverySecret), { mode: 0o600 });
    await writeFile(path.join(keyDir, "recovery-enc.key"), toHex(stack.enclave.recoveryEncKey), {
      mode: 0o600,
    });
    await writeFile(path.join(keyDir, "admin.key"), toHex(stack.enclave.adminSecret), { mode: 0o600 });
  });

  // A whole recovery (a new enclave, every batch restored, the policy sealed again, a transfer and a
  // payout mined) takes most of a minute on a loaded two-core host: more than the default timeout.
  it("a new enclave restored from the backup folder signs a transfer the devnet mines, from the same wallet; the backed-up treasury key pays the faucet again, and the restored settler key settles again once the settler is pointed at it", async () => {
    const calls = agentCalls(stack.origin.base, agent.token);
    const chain = publicClientFor(stack.devnet.url);
    // Before the loss: the faucet treasury's key (made by configure_treasury, not by the refill)
    // is backed up beside the batches.
    const sealedBefore = await stack.signer.getPolicy();
    const treasuryKeyRef = sealedBefore.ok ? sealedBefore.value.treasury?.faucetKeyRef : undefined;
    const treasuryBackup = await recover(
      "backup-key",
      "--treasury",
      "--admin-key",
      path.join(keyDir, "admin.key"),
      "--backup-dir",
      stack.backupDir,
    );
    expect(treasuryBackup.stdout).toContain(`key ${treasuryKeyRef} (faucet, batch treasury-`);
    expect(treasuryBackup.code).toBe(0);
    const settlerKeyRef = sealedBefore.ok ? sealedBefore.value.settler?.settlerKeyRef : undefined;
    const settlerBackup = await recover(
      "backup-key",
      "--settler",
      "--admin-key",
      path.join(keyDir, "admin.key"),
      "--backup-dir",
      stack.backupDir,
    );
    expect(settlerBackup.stdout).toContain(`key ${settlerKeyRef} (settler, batch settler-`);
    expect(settlerBackup.code).toBe(0);
    // Kept with the offline keys (the init record has it too): a recovery takes only envelopes
    // this key signed.
    const printed = await recover("backup-signer");
    const { backup_signer: backupSigner } = JSON.parse(printed.stdout) as { backup_signer: string };

    // The disaster, and a new enclave: the same env id and authority public keys, a new sealing
    // key, no old files.
    const { enclave } = stack;
    await loseAndReplaceEnclave(enclave);
    expect(await stack.signer.publicIdentity({ keyRef: agent.keyRef })).toMatchObject({
      ok: false,
      error: { code: "key_purpose_mismatch" },
    });

    // One batch the air-gapped way: the enclave's transport key carried to the offline machine,
    // the package made there, and carried back to be restored.
    const offered = await recover("transport-key");
    const { transport_public_key: transportKey } = JSON.parse(offered.stdout) as {
      transport_public_key: string;
    };
    const packageFile = path.join(keyDir, "other.package");
    const made = await cli("ops/recovery-reencrypt.ts", [
      "--envelope",
      path.join(stack.backupDir, `${other.batchId}.backup`),
      "--recovery-enc-key",
      path.join(keyDir, "recovery-enc.key"),
      "--transport-key",
      transportKey,
      "--env-id",
      enclave.envId,
      "--out",
      packageFile,
      "--backup-signer",
      backupSigner,
    ]);
    expect(made.stdout).toContain(
      `batch ${other.batchId} (1 keys, agent-transfer) sealed to the transport key`,
    );
    const carried = await recover(
      "--package",
      packageFile,
      "--recovery-key",
      path.join(keyDir, "recovery.key"),
    );
    expect(carried.stdout).toContain(`batch ${other.batchId} (agent-transfer): 1 keys held, 1 imported`);
    expect(carried.code).toBe(0);

    // Every batch of the backup folder, re-encrypted from the recovery key to the new enclave's
    // transport key and restored under the recovery authority (the one already restored: 0 imported):
    // the agents' two batches, the treasury's and the settler's.
    const backups = (await readdir(stack.backupDir)).filter((name) => name.endsWith(".backup"));
    expect(backups).toHaveLength(4);
    const restored = await recover(
      "--backup-dir",
      stack.backupDir,
      "--recovery-key",
      path.join(keyDir, "recovery.key"),
      "--recovery-enc-key",
      path.join(keyDir, "recovery-enc.key"),
      "--backup-signer",
      backupSigner,
    );
    expect(restored.stderr).toBe("");
    expect(restored.stdout).toContain(`batch ${agent.batchId} (agent-transfer): 1 keys held, 1 imported`);
    expect(restored.stdout).toContain("(faucet): 1 keys held, 1 imported");
    expect(restored.stdout).toContain(`batch ${other.batchId} (agent-transfer): 1 keys held, 0 imported`);
    expect(restored.stdout).toContain("(settler): 1 keys held, 1 imported");
    expect(restored.stdout).toContain("recover: 4 restored, 0 refused\n");
    expect(restored.code).toBe(0);
    // Run again (a recovery that stopped half way is simply repeated): nothing more to import.
    const repeated = await recover(
      "--backup-dir",
      stack.backupDir,
      "--recovery-key",
      path.join(keyDir, "recovery.key"),
      "--recovery-enc-key",
      path.join(keyDir, "recovery-enc.key"),
      "--backup-signer",
      backupSigner,
    );
    expect(repeated.stdout).toContain(`batch ${agent.batchId} (agent-transfer): 1 keys held, 0 imported`);
    const held = await stack.signer.publicIdentity({ keyRef: agent.keyRef });
    expect(held).toMatchObject({ ok: true, value: { namespace: "agent-transfer" } });
    expect(held.ok && held.value.address.toLowerCase()).toBe(agent.wallet.toLowerCase());
    const settlerHeld = await stack.signer.publicIdentity({ keyRef: settlerKeyRef! });
    expect(settlerHeld).toMatchObject({ ok: true, value: { namespace: "settler" } });
    expect(settlerHeld.ok && settlerHeld.value.address.toLowerCase()).toBe(stack.settler!.toLowerCase());

    // The operator seals the signing policy again with the offline policy key (runbook step 4),
    // minted for the new enclave's instance id: the stack's minter, which learnt the lost
    // enclave's instance id, is refused.
    expect(await stack.signer.configurePolicy(stack.policy, stack.authorities.policy)).toMatchObject({
      ok: false,
      error: { code: "capability_rejected" },
    });
    const policyKey = createCapabilityMinter({
      authority: enclave.policySecret,
      envId: enclave.envId,
      client: stack.signer,
    });
    const sealed = await stack.signer.configurePolicy(stack.policy, policyKey);
    expect(sealed.ok).toBe(true);

    const recipient = newAccount().address;
    const response = await calls.transfer({ idempotency_key: newKey(), to: recipient, amount: "1500000" });
    expect(isAccepted(response)).toBe(true);
    const done = await calls.settled((response.body as ActionView).action_id);
    expect(done.status).toBe("confirmed");
    const tx = await chain.getTransaction({ hash: done.tx_hash as `0x${string}` });
    expect(tx.from.toLowerCase()).toBe(agent.wallet.toLowerCase());
    expect(await chain.getBalance({ address: recipient })).toBe(1_500_000n * WEI_PER_UNIT);

    // The treasury comes back too: the policy key points the treasury at the restored key, and a
    // faucet payout is paid from the same treasury address as before the loss.
    const terms = sealedBefore.ok ? sealedBefore.value.treasury?.terms : undefined;
    const treasury = await stack.signer.configureTreasury(
      { faucetKeyRef: treasuryKeyRef, budgetUnits: 1_000_000_000n, ...terms! },
      policyKey,
    );
    expect(treasury.ok && treasury.value.faucetAddress.toLowerCase()).toBe(stack.treasury.toLowerCase());
    const payout = await calls.faucet();
    expect(isAccepted(payout)).toBe(true);
    const paid = await calls.settled((payout.body as ActionView).action_id);
    expect(paid.status).toBe("confirmed");
    const payoutTx = await chain.getTransaction({ hash: paid.tx_hash as `0x${string}` });
    expect(payoutTx.from.toLowerCase()).toBe(stack.treasury.toLowerCase());

    // The x402 settler comes back as well: until the policy key points the settler at its restored
    // key, the new enclave has none and settles nothing; then an agent's payment is settled from
    // the settler address of before the loss, paying gas from the float it kept.
    const notYet = await payWithToken({ base: stack.origin.base, token: agent.token });
    expect(notYet.status).toBe(402);
    expect(await chain.getTransactionCount({ address: stack.settler! })).toBe(0);
    const pointed = await stack.signer.configureSettler({ settlerKeyRef: settlerKeyRef! }, policyKey);
    expect(pointed.ok && pointed.value).toEqual({ settlerKeyRef, settlerAddress: stack.settler });
    const payment = await payWithToken({ base: stack.origin.base, token: agent.token });
    expect(payment.status).toBe(200);
    const settlement = await chain.getTransactionReceipt({
      hash: payment.settlement!.transaction as `0x${string}`,
    });
    expect(settlement.status).toBe("success");
    expect(settlement.from.toLowerCase()).toBe(stack.settler!.toLowerCase());
  }, 240_000);
});
