import { createHash, randomBytes } from "node:crypto";
import { stat } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEnclaveFixture, type EnclaveFixture } from "../scripts/test/enclave-process.ts";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import type { Hex } from "../shared/hex.ts";
import { verifyIdentityProof } from "../shared/identity-proof.ts";
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
        reason: "signature_invalid",
      });
      expect(verifyIdentityProof(expected({ envId: "other-env" }))).toEqual({
        ok: false,
        reason: "signature_invalid",
      });
      expect(verifyIdentityProof(expected({ chainId: 1 }))).toEqual({
        ok: false,
        reason: "signature_invalid",
      });
      expect(verifyIdentityProof(expected({ keyRef: keys[1]!.key_ref }))).toEqual({
        ok: false,
        reason: "signature_invalid",
      });
      expect(verifyIdentityProof(expected({ storedWallet: keys[1]!.address }))).toEqual({
        ok: false,
        reason: "wallet_mismatch",
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
    });
    // Each transfer's maximum fee (21000 × 1 wei) counts as one unit.
    const transfer = (value: string) => ({
      key_ref: keys[2]!.key_ref,
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

    it("exports an envelope whose sha256 matches its bytes", async () => {
      const exported = await privileged(client, fixture, "export_backup", {
        batch_id: "batch-ks",
        key_refs: keys.map((key) => key.key_ref),
      });
      envelope = new Uint8Array(exported.envelope as Uint8Array);
      expect(exported.sha256).toBe(`0x${createHash("sha256").update(envelope).digest("hex")}`);
      // The header (batch, env, public keys) is plaintext; only the private keys are sealed.
      const header = (decodeCbor(envelope) as { header: Record<string, unknown> }).header;
      expect(header).toMatchObject({ batch_id: "batch-ks", env_id: "keystore-env", chain_id: CHAIN_ID });
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

    it("refuses a tampered envelope with seal_failed and garbage with malformed", async () => {
      const decoded = decodeCbor(envelope) as { sealed: Uint8Array };
      const sealed = new Uint8Array(decoded.sealed);
      sealed[sealed.length - 1]! ^= 0x01;
      const tampered = encodeCbor({ ...decoded, sealed });
      expect(await client.request("verify_backup", { envelope: tampered })).toMatchObject({
        error: { code: "seal_failed" },
      });
      expect(await client.request("verify_backup", { envelope: Uint8Array.of(1, 2, 3) })).toMatchObject({
        error: { code: "malformed" },
      });
    });

    it("restores into a scratch namespace reproducing the batch's public keys; the copies cannot sign", async () => {
      const restored = await privileged(client, fixture, "restore_backup", { envelope });
      expect(restored.namespace).toMatch(/^scratch-[0-9a-f]{16}$/);
      const restoredKeys = restored.keys as Array<Key & { source_key_ref: string }>;
      expect(restoredKeys.map((key) => [key.source_key_ref, key.public_key, key.address])).toEqual(
        keys.map((key) => [key.key_ref, key.public_key, key.address]),
      );
      for (const key of restoredKeys) expect(keys.map((k) => k.key_ref)).not.toContain(key.key_ref);
      const copy = restoredKeys[0]!;
      expect(expectOk(await client.request("public_identity", { key_ref: copy.key_ref }))).toMatchObject({
        namespace: restored.namespace,
        public_key: keys[0]!.public_key,
      });
      expect(
        await client.request("sign_transfer", {
          key_ref: copy.key_ref,
          chain_id: CHAIN_ID,
          to: "0x1111111111111111111111111111111111111111",
          value_units: "1",
          nonce: "0",
          max_fee_per_gas: "1",
          max_priority_fee_per_gas: "1",
          gas_limit: "21000",
        }),
      ).toMatchObject({ error: { code: "key_purpose_mismatch" } });
    });
  });
});
