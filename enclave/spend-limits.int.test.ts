import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID } from "../shared/constants.ts";
import type { EnclaveResponse } from "../shared/enclave-protocol.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// The enclave counts value plus the maximum fee (gas limit × max fee per gas, rounded up
// to whole units of 10^12 wei) against the per-transaction limit, the per-key daily limit and the
// faucet budget, and refuses any fee above the sealed ceiling (docs/enclave.md). Requests that
// arrive together are still counted one after another.

const OPERATOR_POOL = "0x00000000000000000000000000000000000000aa";
const RECIPIENT = "0x1111111111111111111111111111111111111111";

const POLICY = {
  per_tx_limit_units: "100",
  daily_limit_units: "150",
  recipient_allowlist: null,
  x402_amount_units: null,
  x402_pay_to: null,
  x402_max_timeout_seconds: 180,
  operator_pool: OPERATOR_POOL,
  fee_ceiling_wei: "20000000000000", // 20 units
  x402_validity_margin_seconds: 6,
  x402_daily_limit: 1000,
  settler_daily_fee_units: "1000000000",
};

/** A treasury whose payout is `payout`, with no cooldown and no per-recipient daily bound in the way. */
const treasuryOf = (budget: string, payout = "30"): Record<string, unknown> => ({
  budget_units: budget,
  payout_units: payout,
  cooldown_ms: 0,
  daily_limit_units: "1000000",
});

/** Gas fields whose maximum fee is the named amount (gas limit × max fee per gas). */
const FEE = {
  /** 25000 × 4e8 = 1e13 wei: exactly 10 units. */
  tenUnits: { gas_limit: "25000", max_fee_per_gas: "400000000", max_priority_fee_per_gas: "1" },
  /** 25000 × 8e8 = 2e13 wei: exactly 20 units, exactly the ceiling. */
  atCeiling: { gas_limit: "25000", max_fee_per_gas: "800000000", max_priority_fee_per_gas: "1" },
  /** 21000 × 952380953 = 20000000013000 wei: 13000 wei over the ceiling, 21 units. */
  overCeiling: { gas_limit: "21000", max_fee_per_gas: "952380953", max_priority_fee_per_gas: "1" },
  /** 21000 × 1 = 21000 wei: a tiny fraction of a unit, which counts as 1 unit. */
  oneWeiPerGas: { gas_limit: "21000", max_fee_per_gas: "1", max_priority_fee_per_gas: "1" },
} as const;

type Key = { key_ref: string; address: string };

const tx = (
  key: Key,
  valueUnits: string,
  fee: Record<string, string>,
  nonce = 0,
): Record<string, unknown> => ({
  key_ref: key.key_ref,
  from: key.address,
  chain_id: CHAIN_ID,
  to: RECIPIENT,
  value_units: valueUnits,
  nonce: String(nonce),
  ...fee,
});

const refused = (reason: string, detail: string): unknown => ({
  v: 1,
  id: expect.any(Number),
  ok: false,
  error: { code: "cap_exceeded", reason, detail },
});

const outcomes = (responses: EnclaveResponse[]): string[] =>
  responses.map((response) => (response.ok ? "signed" : (response.error.reason ?? response.error.code)));

describe("spend limits count value plus the maximum fee (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let keys: Key[];
  let faucetKey: Key;

  const treasurySpent = async (): Promise<string> =>
    (expectOk(await client.request("get_policy", {})).treasury as { spent_units: string }).spent_units;

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "spend-limits" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 5,
      batch_id: "spend-limits",
    });
    keys = batch.keys as Key[];
    await privileged(client, fixture, "configure_policy", POLICY);
    const treasury = await privileged(client, fixture, "configure_treasury", treasuryOf("1000"));
    faucetKey = { key_ref: treasury.faucet_key_ref as string, address: treasury.faucet_address as string };
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("refuses a zero-value sign_transfer whose maximum fee is over the ceiling, and signs one at the ceiling", async () => {
    // 21 units of fee fit the per-transaction limit of 100: only the ceiling refuses this.
    expect(await client.request("sign_transfer", tx(keys[0]!, "0", FEE.overCeiling))).toEqual(
      refused("fee above the policy ceiling", "fee_ceiling"),
    );
    expectOk(await client.request("sign_transfer", tx(keys[0]!, "0", FEE.atCeiling)));
  });

  it("refuses a zero-value sign_faucet whose maximum fee is over the ceiling, spending nothing of the budget", async () => {
    const payout = { ...tx(faucetKey, "0", FEE.overCeiling), to: keys[0]!.address };
    expect(await client.request("sign_faucet", payout)).toEqual(
      refused("fee above the policy ceiling", "fee_ceiling"),
    );
    expect(await treasurySpent()).toBe("0");
  });

  it("counts the maximum fee against the per-transaction limit", async () => {
    // 90 + 20 = 110 > 100, although the value alone fits; 80 + 20 = 100 is exactly the limit.
    expect(await client.request("sign_transfer", tx(keys[1]!, "90", FEE.atCeiling))).toEqual(
      refused("over the per-transaction limit", "per_transaction"),
    );
    expectOk(await client.request("sign_transfer", tx(keys[1]!, "80", FEE.atCeiling)));
  });

  it("stops a run of transfers exactly at the daily limit when value plus fee reaches it, counting a fraction of a unit as a unit", async () => {
    // Five values of 30 fit the daily limit of 150; with 20 units of fee each costs 50, so the run
    // stops after three, at exactly 150.
    const results: EnclaveResponse[] = [];
    for (let nonce = 0; nonce < 5; nonce++) {
      results.push(await client.request("sign_transfer", tx(keys[2]!, "30", FEE.atCeiling, nonce)));
    }
    expect(outcomes(results)).toEqual([
      "signed",
      "signed",
      "signed",
      "over the daily limit",
      "over the daily limit",
    ]);
    // At exactly 150, a zero-value transfer whose fee is 21000 wei still costs one unit.
    expect(await client.request("sign_transfer", tx(keys[2]!, "0", FEE.oneWeiPerGas, 3))).toEqual(
      refused("over the daily limit", "daily"),
    );
  });

  it("counts value plus the maximum fee against the faucet budget", async () => {
    await privileged(client, fixture, "configure_treasury", treasuryOf("150", "30"));
    const results: EnclaveResponse[] = [];
    for (let nonce = 0; nonce < 4; nonce++) {
      const payout = { ...tx(faucetKey, "30", FEE.atCeiling, nonce), to: keys[0]!.address };
      results.push(await client.request("sign_faucet", payout));
    }
    expect(outcomes(results)).toEqual(["signed", "signed", "signed", "over the faucet budget"]);
    expect(await treasurySpent()).toBe("150");
  });

  it("signs exactly three of five sign_transfer requests written at once against the daily limit", async () => {
    // Each costs 40 + 10 = 50 against 150: whatever the interleaving, three fit and two do not.
    const responses = await client.requestTogether(
      Array.from({ length: 5 }, (_, nonce) => ({
        op: "sign_transfer",
        params: tx(keys[3]!, "40", FEE.tenUnits, nonce),
      })),
    );
    expect(outcomes(responses).sort()).toEqual([
      "over the daily limit",
      "over the daily limit",
      "signed",
      "signed",
      "signed",
    ]);
  });

  it("signs exactly three of five sign_faucet requests written at once against the faucet budget", async () => {
    await privileged(client, fixture, "configure_treasury", treasuryOf("150", "40"));
    const responses = await client.requestTogether(
      Array.from({ length: 5 }, (_, nonce) => ({
        op: "sign_faucet",
        params: { ...tx(faucetKey, "40", FEE.tenUnits, nonce), to: keys[4]!.address },
      })),
    );
    expect(outcomes(responses).sort()).toEqual([
      "over the faucet budget",
      "over the faucet budget",
      "signed",
      "signed",
      "signed",
    ]);
    expect(await treasurySpent()).toBe("150");
  });
});
