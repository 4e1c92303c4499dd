import { mkdir, mkdtemp, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows } from "../origin/db/client.ts";
import { provisionIdentity } from "../origin/keypool/provision.ts";
import { refillOnce } from "../origin/keypool/refill.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../testing/enclave-process.ts";
import { runTool } from "../testing/run-tool.ts";

type Run = { code: number; stdout: string };

describe("npm run canary (the live switch canary)", () => {
  let testDb: TestDatabase;
  let enclave: EnclaveProcess;
  let backupDir: string;

  const canary = async (env: Record<string, string> = {}): Promise<Run> => {
    const { code, stdout } = await runTool("ops/canary.ts", [], {
      env: {
        DATABASE_URL: testDb.url,
        AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
        AGENT_ENV_ID: "canary-env",
        ...env,
      },
    });
    return { code, stdout };
  };
  /** Every row the canary could have touched, as text: it must not change. */
  const snapshot = async () =>
    JSON.stringify(
      await queryRows(
        testDb.handle.db,
        sql`select (select json_agg(i) from agent_identities i) as identities,
                   (select count(*) from identity_findings) as findings,
                   (select json_agg(k order by key_ref) from key_pool k) as keys`,
      ),
    );

  beforeAll(async () => {
    testDb = await createTestDatabase();
    enclave = await startEnclaveProcess({ envId: "canary-env" });
    backupDir = await mkdtemp(path.join(tmpdir(), "canary-backups-"));
  });
  afterAll(async () => {
    await enclave?.dispose();
    await testDb?.drop();
    if (backupDir) await rm(backupDir, { recursive: true, force: true });
  });

  it("exits 1 when there is no key to probe", async () => {
    expect(await canary()).toEqual({
      code: 1,
      stdout: "canary: no candidate key to probe (fill the key pool first)\n",
    });
  });

  it("exits 0 when a key verifies and the configuration matches, writing nothing", async () => {
    const signer = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    const authorize = createCapabilityMinter({
      authority: enclave.adminSecret,
      envId: "canary-env",
      client: signer,
    });
    const logger = pino({ level: "silent" });
    await refillOnce(
      { db: testDb.handle.db, signer, authorize, backupDir, logger },
      { target: 2, batchSize: 2 },
    );
    await signer.close();
    // First a free key is the candidate, then an enabled identity's.
    let before = await snapshot();
    const fromFree = await canary();
    expect(fromFree.code).toBe(0);
    expect(fromFree.stdout).toMatch(
      /^canary: verified key [0-9a-f]{12}… \(0x[0-9a-f]{40}\) for env 'canary-env' chain 77: safe to switch\n$/,
    );
    expect(await snapshot()).toBe(before);

    await provisionIdentity(testDb.handle.db, { capabilities: ["read"], origin: "operator" });
    before = await snapshot();
    expect((await canary()).code).toBe(0);
    expect(await snapshot()).toBe(before);
  });

  it("defaults to the local stack's socket (.data/enclave.sock), as the other operator tools do", async () => {
    // A working folder of its own whose .data/enclave.sock is this test's enclave.
    const cwd = path.join(backupDir, "operator");
    await mkdir(path.join(cwd, ".data"), { recursive: true });
    await symlink(enclave.socketPath, path.join(cwd, ".data", "enclave.sock"));
    // runTool loads tsx by its path: this working folder has no node_modules.
    const run = await runTool("ops/canary.ts", [], {
      cwd,
      env: { AGENT_SIGNER_SVC_HSM_ENDPOINT: undefined, DATABASE_URL: testDb.url, AGENT_ENV_ID: "canary-env" },
    });
    expect(run.stderr).toBe("");
    expect(run).toMatchObject({ code: 0, stdout: expect.stringContaining("safe to switch") });
  });

  it("exits 64 on a usage or configuration error, never 2 (do not switch)", async () => {
    const invalid = await runTool("ops/canary.ts", [], {
      env: { DATABASE_URL: testDb.url, AGENT_ENV_ID: "Not An Env" },
    });
    expect(invalid.code).toBe(64);
    expect(invalid.stdout).toBe("");
    expect(invalid.stderr).toMatch(/^canary: invalid configuration:\n/);
    expect(invalid.stderr).toContain("  - AGENT_ENV_ID: ");
    expect(invalid.stderr).toContain("\nusage: npm run canary");
    const unknownFlag = (await runTool("ops/canary.ts", ["--socet", "x"])).code;
    expect(unknownFlag).toBe(64);
  });

  it("exits 2 on a configuration mismatch, a protocol error or an unreachable enclave", async () => {
    const before = await snapshot();
    const mismatch = await canary({ AGENT_ENV_ID: "prod-eu-1" });
    expect(mismatch.code).toBe(2);
    expect(mismatch.stdout).toContain(
      "the enclave is built for env 'canary-env' chain 77, this node is env 'prod-eu-1'",
    );

    const unreachable = await canary({
      AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${path.join(backupDir, "none.sock")}`,
    });
    expect(unreachable.code).toBe(2);
    expect(unreachable.stdout).toContain("canary: do not switch:");
    expect(unreachable.stdout).toContain("retryable signer_unreachable");
    // Where it looked and what to check, as the other operator tools say it.
    expect(unreachable.stdout).toContain(
      `at ${path.join(backupDir, "none.sock")}: is the stack started (npm start)? Another socket is --socket PATH or AGENT_SIGNER_SVC_HSM_ENDPOINT`,
    );

    await enclave.start({ profile: "bridge_operator" });
    try {
      const wrongProfile = await canary();
      expect(wrongProfile.code).toBe(2);
      expect(wrongProfile.stdout).toContain("terminal_wire");
    } finally {
      await enclave.start();
    }
    expect(await snapshot()).toBe(before);
  });
});
