import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { authorityPublicKey, randomAuthoritySecret } from "../shared/capability.ts";
import { toHex } from "../shared/hex.ts";
import { randomX25519PrivateKey, x25519PublicKey } from "../shared/recovery-envelope.ts";
import { dataDirLayout } from "./data-dir.ts";
import { InitError, initEnclave } from "./init.ts";
import { Keystore } from "./keystore.ts";
import { readSealedConfig, readSealingKey } from "./sealed-config.ts";
import { generateSealingKey } from "./sealing.ts";
import { StateStore } from "./state-store.ts";

describe("initEnclave", () => {
  let dir: string;
  const admin = authorityPublicKey(randomAuthoritySecret());
  const policy = authorityPublicKey(randomAuthoritySecret());
  const recovery = authorityPublicKey(randomAuthoritySecret());
  const recoveryEnc = toHex(x25519PublicKey(randomX25519PrivateKey()));
  /** An init of this test's folder with the authorities above. */
  const initParams = () => ({
    dataDir: dir,
    envId: "dev-1",
    adminAuthority: admin,
    policyAuthority: policy,
    recoveryAuthority: recovery,
    recoveryEncryptionKey: recoveryEnc,
  });

  beforeEach(async () => {
    dir = join(await mkdtemp(join(tmpdir(), "enclave-init-")), "data");
  });
  afterEach(async () => {
    await rm(join(dir, ".."), { recursive: true, force: true });
  });

  it("creates a 0600 sealing key and seals env id, chain id 77, the three authorities, the recovery encryption key and an instance id beside it", async () => {
    await initEnclave({
      dataDir: dir,
      envId: "dev-1",
      adminAuthority: admin,
      policyAuthority: policy.toUpperCase().replace("0X", "0x"),
      recoveryAuthority: recovery.slice(2),
      recoveryEncryptionKey: recoveryEnc.slice(2).toUpperCase(),
    });
    const layout = dataDirLayout(dir);
    expect((await stat(layout.sealingKey)).mode & 0o777).toBe(0o600);
    expect((await stat(layout.sealedConfig)).mode & 0o777).toBe(0o600);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    const { config, upgraded } = await readSealedConfig(layout, await readSealingKey(layout));
    expect(upgraded).toBe(false);
    expect(config.instance_id).toMatch(/^0x[0-9a-f]{32}$/);
    expect(config).toMatchObject({
      v: 4,
      env_id: "dev-1",
      chain_id: 77,
      admin_authority: admin,
      policy_authority: policy,
      recovery_authority: recovery,
      recovery_encryption_key: recoveryEnc,
    });
    // The state names the payee key init made (docs/x402.md#offers-and-receipts).
    expect((await readdir(dir)).sort()).toEqual([
      "enclave.sealed",
      "keys",
      "sealing.key",
      "state.0.sealed",
      "state.journal",
    ]);
  });

  it("makes the x402 payee key, sealed in the `payee` namespace and named by the state, and reports its address", async () => {
    const made = await initEnclave(initParams());
    const layout = dataDirLayout(dir);
    const sealingKey = await readSealingKey(layout);
    const keystore = await Keystore.open(layout.keysDir, sealingKey, pino({ level: "silent" }));
    const state = await StateStore.open(layout.state, sealingKey);
    try {
      const key = keystore.get(state.state.payeeKeyRef!);
      expect(key).toMatchObject({ namespace: "payee", address: made.payee_address });
      expect(keystore.size).toBe(1);
    } finally {
      await state.close();
    }
  });

  it("draws a new instance id for every data folder, even one initialised with the same env id and keys", async () => {
    const params = {
      envId: "dev-1",
      adminAuthority: admin,
      policyAuthority: policy,
      recoveryAuthority: recovery,
      recoveryEncryptionKey: recoveryEnc,
    };
    const first = await initEnclave({ ...params, dataDir: join(dir, "a") });
    const second = await initEnclave({ ...params, dataDir: join(dir, "b") });
    expect(second.instance_id).not.toBe(first.instance_id);
  });

  it("refuses to initialise twice, which would orphan every sealed key", async () => {
    const params = initParams();
    await initEnclave(params);
    await expect(initEnclave(params)).rejects.toBeInstanceOf(InitError);
  });

  it("initialises a folder once when two inits run at once: the other is refused, and the folder unseals under one key", async () => {
    // Two operators (or a script and a person) initialising a recovery's new enclave in one folder
    // (docs/operations.md#disaster-recovery, step 2): each wrote its own sealing key over the
    // other's and sealed its config and payee key under its own, both said they were done, and
    // the folder unsealed under neither key: the enclave refused to start.
    const params = initParams();
    const runs = await Promise.allSettled([initEnclave(params), initEnclave(params)]);
    const done = runs.flatMap((run) => (run.status === "fulfilled" ? [run.value] : []));
    expect(done, "inits that reported success").toHaveLength(1);
    const refusal = runs.find((run) => run.status === "rejected");
    expect(refusal?.status === "rejected" && refusal.reason).toBeInstanceOf(InitError);
    expect(refusal?.status === "rejected" && String(refusal.reason)).toMatch(/is already initialised/);
    const layout = dataDirLayout(dir);
    const sealingKey = await readSealingKey(layout);
    const { config } = await readSealedConfig(layout, sealingKey);
    expect(config.instance_id).toBe(done[0]!.instance_id);
    const keystore = await Keystore.open(layout.keysDir, sealingKey, pino({ level: "silent" }));
    const state = await StateStore.open(layout.state, sealingKey);
    try {
      expect(keystore.get(state.state.payeeKeyRef!)?.address).toBe(done[0]!.payee_address);
    } finally {
      await state.close();
    }
  });

  it("initialises a folder an init killed before sealing its config left with a sealing key alone", async () => {
    const layout = dataDirLayout(dir);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const leftOver = generateSealingKey();
    await writeFile(layout.sealingKey, leftOver, { mode: 0o600 });
    const made = await initEnclave(initParams());
    const { config } = await readSealedConfig(layout, leftOver);
    expect(config.instance_id).toBe(made.instance_id);
  });

  it("refuses a bad env id, a bad key and any two equal authorities", async () => {
    const base = initParams();
    await expect(initEnclave({ ...base, envId: "Dev_1" })).rejects.toThrow(/env-id/);
    await expect(initEnclave({ ...base, adminAuthority: "0x1234" })).rejects.toThrow(/admin-pubkey/);
    await expect(initEnclave({ ...base, policyAuthority: "0x1234" })).rejects.toThrow(/policy-pubkey/);
    await expect(initEnclave({ ...base, recoveryAuthority: admin })).rejects.toThrow(/differ/);
    await expect(initEnclave({ ...base, recoveryEncryptionKey: "0x1234" })).rejects.toThrow(
      /recovery-enc-pubkey/,
    );
    // A low-order X25519 point (here zero) would give every backup an all-zero shared secret.
    await expect(initEnclave({ ...base, recoveryEncryptionKey: `0x${"00".repeat(32)}` })).rejects.toThrow(
      /recovery-enc-pubkey/,
    );
    // The origin holds the admin key: a policy authority equal to it would undo the tier.
    await expect(initEnclave({ ...base, policyAuthority: admin.slice(2) })).rejects.toThrow(/differ/);
    await expect(initEnclave({ ...base, policyAuthority: recovery })).rejects.toThrow(/differ/);
    await expect(readdir(join(dir, ".."))).resolves.toEqual([]);
  });
});
