import { keccak256, parseTransaction, recoverTransactionAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID } from "../shared/constants.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// sign_filler against the real enclave process: a zero-value transfer from a key's address to
// itself at a given nonce, gas 21000, so a nonce the chain refused can be used up. A compromised
// origin gains nothing from it: it moves nothing, its fee is under the sealed ceiling and counted
// as the key's other fees are, and only the keys that send the service's transactions sign it.

type Key = { key_ref: string; public_key: string; address: string };

const policy = {
  per_tx_limit_units: "100",
  daily_limit_units: "3",
  recipient_allowlist: null,
  x402_amount_units: null,
  x402_pay_to: null,
  x402_max_timeout_seconds: 180,
  operator_pool: "0x00000000000000000000000000000000000000aa",
  // 21000 gas × 10^8 wei = 2.1e12 wei: a filler at that price costs 3 units (rounded up).
  fee_ceiling_wei: "2100000000000",
  x402_validity_margin_seconds: 6,
  x402_daily_limit: 1000,
};

describe("sign_filler (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let agentKey: Key;
  let otherAgentKey: Key;
  let treasury: { faucet_key_ref: string; faucet_address: string };

  beforeAll(async () => {
    fixture = await createEnclaveFixture();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 2,
      batch_id: "filler-batch",
    });
    [agentKey, otherAgentKey] = batch.keys as [Key, Key];
    await privileged(client, fixture, "configure_policy", policy);
    treasury = (await privileged(client, fixture, "configure_treasury", {
      budget_units: "1000",
      payout_units: "600",
      cooldown_ms: 0,
      daily_limit_units: "100000",
    })) as typeof treasury;
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  const filler = (key: { key_ref: string; address: string }, overrides: Record<string, unknown> = {}) => ({
    key_ref: key.key_ref,
    from: key.address,
    chain_id: CHAIN_ID,
    nonce: "7",
    max_fee_per_gas: "1000",
    max_priority_fee_per_gas: "1000",
    ...overrides,
  });

  it("signs a transfer of nothing to the key's own address at the nonce named, gas 21000", async () => {
    const result = expectOk(await client.request("sign_filler", filler(agentKey)));
    const raw = result.raw_transaction as `0x02${string}`;
    expect(result.tx_hash).toBe(keccak256(raw));
    // Mutation: a filler to any other address, or of any value, fails this.
    expect(parseTransaction(raw)).toMatchObject({
      type: "eip1559",
      chainId: CHAIN_ID,
      nonce: 7,
      to: agentKey.address.toLowerCase(),
      gas: 21_000n,
      maxFeePerGas: 1000n,
    });
    expect(parseTransaction(raw).value ?? 0n).toBe(0n);
    expect(parseTransaction(raw).data).toBeUndefined();
    expect((await recoverTransactionAddress({ serializedTransaction: raw })).toLowerCase()).toBe(
      agentKey.address.toLowerCase(),
    );
  });

  it("refuses a fee above the sealed ceiling", async () => {
    // Mutation: dropping the ceiling check signs this.
    expect(
      await client.request("sign_filler", filler(agentKey, { max_fee_per_gas: "100000001" })),
    ).toMatchObject({ ok: false, error: { code: "cap_exceeded", detail: "fee_ceiling" } });
  });

  it("counts an agent key's filler fee against its daily limit", async () => {
    // 3 units a filler at the ceiling's price; the daily limit is 3 units.
    expect(
      (await client.request("sign_filler", filler(otherAgentKey, { max_fee_per_gas: "100000000" }))).ok,
    ).toBe(true);
    // Mutation: not reserving the fee against the day's spend signs this second one.
    expect(
      await client.request(
        "sign_filler",
        filler(otherAgentKey, { nonce: "8", max_fee_per_gas: "100000000" }),
      ),
    ).toMatchObject({ ok: false, error: { code: "cap_exceeded", detail: "daily" } });
  });

  it("counts the treasury's filler fee against its budget", async () => {
    const spent = async () =>
      (expectOk(await client.request("get_policy", {})).treasury as { spent_units: string }).spent_units;
    const before = BigInt(await spent());
    const key = { key_ref: treasury.faucet_key_ref, address: treasury.faucet_address };
    expect((await client.request("sign_filler", filler(key, { max_fee_per_gas: "100000000" }))).ok).toBe(
      true,
    );
    expect(BigInt(await spent())).toBe(before + 3n);
  });

  it("refuses a key whose address is not `from`, and a key of no sending purpose", async () => {
    expect(
      await client.request(
        "sign_filler",
        filler({ key_ref: agentKey.key_ref, address: otherAgentKey.address }),
      ),
    ).toMatchObject({ ok: false, error: { code: "key_purpose_mismatch", detail: "key_binding" } });
    const bridge = await privileged(client, fixture, "generate_keys", {
      namespace: "bridge-operator",
      count: 1,
      batch_id: "filler-bridge",
    });
    const [bridgeKey] = bridge.keys as [Key];
    // Mutation: accepting any namespace signs this.
    expect(await client.request("sign_filler", filler(bridgeKey))).toMatchObject({
      ok: false,
      error: { code: "key_purpose_mismatch", reason: "key not usable for this operation" },
    });
  });
});
