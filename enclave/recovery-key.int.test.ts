import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRecoveryKeyInto } from "../ops/lib/recovery-key-loader.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSocketSignerClient } from "../origin/signer/socket-client.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { fromHex, toHex } from "../shared/hex.ts";
import {
  hpkeSeal,
  RECOVERY_KEY_HPKE_INFO,
  randomX25519PrivateKey,
  recoveryKeyAad,
  x25519PublicKey,
} from "../shared/recovery-envelope.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { mintFor, privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

type Key = { key_ref: string; public_key: string; address: string };

// The enclave of a drill or a recovery opens the backup envelopes itself: it is given the recovery
// encryption key sealed to one of its transport keys (load_recovery_key, recovery tier), checks its
// public half against the key sealed at init and holds it in memory only.
describe("load_recovery_key and restore_backup of an envelope (real processes)", () => {
  let live: EnclaveFixture;
  let target: EnclaveFixture;
  let client: RawEnclaveClient;
  let signer: SignerClient;
  let envelope: Uint8Array;
  let keys: Key[];

  /** `privateKey` sealed to a fresh transport key of the target, as load_recovery_key takes it. */
  const sealedToTarget = async (privateKey: Uint8Array): Promise<Record<string, unknown>> => {
    const offered = expectOk(await client.request("new_transport_key", {}));
    const transport = fromHex(offered.transport_public_key as string);
    // The associated data names the target's own sealed recovery key, as an honest loader's does:
    // only the check of the key itself can refuse what is inside.
    const sealedKey = fromHex(
      expectOk(await client.request("get_sealed_identity", {})).recovery_encryption_key as string,
    );
    const box = await hpkeSeal(
      transport,
      RECOVERY_KEY_HPKE_INFO,
      recoveryKeyAad(transport, sealedKey),
      privateKey,
    );
    return { transport_public_key: toHex(transport), enc: toHex(box.enc), ct: toHex(box.ct) };
  };
  const recoveryMinter = () =>
    createCapabilityMinter({ authority: target.recoverySecret, envId: target.envId, client: signer });
  /** restore_backup of the envelope as it is on disk, under a valid recovery capability. */
  const restoreEnvelope = async (bytes = envelope) =>
    client.request(
      "restore_backup",
      { envelope: bytes },
      await mintFor(client, target, "restore_backup", { envelope: bytes }),
    );
  const reconnect = async (): Promise<void> => {
    client?.close();
    ({ client } = await RawEnclaveClient.connect(target.socketPath));
  };

  beforeAll(async () => {
    live = await createEnclaveFixture({ envId: "recovery-key-env" });
    const { client: liveClient } = await RawEnclaveClient.connect(live.socketPath);
    const batch = await privileged(liveClient, live, "generate_keys", {
      namespace: "agent-transfer",
      count: 2,
      batch_id: "batch-rk",
    });
    keys = batch.keys as Key[];
    const exported = await privileged(liveClient, live, "export_backup", {
      batch_id: "batch-rk",
      key_refs: keys.map((key) => key.key_ref),
    });
    envelope = new Uint8Array(exported.envelope as Uint8Array);
    liveClient.close();
    await live.stop();
    // The enclave a drill or a recovery restores into: same env id and public keys, new data folder.
    target = await createEnclaveFixture({ envId: "recovery-key-env", keys: live });
    await reconnect();
    signer = createSocketSignerClient({ socketPath: target.socketPath });
  });
  afterAll(async () => {
    client?.close();
    await signer?.close();
    await target?.dispose();
    await live?.dispose();
  });

  it("refuses load_recovery_key without a recovery capability: none, the admin's, the policy's", async () => {
    const params = await sealedToTarget(target.recoveryEncKey);
    expect(await client.request("load_recovery_key", params)).toMatchObject({
      ok: false,
      error: { code: "capability_rejected" },
    });
    for (const secret of [target.adminSecret, target.policySecret]) {
      const cap = await mintFor(client, target, "load_recovery_key", params, { secret });
      expect(await client.request("load_recovery_key", params, cap)).toMatchObject({
        ok: false,
        error: { code: "capability_rejected" },
      });
    }
    // Nothing was loaded: the envelope does not open.
    expect(await restoreEnvelope()).toMatchObject({ ok: false, error: { code: "not_configured" } });
  });

  it("refuses a key whose public half is not the sealed recovery key, and holds nothing", async () => {
    const params = await sealedToTarget(randomX25519PrivateKey());
    expect(
      await client.request(
        "load_recovery_key",
        params,
        await mintFor(client, target, "load_recovery_key", params),
      ),
    ).toMatchObject({
      ok: false,
      error: { code: "seal_failed", reason: "the key is not this enclave's recovery encryption key" },
    });
    expect(await restoreEnvelope()).toMatchObject({ ok: false, error: { code: "not_configured" } });
  });

  it("refuses a sealed key for a transport key it does not hold, and one that does not open", async () => {
    const params = await sealedToTarget(target.recoveryEncKey);
    const unknown = { ...params, transport_public_key: toHex(x25519PublicKey(randomX25519PrivateKey())) };
    expect(
      await client.request(
        "load_recovery_key",
        unknown,
        await mintFor(client, target, "load_recovery_key", unknown),
      ),
    ).toMatchObject({ error: { code: "seal_failed", reason: expect.stringContaining("ask for a new one") } });
    const ct = fromHex(params.ct as string);
    ct[0]! ^= 0x01;
    const tampered = { ...params, ct: toHex(ct) };
    expect(
      await client.request(
        "load_recovery_key",
        tampered,
        await mintFor(client, target, "load_recovery_key", tampered),
      ),
    ).toMatchObject({ error: { code: "seal_failed", reason: "the sealed recovery key does not open" } });
  });

  it("restores the envelope as it is on disk once the recovery key is loaded; a corrupted recovery copy is refused", async () => {
    const loaded = await loadRecoveryKeyInto({
      signer,
      recoveryEncryptionKey: target.recoveryEncKey,
      recoveryPublicKey: x25519PublicKey(target.recoveryEncKey),
      authorize: recoveryMinter(),
    });
    expect(loaded).toMatchObject({ ok: true, value: { expiresAt: expect.any(String) } });
    // Held an hour at most.
    const heldFor = Date.parse((loaded as { value: { expiresAt: string } }).value.expiresAt) - Date.now();
    expect(heldFor).toBeGreaterThan(55 * 60_000);
    expect(heldFor).toBeLessThanOrEqual(60 * 60_000);

    const decoded = decodeCbor(envelope) as { recovery: { enc: Uint8Array; ct: Uint8Array } };
    const ct = new Uint8Array(decoded.recovery.ct);
    ct[ct.length - 1]! ^= 0x01;
    const corrupted = encodeCbor({ ...decoded, recovery: { ...decoded.recovery, ct } });
    expect(await restoreEnvelope(corrupted)).toMatchObject({
      ok: false,
      error: { code: "seal_failed", reason: expect.stringContaining("the recovery copy does not open") },
    });

    expect(expectOk(await restoreEnvelope())).toEqual({
      batch_id: "batch-rk",
      namespace: "agent-transfer",
      keys,
      imported: 2,
    });
  });

  it("forgets the recovery key at a restart", async () => {
    await target.stop();
    await target.start();
    await reconnect();
    const again = await restoreEnvelope();
    expect(again).toMatchObject({ ok: false, error: { code: "not_configured" } });
    expect((again as { error: { reason: string } }).error.reason).toContain("load_recovery_key first");
  });
});
