import { describe, expect, it } from "vitest";
import { loadConfig } from "../config.ts";
import { createDormantSignerClient } from "../signer/dormant-stub.ts";
import { checkMoney } from "./money-setup.ts";

// A node whose money switches lack the chain, the enclave or the
// operator pool refuses to start, naming the switches that need them. Nothing is read before these
// checks, so no database or enclave is involved.
describe("checkMoney's start-up refusals", () => {
  const refusals = async (env: Record<string, string>): Promise<string[]> => {
    const prepared = await checkMoney({
      config: loadConfig(env),
      signer: createDormantSignerClient(),
      rpc: undefined,
    });
    return prepared.ok ? [] : prepared.error;
  };

  it("names AGENT_X402_ENABLED when x402 alone is on", async () => {
    expect(
      await refusals({
        AGENT_X402_ENABLED: "true",
        AGENT_X402_AMOUNT: "10000",
        AGENT_X402_PAY_TO: "0x4020000000000000000000000000000000000402",
      }),
    ).toEqual([
      "CHAIN_RPC_URL: required when AGENT_X402_ENABLED is true",
      "AGENT_SIGNER_SVC_HSM_ENDPOINT: required when AGENT_X402_ENABLED is true",
      "AGENT_OPERATOR_POOL_ADDRESS: required when AGENT_X402_ENABLED is true",
    ]);
  });

  it("names every money switch that is on", async () => {
    const errors = await refusals({
      AGENT_FAUCET_ENABLED: "true",
      AGENT_TRANSFER_ENABLED: "true",
      AGENT_X402_ENABLED: "true",
      AGENT_X402_AMOUNT: "10000",
      AGENT_X402_PAY_TO: "0x4020000000000000000000000000000000000402",
    });
    expect(errors[0]).toBe(
      "CHAIN_RPC_URL: required when AGENT_FAUCET_ENABLED, AGENT_TRANSFER_ENABLED or AGENT_X402_ENABLED is true",
    );
  });
});
