import { createHash, randomBytes } from "node:crypto";
import { stat } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reencryptForTransport } from "../ops/lib/reencrypt-envelope.ts";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import { fromHex, type Hex, toHex } from "../shared/hex.ts";
import { verifyIdentityProof } from "../shared/identity-proof.ts";
import {
  checkBackupSignature,
  headerAad,
  hpkeOpen,
  hpkeSeal,
  packageAad,
  parseBackupEnvelope,
  parseSecrets,
  RECOVERY_HPKE_INFO,
  RESTORE_PACKAGE_KIND,
  recoveryKeyFingerprint,
  TRANSPORT_HPKE_INFO,
  x25519PublicKey,
} from "../shared/recovery-envelope.ts";
import { publicKeyOf } from "../shared/secp256k1.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { mintFor, nextCounter, privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

type Key = { key_ref: string; public_key: Hex; address: Hex };

describe("keystore, identity proof and backups (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let keys: Key[];

  const reconnect = async (): Promise<void> => {
    client?.close();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
  };

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "keystore-env" });
    await reconnect();
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 3,
      batch_id: "batch-ks",
    });
    keys = batch.keys as Key[];
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("returns the same batch for a retried generate_keys with the same batch_id", async () => {
    const retried = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 3,
      batch_id: "batch-ks",
    });
    expect(retried.keys).toEqual(keys);
  });

  describe("identity proof", () => {
    const nonce = `0x${randomBytes(32).toString("hex")}` as Hex;
    let proof: Record<string, unknown>;
    const expected = (overrides: Partial<Parameters<typeof verifyIdentityProof>[0]> = {}) => ({
      chainId: CHAIN_ID,
      envId: "keystore-env",
      keyRef: keys[0]!.key_ref,
      storedWallet: keys[0]!.address,
      verifierNonce: nonce,
      publicKey: proof.public_key as Hex,
      address: proof.address as Hex,
      signature: proof.signature as Hex,
      ...overrides,
    });

    beforeAll(async () => {
      proof = expectOk(
        await client.request("prove_identity", { key_ref: keys[0]!.key_ref, verifier_nonce: nonce }),
      );
    });

    it("verifies against the stored wallet", () => {
      expect(proof).toMatchObject({ env_id: "keystore-env", chain_id: CHAIN_ID, address: keys[0]!.address });
      expect(verifyIdentityProof(expected())).toEqual({ ok: true });
    });

    it("does not verify with another nonce, env id, chain id, key_ref or wallet", () => {
      const otherNonce = `0x${randomBytes(32).toString("hex")}` as Hex;
      expect(verifyIdentityProof(expected({ verifierNonce: otherNonce }))).toEqual({
        ok: false,
        error: "signature_invalid",
      });
      expect(verifyIdentityProof(expected({ envId: "other-env" }))).toEqual({
        ok: false,
        error: "signature_invalid",
      });
      expect(verifyIdentityProof(expected({ chainId: 1 }))).toEqual({
        ok: false,
        error: "signature_invalid",
      });
      expect(verifyIdentityProof(expected({ keyRef: keys[1]!.key_ref }))).toEqual({
        ok: false,
        error: "signature_invalid",
      });
      expect(verifyIdentityProof(expected({ storedWallet: keys[1]!.address }))).toEqual({
        ok: false,
        error: "wallet_mismatch",
      });
    });
  });

  it("keeps keys, counters and daily spend across an enclave restart", async () => {
    await privileged(client, fixture, "configure_policy", {
      per_tx_limit_units: "50",
      daily_limit_units: "60",
      recipient_allowlist: null,
      x402_amount_units: null,
      x402_pay_to: null,
      x402_max_timeout_seconds: 180,
      operator_pool: "0x00000000000000000000000000000000000000aa",
      fee_ceiling_wei: "1000000000000000",
      x402_validity_margin_seconds: 6,
      x402_daily_limit: 1000,
      settler_daily_fee_units: "1000000000",
    });
    // Each transfer's maximum fee (21000 × 1 wei) counts as one unit.
    const transfer = (value: string) => ({
      key_ref: keys[2]!.key_ref,
      from: keys[2]!.address,
      chain_id: CHAIN_ID,
      to: "0x1111111111111111111111111111111111111111",
      value_units: value,
      nonce: "0",
      max_fee_per_gas: "1",
      max_priority_fee_per_gas: "1",
      gas_limit: "21000",
    });
    expectOk(await client.request("sign_transfer", transfer("49")));
    const counterBefore = await nextCounter(client, fixture.adminSecret, "generate_keys");

    expect(await fixture.stop()).toBe(0);
    await fixture.start();
    await reconnect();

    for (const key of keys) {
      expect(expectOk(await client.request("public_identity", { key_ref: key.key_ref }))).toMatchObject({
        ...key,
        namespace: "agent-transfer",
      });
    }
    expect(await nextCounter(client, fixture.adminSecret, "generate_keys")).toBe(counterBefore);
    // 50 of 60 spent before the restart: 10 + 1 is refused, 9 + 1 fits exactly.
    expect(await client.request("sign_transfer", transfer("10"))).toMatchObject({
      error: { code: "cap_exceeded", reason: "over the daily limit" },
    });
    expectOk(await client.request("sign_transfer", transfer("9")));
  });

  it("removes its socket on SIGTERM", async () => {
    await fixture.stop();
    await expect(stat(fixture.socketPath)).rejects.toMatchObject({ code: "ENOENT" });
    await fixture.start();
    await reconnect();
  });

  describe("backups", () => {
    let envelope: Uint8Array;

    it("exports a v3 envelope: plaintext header naming the recovery key, HPKE recovery copy, sealing-key copy, signed by the enclave's backup signer", async () => {
      const exported = await privileged(client, fixture, "export_backup", {
        batch_id: "batch-ks",
        key_refs: keys.map((key) => key.key_ref),
      });
      envelope = new Uint8Array(exported.envelope as Uint8Array);
      expect(exported.sha256).toBe(`0x${createHash("sha256").update(envelope).digest("hex")}`);
      // The header (batch, env, public keys, recovery key fingerprint) is plaintext; only the
      // private keys are sealed, once to the recovery key and once under the sealing key.
      const decoded = decodeCbor(envelope) as {
        v: number;
        header: Record<string, unknown>;
        recovery: unknown;
      };
      expect(decoded.v).toBe(3);
      expect(decoded.header).toMatchObject({
        batch_id: "batch-ks",
        env_id: "keystore-env",
        chain_id: CHAIN_ID,
        namespace: "agent-transfer",
        recovery_key_sha256: recoveryKeyFingerprint(x25519PublicKey(fixture.recoveryEncKey)),
      });
      // The offline recovery key opens its copy, bound to the header, and gets the batch's keys.
      const parsed = parseBackupEnvelope(envelope);
      if (!parsed.ok) throw new Error(parsed.error);
      // Signed by the key the enclave names as its backup signer, and by no other.
      const { backup_signer: signer } = expectOk(await client.request("get_sealed_identity", {}));
      expect(
        checkBackupSignature(parsed.value, { expected: fromHex(signer as string), acceptUnsigned: false }),
      ).toEqual({
        ok: true,
        value: false,
      });
      expect(
        checkBackupSignature(parsed.value, { expected: new Uint8Array(32).fill(7), acceptUnsigned: false })
          .ok,
      ).toBe(false);
      const plaintext = await hpkeOpen(
        fixture.recoveryEncKey,
        RECOVERY_HPKE_INFO,
        headerAad(parsed.value.header),
        parsed.value.recovery,
      );
      const secrets = parseSecrets(plaintext, parsed.value.header);
      expect(secrets?.map((secret) => toHex(publicKeyOf(secret.private_key)))).toEqual(
        keys.map((key) => key.public_key),
      );
    });

    it("refuses to export a set of keys other than the batch", async () => {
      const params = { batch_id: "batch-ks", key_refs: [keys[0]!.key_ref] };
      const response = await client.request(
        "export_backup",
        params,
        await mintFor(client, fixture, "export_backup", params),
      );
      expect(response).toMatchObject({ error: { code: "key_purpose_mismatch" } });
    });

    it("verifies the envelope: every key reproduces its public key", async () => {
      const verified = expectOk(await client.request("verify_backup", { envelope }));
      expect(verified).toEqual({ batch_id: "batch-ks", namespace: "agent-transfer", keys });
    });

    it("refuses a tampered sealing-key copy, a truncated recovery copy (seal_failed) and garbage (malformed)", async () => {
      const decoded = decodeCbor(envelope) as {
        sealed: Uint8Array;
        recovery: { enc: Uint8Array; ct: Uint8Array };
      };
      const sealed = new Uint8Array(decoded.sealed);
      sealed[sealed.length - 1]! ^= 0x01;
      expect(
        await client.request("verify_backup", { envelope: encodeCbor({ ...decoded, sealed }) }),
      ).toMatchObject({ error: { code: "seal_failed", reason: "envelope does not authenticate" } });
      const truncated = { ...decoded.recovery, ct: new Uint8Array(decoded.recovery.ct).subarray(1) };
      expect(
        await client.request("verify_backup", { envelope: encodeCbor({ ...decoded, recovery: truncated }) }),
      ).toMatchObject({
        error: { code: "seal_failed", reason: "envelope's recovery copy is not well formed" },
      });
      expect(await client.request("verify_backup", { envelope: Uint8Array.of(1, 2, 3) })).toMatchObject({
        error: { code: "malformed" },
      });
    });

    describe("restore into a new enclave (same env id and authorities, its own fresh data folder)", () => {
      let fresh: EnclaveFixture;
      let freshClient: RawEnclaveClient;
      const transportKey = async (): Promise<Uint8Array> => {
        const offered = expectOk(await freshClient.request("new_transport_key", {}));
        expect(offered).toMatchObject({ env_id: "keystore-env", chain_id: CHAIN_ID });
        return fromHex(offered.transport_public_key as string);
      };
      const packageFor = async (transport: Uint8Array): Promise<Uint8Array> => {
        const made = await reencryptForTransport({
          envelope,
          recoveryPrivateKey: fixture.recoveryEncKey,
          transportPublicKey: transport,
          expect: { envId: "keystore-env", chainId: CHAIN_ID },
        });
        if (!made.ok) throw new Error(made.error.reason);
        return made.value.package;
      };

      beforeAll(async () => {
        fresh = await createEnclaveFixture({ envId: "keystore-env", keys: fixture });
        ({ client: freshClient } = await RawEnclaveClient.connect(fresh.socketPath));
      });
      afterAll(async () => {
        freshClient?.close();
        await fresh?.dispose();
      });

      it("reports its sealed identity: the same public keys as the old enclave, its own instance id, nothing secret", async () => {
        const {
          instance_id: freshInstance,
          backup_signer: freshSigner,
          ...freshIdentity
        } = expectOk(await freshClient.request("get_sealed_identity", {}));
        const {
          instance_id: oldInstance,
          backup_signer: oldSigner,
          ...oldIdentity
        } = expectOk(await client.request("get_sealed_identity", {}));
        expect(freshIdentity).toEqual(oldIdentity);
        expect(freshInstance).not.toBe(oldInstance);
        // Derived from its own sealing key: the new enclave's backups are not the lost one's.
        expect(freshSigner).not.toBe(oldSigner);
      });

      it("imports the batch under its original key_refs and namespace; a restored key proves itself; a repeat imports nothing", async () => {
        const restorePackage = await packageFor(await transportKey());
        const restored = await privileged(freshClient, fresh, "restore_backup", { package: restorePackage });
        expect(restored).toEqual({ batch_id: "batch-ks", namespace: "agent-transfer", keys, imported: 3 });
        expect(
          expectOk(await freshClient.request("public_identity", { key_ref: keys[1]!.key_ref })),
        ).toMatchObject({
          namespace: "agent-transfer",
          address: keys[1]!.address,
        });
        const nonce = `0x${randomBytes(32).toString("hex")}` as Hex;
        const proof = expectOk(
          await freshClient.request("prove_identity", { key_ref: keys[1]!.key_ref, verifier_nonce: nonce }),
        );
        expect(
          verifyIdentityProof({
            chainId: CHAIN_ID,
            envId: "keystore-env",
            keyRef: keys[1]!.key_ref,
            storedWallet: keys[1]!.address,
            verifierNonce: nonce,
            publicKey: proof.public_key as Hex,
            address: proof.address as Hex,
            signature: proof.signature as Hex,
          }),
        ).toEqual({ ok: true });
        const again = await privileged(freshClient, fresh, "restore_backup", {
          package: await packageFor(await transportKey()),
        });
        expect(again).toEqual({ batch_id: "batch-ks", namespace: "agent-transfer", keys, imported: 0 });
        // The restored batch survives a restart: it was sealed under the new enclave's own key.
        await fresh.stop();
        await fresh.start();
        freshClient.close();
        ({ client: freshClient } = await RawEnclaveClient.connect(fresh.socketPath));
        expect(
          expectOk(await freshClient.request("public_identity", { key_ref: keys[2]!.key_ref })),
        ).toMatchObject({
          public_key: keys[2]!.public_key,
        });
      });

      it("refuses a package for a transport key it no longer holds (offered before a restart)", async () => {
        const stale = await packageFor(await transportKey());
        await fresh.stop();
        await fresh.start();
        freshClient.close();
        ({ client: freshClient } = await RawEnclaveClient.connect(fresh.socketPath));
        const params = { package: stale };
        const response = await freshClient.request(
          "restore_backup",
          params,
          await mintFor(freshClient, fresh, "restore_backup", params),
        );
        expect(response).toMatchObject({ error: { code: "seal_failed" } });
        expect((response as { error: { reason: string } }).error.reason).toContain("ask for a new one");
      });

      it("refuses a package whose header names another env id, and one whose header was altered", async () => {
        // Made here by the test with the recovery key, as a compromised operator machine could:
        // the enclave itself must refuse another environment's batch.
        const parsed = parseBackupEnvelope(envelope);
        if (!parsed.ok) throw new Error(parsed.error);
        const plaintext = await hpkeOpen(
          fixture.recoveryEncKey,
          RECOVERY_HPKE_INFO,
          headerAad(parsed.value.header),
          parsed.value.recovery,
        );
        const transport = await transportKey();
        const craft = async (header: typeof parsed.value.header, aadHeader = header) =>
          encodeCbor({
            v: 1,
            kind: RESTORE_PACKAGE_KIND,
            header,
            transport_public_key: transport,
            box: await hpkeSeal(transport, TRANSPORT_HPKE_INFO, packageAad(aadHeader, transport), plaintext),
          });
        const send = async (restorePackage: Uint8Array) => {
          const params = { package: restorePackage };
          return freshClient.request(
            "restore_backup",
            params,
            await mintFor(freshClient, fresh, "restore_backup", params),
          );
        };
        const otherEnv = { ...parsed.value.header, env_id: "other-env" };
        expect(await send(await craft(otherEnv))).toMatchObject({
          error: { code: "seal_failed", reason: expect.stringContaining("belongs to env other-env") },
        });
        const renamed = { ...parsed.value.header, batch_id: "batch-other" };
        expect(await send(await craft(renamed, parsed.value.header))).toMatchObject({
          error: { code: "seal_failed", reason: "restore package does not authenticate" },
        });
      });
    });
  });
});
