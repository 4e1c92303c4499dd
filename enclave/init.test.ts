import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { authorityPublicKey, randomAuthoritySecret } from "../shared/capability.ts";
import { dataDirLayout } from "./data-dir.ts";
import { InitError, initEnclave } from "./init.ts";
import { readSealedConfig, readSealingKey } from "./sealed-config.ts";

describe("initEnclave", () => {
  let dir: string;
  const admin = authorityPublicKey(randomAuthoritySecret());
  const recovery = authorityPublicKey(randomAuthoritySecret());

  beforeEach(async () => {
    dir = join(await mkdtemp(join(tmpdir(), "enclave-init-")), "data");
  });
  afterEach(async () => {
    await rm(join(dir, ".."), { recursive: true, force: true });
  });

  it("creates a 0600 sealing key and seals env id, chain id 77 and both authorities beside it", async () => {
    await initEnclave({
      dataDir: dir,
      envId: "dev-1",
      adminAuthority: admin,
      recoveryAuthority: recovery.slice(2),
    });
    const layout = dataDirLayout(dir);
    expect((await stat(layout.sealingKey)).mode & 0o777).toBe(0o600);
    expect((await stat(layout.sealedConfig)).mode & 0o777).toBe(0o600);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    const config = await readSealedConfig(layout, await readSealingKey(layout));
    expect(config).toMatchObject({
      v: 1,
      env_id: "dev-1",
      chain_id: 77,
      admin_authority: admin,
      recovery_authority: recovery,
    });
    expect((await readdir(dir)).sort()).toEqual(["enclave.sealed", "keys", "sealing.key"]);
  });

  it("refuses to initialise twice, which would orphan every sealed key", async () => {
    await initEnclave({ dataDir: dir, envId: "dev-1", adminAuthority: admin, recoveryAuthority: recovery });
    await expect(
      initEnclave({ dataDir: dir, envId: "dev-1", adminAuthority: admin, recoveryAuthority: recovery }),
    ).rejects.toBeInstanceOf(InitError);
  });

  it("refuses a bad env id, a bad key and equal authorities", async () => {
    const base = { dataDir: dir, envId: "dev-1", adminAuthority: admin, recoveryAuthority: recovery };
    await expect(initEnclave({ ...base, envId: "Dev_1" })).rejects.toThrow(/env-id/);
    await expect(initEnclave({ ...base, adminAuthority: "0x1234" })).rejects.toThrow(/admin-pubkey/);
    await expect(initEnclave({ ...base, recoveryAuthority: admin })).rejects.toThrow(/differ/);
  });
});
