import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { refillOnce } from "../origin/keypool/refill.ts";
import { updateRegistrationPolicy } from "../origin/registration/policy-repository.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import { HEADER_REGISTRATION } from "../shared/constants.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../testing/enclave-process.ts";
import { send } from "../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../testing/origin.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";

// `agent-wallet register` against a service with the proof of work on (docs/security.md, "Proof of
// work at registration"): the bin in its own process, through the edge (Miniflare) in front of the
// real origin, Postgres and keys the real enclave made. The agent runs the same command as on a
// service without it and gets the same output.

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
const EDGE_SECRET = randomBytes(32).toString("hex");
const BITS = 16;

/** `agent-wallet register`'s human output (cli/format.ts), proof of work or not. */
const HUMAN =
  /^token agt_[0-9a-f]{32}_[0-9a-f]{64}\n {2}\(shown once: store it now, e\.g\. export AGENT_TOKEN=\.\.\.; it cannot be recovered\)\nagent [0-9a-f-]{36}\nwallet 0x[0-9a-f]{40}\ncapabilities read, transfer\n$/;
/** The one line the CLI may add on stderr while a proof of work takes more than a moment. */
const PROGRESS =
  /^agent-wallet: registration asks for a proof of work \(\d+ bits\); solving it, about \d+ s on average on this machine…\n$/;

describe("agent-wallet register with the proof of work on (through the edge, real origin)", () => {
  let testDb: TestDatabase;
  let enclave: EnclaveProcess;
  let signer: SignerClient;
  let backupDir: string;
  let origin: TestOrigin;
  let edge: EdgeHandle;
  const base = (): string => `${edge.url}/77`;
  const agentWallet = (args: string[]): Promise<ToolRun> =>
    runTool(BIN, args, { env: { AGENT_BASE_URL: base() }, cleanEnv: true, timeoutMs: 120_000 });

  beforeAll(async () => {
    testDb = await createTestDatabase();
    enclave = await startEnclaveProcess({ envId: "register-proof" });
    signer = createSignerClient({ endpoint: `unix://${enclave.socketPath}`, liveIdentityEnabled: true });
    backupDir = await mkdtemp(path.join(tmpdir(), "register-proof-"));
    const made = await refillOnce(
      {
        db: testDb.handle.db,
        signer,
        authorize: createCapabilityMinter({
          authority: enclave.adminSecret,
          envId: enclave.envId,
          client: signer,
        }),
        backupDir,
        logger: pino({ level: "silent" }),
      },
      { target: 10, batchSize: 10 },
    );
    expect(made.every((outcome) => outcome.ok)).toBe(true);
    origin = await startTestOrigin({
      database: testDb.handle,
      env: {
        AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
        AGENT_SIGNER_LIVE_IDENTITY_ENABLED: "true",
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_REGISTRATION_ALLOW_LOOPBACK: "true",
        AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
        AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
        AGENT_REGISTRATION_POW_BITS: String(BITS),
      },
    });
    edge = await startTestEdge({ originUrl: origin.url, edgeSharedSecret: EDGE_SECRET, onLine: () => {} });
    await updateRegistrationPolicy(testDb.handle.db, {
      changes: { paused: false, keyReserve: 0 },
      reason: "cli proof of work test",
    });
  }, 180_000);
  afterAll(async () => {
    await edge?.stop();
    await origin?.close();
    await signer?.close();
    await enclave?.dispose();
    await testDb?.drop();
    if (backupDir) await rm(backupDir, { recursive: true, force: true });
  });

  // Mutation: register() throwing the 428 instead of solving it fails this: exit 15
  // (RegistrationUnavailable, registration_proof_required) and nothing on stdout.
  it("registers with the same command and prints the same output, human and --json", async () => {
    // The service does ask: a registration without a solution is answered 428 with a challenge.
    const asked = await send(`${base()}/agent/v1/register`, {
      method: "POST",
      headers: { [HEADER_REGISTRATION]: "1" },
      body: "{}",
    });
    expect(asked.status).toBe(428);
    expect(asked.body).toMatchObject({ error: { code: "registration_proof_required", bits: BITS } });

    const human = await agentWallet(["register"]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(HUMAN);
    expect(human.stderr === "" || PROGRESS.test(human.stderr), human.stderr).toBe(true);

    const json = await agentWallet(["register", "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const registered = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(Object.keys(registered).sort()).toEqual([
      "agent_id",
      "assigned_wallet",
      "capabilities",
      "chain_id",
      "token",
    ]);
    expect(registered).toMatchObject({ capabilities: ["read", "transfer"], chain_id: 77 });
    expect(json.stderr === "" || PROGRESS.test(json.stderr), json.stderr).toBe(true);
  }, 240_000);
});
