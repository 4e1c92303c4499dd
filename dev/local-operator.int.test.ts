import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readOperatorKey } from "../ops/lib/operator-key.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import { toHex } from "../shared/hex.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../testing/enclave-process.ts";
import { ensureLocalOperatorKey } from "./local-operator.ts";

// npm start enrolls .data/operator.key at every start, with the local policy key, in the real enclave.
describe("the local stack's operator key (real enclave)", () => {
  let enclave: EnclaveProcess;
  let dir: string;
  beforeAll(async () => {
    enclave = await startEnclaveProcess({ envId: "local-operator" });
    dir = await mkdtemp(path.join(tmpdir(), "local-operator-"));
    await writeFile(path.join(dir, "policy-authority.key"), toHex(enclave.policySecret), { mode: 0o600 });
  });
  afterAll(async () => {
    await enclave.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  // Mutation: without moving the revoked file aside, the next start fails: its enroll is refused.
  it("is made and enrolled once; revoked, the next start moves its file aside and makes a new one, where it failed", async () => {
    const params = {
      socketPath: enclave.socketPath,
      policyKeyFile: path.join(dir, "policy-authority.key"),
      keyFile: path.join(dir, "operator.key"),
    };
    const first = await ensureLocalOperatorKey(params);
    expect(first).toMatchObject({ created: true });
    expect(await ensureLocalOperatorKey(params)).toEqual({ ...first, created: false });

    const signer = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    const authorize = createCapabilityMinter({
      authority: enclave.adminSecret,
      envId: enclave.envId,
      client: signer,
    });
    const revoked = await signer.revokeOperatorKey({ keyId: first.keyId }, authorize);
    await signer.close();
    expect(revoked.ok).toBe(true);

    const replaced = await ensureLocalOperatorKey(params);
    expect(replaced).toMatchObject({
      created: true,
      revokedMovedTo: expect.stringContaining("operator.key.revoked-"),
    });
    expect(replaced.keyId).not.toBe(first.keyId);
    expect((await readOperatorKey(replaced.revokedMovedTo!)).publicKey).toBe(
      revoked.ok && revoked.value.publicKey,
    );
    expect((await readdir(dir)).sort()).toEqual(
      ["operator.key", path.basename(replaced.revokedMovedTo!), "policy-authority.key"].sort(),
    );
  });
});
