import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { privileged } from "../enclave/testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "../enclave/testing/raw-client.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../testing/enclave-process.ts";
import { startTestOrigin, type TestOrigin } from "../testing/origin.ts";

// The origin reads the sealed policy and shows it on /healthz, live per call.

const POLICY = {
  per_tx_limit_units: "10000000",
  daily_limit_units: "100000000",
  recipient_allowlist: ["0x1111111111111111111111111111111111111111"],
  x402_amount_units: "10000",
  x402_pay_to: "0x2222222222222222222222222222222222222222",
  x402_max_timeout_seconds: 180,
  operator_pool: "0x00000000000000000000000000000000000000aa",
  fee_ceiling_wei: "1000000000000000",
  x402_validity_margin_seconds: 6,
  x402_daily_limit: 1000,
  settler_daily_fee_units: "1000000000",
};

describe("GET /healthz: the enclave's sealed policy (real enclave, real Postgres)", () => {
  let testDb: TestDatabase;
  let enclave: EnclaveProcess;
  let origin: TestOrigin;

  const health = async (): Promise<Record<string, unknown>> => {
    const response = await fetch(`${origin.base}/healthz`);
    expect(response.status).toBe(200);
    return (await response.json()) as Record<string, unknown>;
  };

  beforeAll(async () => {
    testDb = await createTestDatabase();
    enclave = await startEnclaveProcess({ envId: "health-env" });
    const endpoint = `unix://${enclave.socketPath}`;
    origin = await startTestOrigin({
      database: testDb.handle,
      env: { AGENT_SIGNER_SVC_HSM_ENDPOINT: endpoint },
      // Reconnects soon once the last test stops the enclave.
      signerTimings: { backoff: { initialMs: 20, maxMs: 50 } },
    });
  });
  afterAll(async () => {
    await origin?.close();
    await enclave?.dispose();
    await testDb?.drop();
  });

  it("shows version 0 and no policy before the operator applies one", async () => {
    expect(await health()).toMatchObject({
      enclave: { configured: true, ok: true, policy_version: 0, policy: null, treasury: null },
    });
  });

  it("shows the policy the operator sealed with the policy key, on the next call", async () => {
    const { client } = await RawEnclaveClient.connect(enclave.socketPath);
    try {
      await privileged(client, enclave, "configure_policy", POLICY);
      const treasury = await privileged(client, enclave, "configure_treasury", {
        budget_units: "5000",
        payout_units: "1000",
        cooldown_ms: 60_000,
        daily_limit_units: "2000",
      });
      expect(expectOk(await client.request("get_policy", {}))).toMatchObject({ chain_id: CHAIN_ID });
      expect(await health()).toMatchObject({
        status: "degraded", // no chain in this test
        enclave: {
          configured: true,
          ok: true,
          policy_version: 1,
          policy: POLICY,
          treasury: {
            faucet_address: treasury.faucet_address,
            budget_units: "5000",
            spent_units: "0",
            payout_units: "1000",
            cooldown_ms: 60_000,
            daily_limit_units: "2000",
          },
        },
      });
    } finally {
      client.close();
    }
  });

  it("reports an enclave that stopped answering as not ok, still answering 200", async () => {
    await enclave.stop();
    const body = await health();
    expect(body).toMatchObject({
      status: "degraded",
      database: { ok: true },
      enclave: { configured: true, ok: false, policy_version: null, policy: null },
    });
    expect((body.enclave as { error: string }).error).toMatch(/^signer_/);
  });
});
