import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { privileged } from "../../enclave/testing/capabilities.ts";
import { RawEnclaveClient } from "../../enclave/testing/raw-client.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../../testing/enclave-process.ts";
import { loadConfig } from "../config.ts";
import { createSignerClient } from "../signer/create-signer-client.ts";
import type { SignerClient } from "../signer/types.ts";
import { checkMoney, policyDifferences } from "./money-setup.ts";

// With a money switch on, the origin reads the real enclave's sealed policy and treasury and
// refuses to start when its own limits differ, one line per difference: the enclave enforces the
// sealed ones, so a node configured otherwise would promise agents what the signer refuses. The
// refusal comes before anything touches the database.
const POOL = "0x00000000000000000000000000000000000000aa";
const PAY_TO = "0x4020000000000000000000000000000000000402";

describe("checkMoney against the enclave's sealed policy", () => {
  let enclave: EnclaveProcess;
  let signer: SignerClient;

  beforeAll(async () => {
    enclave = await startEnclaveProcess({ envId: "money-setup" });
    const { client } = await RawEnclaveClient.connect(enclave.socketPath);
    await privileged(client, enclave, "configure_policy", {
      per_tx_limit_units: "5000000",
      daily_limit_units: "20000000",
      recipient_allowlist: null,
      x402_amount_units: "10000",
      x402_pay_to: PAY_TO,
      x402_max_timeout_seconds: 120,
      operator_pool: POOL,
      fee_ceiling_wei: "1000000000000000",
      x402_validity_margin_seconds: 10,
      x402_daily_limit: 500,
      settler_daily_fee_units: "1000000000",
    });
    await privileged(client, enclave, "configure_treasury", {
      budget_units: "1000000000",
      payout_units: "1000000",
      cooldown_ms: 60_000,
      daily_limit_units: "10000000",
    });
    client.close();
    signer = createSignerClient({ endpoint: `unix://${enclave.socketPath}`, liveIdentityEnabled: false });
  });
  afterAll(async () => {
    await signer?.close();
    await enclave?.dispose();
  });

  const config = (env: Record<string, string>) =>
    loadConfig({
      AGENT_ENV_ID: "money-setup",
      CHAIN_RPC_URL: "http://127.0.0.1:1",
      AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
      AGENT_OPERATOR_POOL_ADDRESS: POOL,
      ...env,
    });
  const refusals = async (env: Record<string, string>): Promise<string[]> => {
    const prepared = await checkMoney({
      config: config(env),
      signer,
      // Never called: the policy check comes first, and these refusals end it.
      rpc: { send: () => Promise.reject(new Error("not reached")), close: () => {} } as never,
    });
    return prepared.ok ? [] : prepared.error;
  };

  it("names each transfer limit that differs from the sealed one", async () => {
    expect(
      await refusals({
        AGENT_TRANSFER_ENABLED: "true",
        AGENT_TRANSFER_PER_TX_LIMIT: "5000001",
        AGENT_TRANSFER_DAILY_LIMIT: "10000000",
        AGENT_TRANSFER_RECIPIENT_ALLOWLIST: "0x1111111111111111111111111111111111111111",
      }),
    ).toEqual([
      "AGENT_TRANSFER_PER_TX_LIMIT is 5000001 but the enclave's sealed policy says 5000000",
      "AGENT_TRANSFER_DAILY_LIMIT is 10000000 but the enclave's sealed policy says 20000000",
      "AGENT_TRANSFER_RECIPIENT_ALLOWLIST is 0x1111111111111111111111111111111111111111 but the enclave's sealed policy says unset (any recipient)",
    ]);
  });

  it("names x402's amount, payee, validity bound, margin and daily count when they differ, and the missing settler", async () => {
    expect(
      await refusals({
        AGENT_X402_ENABLED: "true",
        AGENT_X402_AMOUNT: "20000",
        AGENT_X402_PAY_TO: "0x4020000000000000000000000000000000000403",
        AGENT_X402_MAX_TIMEOUT_SECONDS: "180",
        // The defaults (6 s, 1000 a day) against the sealed 10 s and 500.
      }),
    ).toEqual([
      "AGENT_X402_AMOUNT is 20000 but the enclave's sealed policy says 10000",
      "AGENT_X402_PAY_TO is 0x4020000000000000000000000000000000000403 but the enclave's sealed policy says 0x4020000000000000000000000000000000000402",
      "AGENT_X402_MAX_TIMEOUT_SECONDS is 180 but the enclave's sealed policy says 120",
      "AGENT_X402_VALIDITY_MARGIN_SECONDS is 6 but the enclave's sealed policy says 10",
      "AGENT_X402_DAILY_LIMIT is 1000, above the enclave's sealed policy's 500",
      "AGENT_X402_ENABLED is true but the enclave has no x402 settler key: `npm run enclave-policy -- settler --policy-key FILE`",
    ]);
  });

  it("names each faucet setting that differs from the sealed treasury's payout terms", async () => {
    expect(
      await refusals({
        AGENT_FAUCET_ENABLED: "true",
        AGENT_FAUCET_PAYOUT_AMOUNT: "50000000",
        AGENT_FAUCET_COOLDOWN_MS: "0",
        AGENT_FAUCET_DAILY_LIMIT: "1000000000",
      }),
    ).toEqual([
      "AGENT_FAUCET_PAYOUT_AMOUNT is 50000000 but the enclave's sealed treasury says 1000000",
      "AGENT_FAUCET_COOLDOWN_MS is 0 but the enclave's sealed treasury says 60000",
      "AGENT_FAUCET_DAILY_LIMIT is 1000000000 but the enclave's sealed treasury says 10000000",
    ]);
    const sealed = await signer.getPolicy();
    if (!sealed.ok) throw new Error(sealed.error.code);
    const same = config({
      AGENT_FAUCET_ENABLED: "true",
      AGENT_FAUCET_PAYOUT_AMOUNT: "1000000",
      AGENT_FAUCET_COOLDOWN_MS: "60000",
      AGENT_FAUCET_DAILY_LIMIT: "10000000",
    });
    expect(policyDifferences(same, sealed.value)).toEqual([]);
  });

  it("with x402's settings equal to the sealed ones, names only the missing settler", async () => {
    expect(
      await refusals({
        AGENT_X402_ENABLED: "true",
        AGENT_X402_AMOUNT: "10000",
        AGENT_X402_PAY_TO: PAY_TO,
        AGENT_X402_MAX_TIMEOUT_SECONDS: "120",
        AGENT_X402_VALIDITY_MARGIN_SECONDS: "10",
        // A lower count than the sealed one only answers sooner: not a difference.
        AGENT_X402_DAILY_LIMIT: "499",
      }),
    ).toEqual([
      "AGENT_X402_ENABLED is true but the enclave has no x402 settler key: `npm run enclave-policy -- settler --policy-key FILE`",
    ]);
  });
});
