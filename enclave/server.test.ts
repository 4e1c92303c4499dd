import { chmod, mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { authorityPublicKey, randomAuthoritySecret } from "../shared/capability.ts";
import { encodeCbor } from "../shared/cbor-frame.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import { toHex } from "../shared/hex.ts";
import { randomX25519PrivateKey, x25519PublicKey } from "../shared/recovery-envelope.ts";
import { initEnclave } from "./init.ts";
import { generateSealingKey, SEAL_LABEL, seal } from "./sealing.ts";
import { EnclaveStartError, startEnclaveServer } from "./server.ts";
import { RawEnclaveClient } from "./testing/raw-client.ts";

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

  const init = () =>
    initEnclave({
      dataDir,
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

  it("refuses a sealing key readable by others", async () => {
    await init();
    await chmod(join(dataDir, "sealing.key"), 0o644);
    await expect(startEnclaveServer({ socketPath, dataDir, logger })).rejects.toThrow(/chmod 600/);
  });

  it("replaces a stale socket file, refuses a live one, and removes its socket on close", async () => {
    await init();
    await mkdir(join(dir, "run"));
    await writeFile(socketPath, "stale");
    const server = await startEnclaveServer({ socketPath, dataDir, logger });
    expect((await stat(socketPath)).isSocket()).toBe(true);
    await expect(startEnclaveServer({ socketPath, dataDir, logger })).rejects.toBeInstanceOf(
      EnclaveStartError,
    );
    const { client, serverHello } = await RawEnclaveClient.connect(socketPath);
    expect(serverHello).toMatchObject({ profile: "agent_gateway" });
    await server.close();
    await client.closed;
    await expect(stat(socketPath)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("refuses a v2 data folder (no recovery encryption key) and says how to re-initialise", async () => {
    // The shape `init` sealed before issue 15: three authorities, no recovery encryption key.
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
    await expect(started).rejects.toThrow(/scripts\/recovery-key\.ts --out FILE/);
    await expect(started).rejects.toThrow(/--recovery-enc-pubkey/);
    await expect(stat(socketPath)).rejects.toMatchObject({ code: "ENOENT" });
  });
});
