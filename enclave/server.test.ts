import { chmod, mkdir, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { authorityPublicKey, randomAuthoritySecret } from "../shared/capability.ts";
import { encodeCbor } from "../shared/cbor-frame.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import { toHex } from "../shared/hex.ts";
import { randomX25519PrivateKey, x25519PublicKey } from "../shared/recovery-envelope.ts";
import { dataDirLayout } from "./data-dir.ts";
import { initEnclave } from "./init.ts";
import { readSealedConfig } from "./sealed-config.ts";
import { generateSealingKey, SEAL_LABEL, seal } from "./sealing.ts";
import { EnclaveStartError, startEnclaveServer } from "./server.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// In-code API checks of start-up refusals; the protocol itself is covered by *.int.test.ts against
// the real process.
describe("startEnclaveServer", () => {
  let dir: string;
  let dataDir: string;
  let socketPath: string;
  const logger = pino({ level: "silent" });

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "enclave-server-"));
    dataDir = join(dir, "data");
    socketPath = join(dir, "run", "enclave.sock");
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const init = (folder = dataDir) =>
    initEnclave({
      dataDir: folder,
      envId: "server-test",
      adminAuthority: authorityPublicKey(randomAuthoritySecret()),
      policyAuthority: authorityPublicKey(randomAuthoritySecret()),
      recoveryAuthority: authorityPublicKey(randomAuthoritySecret()),
      recoveryEncryptionKey: toHex(x25519PublicKey(randomX25519PrivateKey())),
    });

  it("refuses an uninitialised data directory", async () => {
    await expect(startEnclaveServer({ socketPath, dataDir, logger })).rejects.toBeInstanceOf(
      EnclaveStartError,
    );
  });

  it("refuses a sealing key readable by its group or by others", async () => {
    await init();
    // Group alone and others alone: each bit past the owner's refuses it.
    for (const mode of [0o640, 0o604]) {
      await chmod(join(dataDir, "sealing.key"), mode);
      await expect(startEnclaveServer({ socketPath, dataDir, logger }), mode.toString(8)).rejects.toThrow(
        /chmod 600/,
      );
    }
  });

  it("creates its socket 0600, or 0660 when the origin runs as another user in the socket's group", async () => {
    await init();
    const owner = await startEnclaveServer({ socketPath, dataDir, logger });
    expect((await stat(socketPath)).mode & 0o777).toBe(0o600);
    await owner.close();
    const shared = await startEnclaveServer({ socketPath, dataDir, logger, socketMode: 0o660 });
    expect((await stat(socketPath)).mode & 0o777).toBe(0o660);
    await shared.close();
  });

  it("replaces a stale socket file, refuses a live one, and removes its socket on close", async () => {
    await init();
    await mkdir(join(dir, "run"));
    await writeFile(socketPath, "stale");
    const server = await startEnclaveServer({ socketPath, dataDir, logger });
    expect((await stat(socketPath)).isSocket()).toBe(true);
    // Another folder, so that it is the socket that is refused, not the folder's second enclave.
    const otherDataDir = join(dir, "other-data");
    await init(otherDataDir);
    await expect(startEnclaveServer({ socketPath, dataDir: otherDataDir, logger })).rejects.toThrow(
      `another enclave is listening on ${socketPath}`,
    );
    const { client, serverHello } = await RawEnclaveClient.connect(socketPath);
    expect(serverHello).toMatchObject({ profile: "agent_gateway" });
    await server.close();
    await client.closed;
    await expect(stat(socketPath)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("upgrades a v3 data folder in place with a random instance id, kept from then on", async () => {
    // The shape `init` sealed before the instance id existed.
    await mkdir(join(dataDir, "keys"), { recursive: true, mode: 0o700 });
    const sealingKey = generateSealingKey();
    const v3Config = {
      v: 3,
      env_id: "old-env",
      chain_id: CHAIN_ID,
      admin_authority: authorityPublicKey(randomAuthoritySecret()),
      policy_authority: authorityPublicKey(randomAuthoritySecret()),
      recovery_authority: authorityPublicKey(randomAuthoritySecret()),
      recovery_encryption_key: toHex(x25519PublicKey(randomX25519PrivateKey())),
      created_at: new Date().toISOString(),
    };
    await writeFile(join(dataDir, "sealing.key"), sealingKey, { mode: 0o600 });
    await writeFile(
      join(dataDir, "enclave.sealed"),
      seal(sealingKey, SEAL_LABEL.config, encodeCbor(v3Config)),
      {
        mode: 0o600,
      },
    );
    const layout = dataDirLayout(dataDir);
    const identityAfterStart = async (): Promise<Record<string, unknown>> => {
      const server = await startEnclaveServer({ socketPath, dataDir, logger });
      const { client } = await RawEnclaveClient.connect(socketPath);
      try {
        return expectOk(await client.request("get_sealed_identity", {}));
      } finally {
        client.close();
        await server.close();
      }
    };

    const first = await identityAfterStart();
    expect(first).toMatchObject({ env_id: "old-env", admin_authority: v3Config.admin_authority });
    expect(first.instance_id).toMatch(/^0x[0-9a-f]{32}$/);
    const sealed = await readSealedConfig(layout, sealingKey);
    expect(sealed).toEqual({
      config: { ...v3Config, v: 4, instance_id: first.instance_id },
      upgraded: false,
    });
    expect((await stat(layout.sealedConfig)).mode & 0o777).toBe(0o600);
    expect((await readdir(dataDir)).filter((name) => name.endsWith(".tmp"))).toEqual([]);
    // Sealed once: a restart keeps the id (a new one at every start would refuse the operator's
    // capabilities minted in between).
    expect((await identityAfterStart()).instance_id).toBe(first.instance_id);
  });

  it("refuses a v2 data folder (no recovery encryption key) and says how to re-initialise", async () => {
    // The shape an older `init` sealed: three authorities, no recovery encryption key.
    await mkdir(join(dataDir, "keys"), { recursive: true, mode: 0o700 });
    const sealingKey = generateSealingKey();
    const v2Config = {
      v: 2,
      env_id: "old-env",
      chain_id: CHAIN_ID,
      admin_authority: authorityPublicKey(randomAuthoritySecret()),
      policy_authority: authorityPublicKey(randomAuthoritySecret()),
      recovery_authority: authorityPublicKey(randomAuthoritySecret()),
      created_at: new Date().toISOString(),
    };
    await writeFile(join(dataDir, "sealing.key"), sealingKey, { mode: 0o600 });
    await writeFile(
      join(dataDir, "enclave.sealed"),
      seal(sealingKey, SEAL_LABEL.config, encodeCbor(v2Config)),
      {
        mode: 0o600,
      },
    );
    const started = startEnclaveServer({ socketPath, dataDir, logger });
    await expect(started).rejects.toBeInstanceOf(EnclaveStartError);
    await expect(started).rejects.toThrow(/initialised before the recovery encryption key existed/);
    await expect(started).rejects.toThrow(/npm run recovery-key -- --out FILE/);
    await expect(started).rejects.toThrow(/--recovery-enc-pubkey/);
    await expect(stat(socketPath)).rejects.toMatchObject({ code: "ENOENT" });
  });
});
