import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CHAIN_ID } from "../shared/constants.ts";
import { toHex } from "../shared/hex.ts";
import { randomX25519PrivateKey, x25519PublicKey } from "../shared/recovery-envelope.ts";
import { type BackupContext, buildBackupEnvelope, verifyBackupEnvelope } from "./backup-envelope.ts";
import { generateKeyMaterial, type KeyEntry, Keystore } from "./keystore.ts";
import { generateSealingKey } from "./sealing.ts";

// verify_backup on a keystore driven in code: an envelope whose sealing-key copy authenticates
// but whose keys are not what its header says can only be made with the sealing key, which the
// real enclave never lets out.
describe("verifyBackupEnvelope", () => {
  let dir: string;
  let ctx: BackupContext;
  const namespace = "agent-transfer";

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "backup-envelope-"));
    const sealingKey = generateSealingKey();
    const authority = toHex(randomX25519PrivateKey());
    ctx = {
      sealingKey,
      keystore: await Keystore.open(join(dir, "keys"), sealingKey, pino({ level: "silent" })),
      now: () => new Date(),
      config: {
        v: 4,
        env_id: "backup-env",
        chain_id: CHAIN_ID,
        admin_authority: authority,
        policy_authority: authority,
        recovery_authority: authority,
        recovery_encryption_key: toHex(x25519PublicKey(randomX25519PrivateKey())),
        created_at: new Date().toISOString(),
        instance_id: toHex(randomX25519PrivateKey().subarray(0, 16)),
      },
    };
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const exportOf = async (batchId: string, keys: KeyEntry[]) =>
    (await buildBackupEnvelope(ctx, { batchId, namespace, keys })).envelope;

  it("returns the keys of a batch it holds, each the held key", async () => {
    const held = await ctx.keystore.add({ namespace, batchId: "b1", keys: generateKeyMaterial(3) });
    const verified = verifyBackupEnvelope(ctx, await exportOf("b1", held));
    expect(verified).toMatchObject({ ok: true, value: { batchId: "b1", namespace } });
    if (!verified.ok) return;
    expect(verified.value.keys.map((key) => [key.keyRef, key.publicKeyHex, key.address])).toEqual(
      held.map((key) => [key.keyRef, key.publicKeyHex, key.address]),
    );
  });

  it("refuses a secret under a held key_ref that is another key, though the header names the held key's public key", async () => {
    const [held] = await ctx.keystore.add({ namespace, batchId: "b1", keys: generateKeyMaterial(1) });
    const [other] = generateKeyMaterial(1);
    // The header says the held key; the sealed secret is another: it must not pass on its key_ref.
    const forged: KeyEntry = { ...held!, privateKey: other!.privateKey };
    expect(verifyBackupEnvelope(ctx, await exportOf("b1", [forged]))).toMatchObject({
      ok: false,
      error: { code: "seal_failed", reason: "backup keys do not reproduce their public keys" },
    });
  });

  it("derives the keys of a batch it does not hold, and refuses one whose header names another public key", async () => {
    const keys = generateKeyMaterial(2).map((key) => ({ ...key, namespace, batchId: "b2" }));
    const verified = verifyBackupEnvelope(ctx, await exportOf("b2", keys));
    expect(verified).toMatchObject({ ok: true, value: { batchId: "b2" } });
    if (!verified.ok) return;
    expect(verified.value.keys.map((key) => key.address)).toEqual(keys.map((key) => key.address));

    const swapped = [{ ...keys[0]!, publicKey: keys[1]!.publicKey }, keys[1]!];
    expect(verifyBackupEnvelope(ctx, await exportOf("b2", swapped))).toMatchObject({
      ok: false,
      error: { code: "seal_failed", reason: "backup keys do not reproduce their public keys" },
    });
  });
});
