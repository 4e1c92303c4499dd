import { randomBytes } from "node:crypto";
import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { recoverTransactionAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authorityPublicKey } from "../../shared/capability.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import type { Hex } from "../../shared/hex.ts";
import { verifyIdentityProof } from "../../shared/identity-proof.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../../testing/enclave-process.ts";
import { createCapabilityMinter } from "./capability-minter.ts";
import { describeSignerConformance } from "./conformance.ts";
import { createSignerClient } from "./create-signer-client.ts";
import { createSocketSignerClient } from "./socket-client.ts";
import type { CapabilityProvider, KeyPublicInfo, SignerClient, SignerPolicy } from "./types.ts";

const nonce = (): Hex => `0x${randomBytes(32).toString("hex")}`;

const policy: SignerPolicy = {
  perTxLimitUnits: 1_000_000n,
  dailyLimitUnits: 5_000_000n,
  recipientAllowlist: null,
  x402AmountUnits: 10_000n,
  x402PayTo: "0x2222222222222222222222222222222222222222",
  x402MaxTimeoutSeconds: 180,
  operatorPool: "0x00000000000000000000000000000000000000aa",
  feeCeilingWei: 10n ** 15n,
  x402ValidityMarginSeconds: 6,
  x402DailyLimit: 1000,
  settlerDailyFeeUnits: 1_000_000_000n,
};

describe("socket signer client against the real enclave", () => {
  let enclave: EnclaveProcess;
  let client: SignerClient;
  let admin: CapabilityProvider;
  let keys: KeyPublicInfo[];

  beforeAll(async () => {
    enclave = await startEnclaveProcess();
    client = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
      requestTimeoutMs: 2_000,
      backoff: { initialMs: 50, maxMs: 200 },
    });
    // The origin reads the admin authority key from a 0600 file named in its config.
    const keyPath = join(enclave.dir, "admin-authority.key");
    await writeFile(keyPath, `0x${Buffer.from(enclave.adminSecret).toString("hex")}\n`, { mode: 0o600 });
    await chmod(keyPath, 0o600);
    admin = createCapabilityMinter({ authority: { keyPath }, envId: enclave.envId, client });
  });
  afterAll(async () => {
    await client?.close();
    await enclave?.dispose();
  });

  it("generates keys under an admin capability minted from the key file", async () => {
    const result = await client.generateKeys(
      { namespace: "agent-transfer", count: 3, batchId: "client-batch" },
      admin,
    );
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    keys = result.value.keys;
    expect(result.value).toMatchObject({ batchId: "client-batch", namespace: "agent-transfer" });
    expect(keys).toHaveLength(3);
  });

  it("serialises concurrent privileged calls so their counters stay contiguous", async () => {
    const results = await Promise.all(
      ["a", "b", "c"].map((suffix) =>
        client.generateKeys({ namespace: "faucet", count: 1, batchId: `concurrent-${suffix}` }, admin),
      ),
    );
    expect(results.map((result) => result.ok)).toEqual([true, true, true]);
    const counter = await client.capabilityCounter({
      authority: authorityPublicKey(enclave.adminSecret),
      scope: "admin",
      op: "generate_keys",
    });
    expect(counter).toEqual({ ok: true, value: { nextCounter: 5 } });
  });

  it("proves identity; the proof verifies with the shared verifier", async () => {
    const key = keys[0]!;
    const verifierNonce = nonce();
    const proof = await client.proveIdentity({ keyRef: key.keyRef, verifierNonce });
    expect(proof.ok).toBe(true);
    if (!proof.ok) return;
    expect(proof.value).toMatchObject({
      keyRef: key.keyRef,
      address: key.address,
      envId: enclave.envId,
      chainId: CHAIN_ID,
    });
    expect(
      verifyIdentityProof({
        chainId: CHAIN_ID,
        envId: enclave.envId,
        keyRef: key.keyRef,
        storedWallet: key.address,
        verifierNonce,
        publicKey: proof.value.publicKey,
        address: proof.value.address,
        signature: proof.value.signature,
      }),
    ).toEqual({ ok: true });
  });

  it("multiplexes many requests in flight on one connection, each resolved with its own answer", async () => {
    const nonces = Array.from({ length: 32 }, nonce);
    const proofs = await Promise.all(
      nonces.map((verifierNonce, index) =>
        client.proveIdentity({ keyRef: keys[index % keys.length]!.keyRef, verifierNonce }),
      ),
    );
    // Every proof is over its own request's nonce: no answer was handed to another caller.
    for (const [index, proof] of proofs.entries()) {
      const key = keys[index % keys.length]!;
      expect(proof.ok).toBe(true);
      if (!proof.ok) continue;
      expect(
        verifyIdentityProof({
          chainId: CHAIN_ID,
          envId: enclave.envId,
          keyRef: key.keyRef,
          storedWallet: key.address,
          verifierNonce: nonces[index]!,
          publicKey: proof.value.publicKey,
          address: proof.value.address,
          signature: proof.value.signature,
        }),
      ).toEqual({ ok: true });
    }
  });

  it("resolves a fast request sent after a slow one first: requests are in flight together", async () => {
    const order: string[] = [];
    let minted!: () => void;
    const capabilityBack = new Promise<void>((resolve) => {
      minted = resolve;
    });
    const authorize: CapabilityProvider = async (request) => {
      const capability = await admin(request);
      minted();
      return capability;
    };
    const slow = client
      .generateKeys({ namespace: "agent-transfer", count: 1000, batchId: "slow-client-batch" }, authorize)
      .then((result) => {
        order.push("slow");
        return result;
      });
    // Sent once the slow request is on the wire. Its capability is minted first (a round trip of
    // its own); the frame is written in the turn the capability comes back, and leaves when the
    // socket is uncorked at the next check phase (socket-transport.ts send): two setImmediate
    // turns after the capability is back, it has left.
    await capabilityBack;
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    const fast = client.publicIdentity({ keyRef: keys[0]!.keyRef }).then((result) => {
      order.push("fast");
      return result;
    });
    const [slowResult, fastResult] = await Promise.all([slow, fast]);
    expect(slowResult.ok && slowResult.value.keys).toHaveLength(1000);
    expect(fastResult).toMatchObject({ ok: true, value: { keyRef: keys[0]!.keyRef } });
    expect(order).toEqual(["fast", "slow"]);
  });

  it("refuses configure_policy under the origin's admin key, as the policy tier is not the origin's", async () => {
    const refused = await client.configurePolicy(policy, admin);
    expect(refused).toMatchObject({ ok: false, error: { code: "capability_rejected" } });
    expect(await client.getPolicy()).toMatchObject({ ok: true, value: { policyVersion: 0, policy: null } });
  });

  it("configures policy under the policy key, reads it back with getPolicy, and signs a transfer with bigint amounts", async () => {
    const operator = createCapabilityMinter({
      authority: enclave.policySecret,
      envId: enclave.envId,
      client,
    });
    const configured = await client.configurePolicy(policy, operator);
    expect(configured).toMatchObject({
      ok: true,
      value: { perTxLimitUnits: 1_000_000n, x402AmountUnits: 10_000n, feeCeilingWei: 10n ** 15n },
    });
    expect(await client.getPolicy()).toEqual({
      ok: true,
      value: {
        envId: enclave.envId,
        chainId: CHAIN_ID,
        policyVersion: 1,
        policy: { ...policy, x402PayTo: policy.x402PayTo?.toLowerCase() },
        treasury: null,
        settler: null,
        // Made at init: the x402 payee key, which signs offers and receipts.
        payee: { payeeKeyRef: expect.stringMatching(/^[0-9a-f]{64}$/), payeeAddress: expect.any(String) },
        nodeFrozen: false,
        nodeFreezeEpoch: 0,
        operatorKeys: [],
        operatorPasskeys: [],
        revokedOperatorKeys: [],
      },
    });
    const signed = await client.signTransfer({
      keyRef: keys[1]!.keyRef,
      from: keys[1]!.address,
      chainId: CHAIN_ID,
      to: "0x1111111111111111111111111111111111111111",
      valueUnits: 250_000n,
      nonce: 0n,
      maxFeePerGas: 2_000_000_000n,
      maxPriorityFeePerGas: 1_000_000_000n,
      gasLimit: 21_000n,
    });
    expect(signed.ok).toBe(true);
    if (!signed.ok) return;
    expect(
      await recoverTransactionAddress({
        serializedTransaction: signed.value.rawTransaction as `0x02${string}`,
      }),
    ).toBe(keys[1]!.address);
  });

  it("maps enclave refusals to sweep classes", async () => {
    const overLimit = await client.signTransfer({
      keyRef: keys[1]!.keyRef,
      from: keys[1]!.address,
      chainId: CHAIN_ID,
      to: "0x1111111111111111111111111111111111111111",
      valueUnits: 1_000_001n,
      nonce: 1n,
      maxFeePerGas: 1n,
      maxPriorityFeePerGas: 1n,
      gasLimit: 21_000n,
    });
    expect(overLimit).toEqual({
      ok: false,
      error: {
        class: "terminal_agent",
        code: "cap_exceeded",
        reason: "over the per-transaction limit",
        detail: "per_transaction",
      },
    });
    const unknownKey = await client.publicIdentity({ keyRef: "ab".repeat(32) });
    expect(unknownKey).toMatchObject({
      ok: false,
      error: { class: "terminal_agent", code: "key_purpose_mismatch" },
    });
    const replay: CapabilityProvider = async (request) => {
      const minted = await admin(request);
      return minted.ok ? { ok: true, value: { ...minted.value, counter: 1 } } : minted;
    };
    const rejected = await client.generateKeys(
      { namespace: "agent-transfer", count: 1, batchId: "replayed" },
      replay,
    );
    expect(rejected).toMatchObject({
      ok: false,
      error: { class: "terminal_config", code: "capability_rejected" },
    });
  });

  it("answers identity ops from the dormant stub when live identity is off, other ops live", async () => {
    const dormant = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: false,
    });
    expect(await dormant.proveIdentity({ keyRef: keys[0]!.keyRef, verifierNonce: nonce() })).toEqual({
      ok: false,
      error: {
        class: "terminal_unknown",
        code: "agent_signer_protocol_unavailable",
        reason: "the live enclave signer is not enabled",
      },
    });
    expect(await dormant.publicIdentity({ keyRef: keys[0]!.keyRef })).toMatchObject({
      error: { code: "agent_signer_protocol_unavailable" },
    });
    expect(await dormant.verifyBackup({ envelope: Uint8Array.of(1) })).toMatchObject({
      ok: false,
      error: { class: "terminal_wire", code: "malformed" },
    });
    await dormant.close();
  });

  it("fails fast as retryable while the enclave is down and reconnects after it restarts", async () => {
    expect((await client.publicIdentity({ keyRef: keys[0]!.keyRef })).ok).toBe(true);
    await enclave.stop();
    expect(await client.publicIdentity({ keyRef: keys[0]!.keyRef })).toMatchObject({
      ok: false,
      error: { class: "retryable", code: expect.stringMatching(/^signer_(unreachable|connection_lost)$/) },
    });
    await enclave.start();
    const after = await client.publicIdentity({ keyRef: keys[0]!.keyRef });
    expect(after).toMatchObject({ ok: true, value: { keyRef: keys[0]!.keyRef, address: keys[0]!.address } });
  });

  it("refuses an enclave that announces another profile (terminal_wire)", async () => {
    await enclave.start({ profile: "bridge_operator" });
    const probe = createSocketSignerClient({ socketPath: enclave.socketPath });
    try {
      expect(await probe.publicIdentity({ keyRef: keys[0]!.keyRef })).toEqual({
        ok: false,
        error: {
          class: "terminal_wire",
          code: "wrong_profile",
          reason: "the enclave announced profile bridge_operator",
        },
      });
    } finally {
      await probe.close();
      await enclave.start();
    }
  });
});

describeSignerConformance("socket client (createSignerClient, live identity)", {
  startEnclave: () => startEnclaveProcess(),
  client: (enclave, options) =>
    createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
      requestTimeoutMs: options.requestTimeoutMs,
    }),
  dormantOps: [],
});
