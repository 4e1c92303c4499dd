import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { privileged } from "../enclave/testing/capabilities.ts";
import { RawEnclaveClient } from "../enclave/testing/raw-client.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../testing/enclave-process.ts";
import {
  ensureLocalPolicy,
  LOCAL_FAUCET_TERMS,
  LOCAL_POLICY,
  LOCAL_TREASURY_BUDGET_UNITS,
  LOCAL_X402_PAY_TO,
  localPolicyPaying,
} from "./local-policy.ts";

// npm start applies the local policy with the policy key only when the
// sealed one differs, and a treasury only when none exists, so restarts change nothing.
describe("ensureLocalPolicy (real enclave process)", () => {
  let enclave: EnclaveProcess;
  let policyKeyFile: string;
  const lines: string[] = [];
  const ensure = () =>
    ensureLocalPolicy({ socketPath: enclave.socketPath, policyKeyFile, onLine: (line) => lines.push(line) });

  beforeAll(async () => {
    enclave = await startEnclaveProcess({ envId: "local-dev" });
    policyKeyFile = join(enclave.dir, "policy-authority.key");
    await writeFile(policyKeyFile, `0x${Buffer.from(enclave.policySecret).toString("hex")}\n`, {
      mode: 0o600,
    });
  });
  afterAll(async () => {
    await enclave?.dispose();
  });

  it("seals the local policy, paying the demo to the enclave's payee key, a treasury and the x402 settler on first start", async () => {
    const sealed = await ensure();
    const payee = sealed.payee?.payeeAddress;
    expect(payee).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(payee?.toLowerCase()).not.toBe(LOCAL_X402_PAY_TO.toLowerCase());
    expect(sealed).toMatchObject({
      policyVersion: 1,
      policy: localPolicyPaying(payee!),
      treasury: { budgetUnits: LOCAL_TREASURY_BUDGET_UNITS, spentUnits: 0n, terms: LOCAL_FAUCET_TERMS },
      settler: { settlerAddress: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/) },
    });
    expect(lines.map((line) => line.split(/\s+/)[0])).toEqual(["policy", "treasury", "settler"]);
  });

  it("changes nothing on a restart", async () => {
    const first = await ensure();
    const again = await ensure();
    expect(again).toEqual(first);
    expect(again.policyVersion).toBe(1);
    expect(lines).toHaveLength(3);
  });

  it("re-applies the local policy when the sealed one differs, keeping the treasury", async () => {
    const { client } = await RawEnclaveClient.connect(enclave.socketPath);
    try {
      await privileged(client, enclave, "configure_policy", {
        per_tx_limit_units: "1",
        daily_limit_units: "1",
        recipient_allowlist: null,
        x402_amount_units: null,
        x402_pay_to: null,
        x402_max_timeout_seconds: 60,
        operator_pool: LOCAL_POLICY.operatorPool,
        fee_ceiling_wei: "1",
        x402_validity_margin_seconds: 0,
        x402_daily_limit: 1,
        settler_daily_fee_units: "1000000000",
      });
    } finally {
      client.close();
    }
    const reapplied = await ensure();
    expect(reapplied).toMatchObject({
      policyVersion: 3,
      policy: localPolicyPaying(reapplied.payee!.payeeAddress),
    });
    expect(lines).toHaveLength(4);
  });
});
