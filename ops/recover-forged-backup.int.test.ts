import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { ed25519 } from "@noble/curves/ed25519";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import { toHex } from "../shared/hex.ts";
import { x25519PublicKey } from "../shared/recovery-envelope.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { forgeEnvelope, unsignedCopy } from "../testing/forged-backup-envelope.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { backupKey } from "./lib/recovery.ts";

// Disaster recovery from a backup folder an attacker on the origin host could write to
// (docs/security.md, "Backups are signed by the enclave"): a new enclave, initialised like the
// lost one, restores only the envelopes the lost enclave signed.
describe("recover: envelopes the enclave did not sign (real enclaves)", () => {
  let lost: EnclaveFixture;
  let fresh: EnclaveFixture;
  let lostSigner: SignerClient;
  let freshSigner: SignerClient;
  let dir: string;
  let backupSigner: string;
  const file = (name: string) => path.join(dir, name);
  const genuine: Record<string, { keyRef: string; address: string; path: string }> = {};

  beforeAll(async () => {
    lost = await createEnclaveFixture({ envId: "forged-backup" });
    lostSigner = createSignerClient({ endpoint: `unix://${lost.socketPath}`, liveIdentityEnabled: true });
    dir = await mkdtemp(path.join(tmpdir(), "recover-forged-"));
    await writeFile(file("recovery.key"), toHex(lost.recoverySecret), { mode: 0o600 });
    await writeFile(file("recovery-enc.key"), toHex(lost.recoveryEncKey), { mode: 0o600 });
    const authorize = createCapabilityMinter({
      authority: lost.adminSecret,
      envId: lost.envId,
      client: lostSigner,
    });
    for (const batchId of ["agent-one", "agent-two"]) {
      const made = await lostSigner.generateKeys(
        { namespace: "agent-transfer", count: 1, batchId },
        authorize,
      );
      if (!made.ok) throw new Error("generate_keys failed");
      const key = made.value.keys[0]!;
      const backedUp = await backupKey({
        signer: lostSigner,
        adminAuthority: lost.adminSecret,
        keyRef: key.keyRef,
        backupDir: file(`exported-${batchId}`),
      });
      if (!backedUp.ok) throw new Error(JSON.stringify(backedUp.error));
      genuine[batchId] = { keyRef: key.keyRef, address: key.address, path: backedUp.value.path };
    }
    // What the operator kept from before the loss (also the init record's backup_signer).
    const printed = await runTool("ops/recover.ts", ["backup-signer", "--socket", lost.socketPath]);
    expect(printed.code, printed.stderr).toBe(0);
    backupSigner = (JSON.parse(printed.stdout) as { backup_signer: string }).backup_signer;
    await lostSigner.close();
    await lost.dispose();
    // The new enclave: the same env id and offline keys, its own sealing key.
    fresh = await createEnclaveFixture({ envId: lost.envId, keys: lost });
    freshSigner = createSignerClient({ endpoint: `unix://${fresh.socketPath}`, liveIdentityEnabled: true });
  });
  afterAll(async () => {
    await freshSigner?.close();
    await fresh?.dispose();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const recoverFolder = (backups: string, ...flags: string[]): Promise<ToolRun> =>
    runTool("ops/recover.ts", [
      "--backup-dir",
      backups,
      "--recovery-key",
      file("recovery.key"),
      "--recovery-enc-key",
      file("recovery-enc.key"),
      ...flags,
      "--socket",
      fresh.socketPath,
    ]);
  const addressHeld = async (keyRef: string): Promise<string | null> => {
    const held = await freshSigner.publicIdentity({ keyRef });
    return held.ok ? held.value.address.toLowerCase() : null;
  };

  it("refuses a planted envelope made from public values alone, and restores the genuine one it tried to pre-empt", async () => {
    // Without the signature check the planted file (sorted first) was restored, "1 imported": the
    // new enclave held the agent's key_ref with the attacker's key, and the genuine batch was refused.
    const target = genuine["agent-one"]!;
    const backups = file("planted");
    await mkdir(backups);
    const forged = await forgeEnvelope({
      envId: fresh.envId,
      recoveryPublicKey: x25519PublicKey(fresh.recoveryEncKey),
      keyRef: target.keyRef,
    });
    const attackerSigned = await forgeEnvelope({
      envId: fresh.envId,
      recoveryPublicKey: x25519PublicKey(fresh.recoveryEncKey),
      keyRef: target.keyRef,
      signWith: ed25519.utils.randomPrivateKey(),
    });
    await writeFile(path.join(backups, "0-planted-unsigned.backup"), forged.envelope);
    await writeFile(path.join(backups, "1-planted-signed.backup"), attackerSigned.envelope);
    await writeFile(path.join(backups, "2-genuine.backup"), await readFile(target.path));

    const result = await recoverFolder(backups, "--backup-signer", backupSigner);
    expect(result.stdout).toMatch(/0-planted-unsigned\.backup: refused: unsigned envelope \(v2/);
    expect(result.stdout).toMatch(
      /1-planted-signed\.backup: refused: signed by backup signer 0x[0-9a-f]{64}, not by the expected/,
    );
    expect(result.stdout).toMatch(
      /2-genuine\.backup: batch agent-one \(agent-transfer\): 1 keys held, 1 imported/,
    );
    expect(result.stdout).toMatch(/recover: 1 restored, 2 refused\n$/);
    expect(result.code).toBe(1);
    expect(await addressHeld(target.keyRef)).toBe(target.address.toLowerCase());
    expect(await addressHeld(target.keyRef)).not.toBe(forged.address.toLowerCase());
  });

  it("refuses an old unsigned envelope without --accept-unsigned-backups and restores it with, warning by file", async () => {
    const target = genuine["agent-two"]!;
    const backups = file("unsigned");
    await mkdir(backups);
    // A backup made before envelopes were signed: the same envelope as v2, without the signature.
    await writeFile(path.join(backups, "old.backup"), unsignedCopy(await readFile(target.path)));

    const refusedRun = await recoverFolder(backups, "--backup-signer", backupSigner);
    expect(refusedRun.stdout).toMatch(/old\.backup: refused: unsigned envelope \(v2/);
    expect(refusedRun.code).toBe(1);
    expect(await addressHeld(target.keyRef)).toBeNull();

    const accepted = await recoverFolder(
      backups,
      "--backup-signer",
      backupSigner,
      "--accept-unsigned-backups",
    );
    expect(accepted.stdout).toMatch(
      /old\.backup: warning: unsigned envelope \(v2\) restored without a signer check/,
    );
    expect(accepted.stdout).toMatch(
      /old\.backup: batch agent-two \(agent-transfer\): 1 keys held, 1 imported/,
    );
    expect(accepted.code).toBe(0);
    expect(await addressHeld(target.keyRef)).toBe(target.address.toLowerCase());
  });

  it("will not restore a backup folder without a backup signer to check against, or an explicit acceptance (exit 2)", async () => {
    const result = await recoverFolder(file("planted"));
    expect(result.stderr).toMatch(/--backup-dir needs --backup-signer HEX/);
    expect(result.code).toBe(2);
  });
});
