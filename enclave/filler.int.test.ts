import { keccak256, parseTransaction, recoverTransactionAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID } from "../shared/constants.ts";
import type { EnclaveResponse } from "../shared/enclave-protocol.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// sign_filler against the real enclave process: a zero-value transfer from a key's address to
// itself at a nonce a transaction of that key was signed at, gas 21000, so a nonce the chain
// refused or left stuck can be used up. A compromised origin gains nothing from it: it moves
// nothing, its fee is under the sealed ceiling and counted as the key's other fees are, only the
// keys that send the service's transactions sign it, and at most one per nonce of ours
// (docs/enclave.md#fillers-and-the-nonce-record).

const RECIPIENT = "0x1111111111111111111111111111111111111111";

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
  settler_daily_fee_units: "1000000000",
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
      budget_units: "10000",
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

  /** A transfer of nothing, fee-free, so it counts 0 units: the transaction a filler may replace. */
  const signTransferAt = async (key: Key, nonce: string): Promise<void> => {
    expectOk(
      await client.request("sign_transfer", {
        key_ref: key.key_ref,
        from: key.address,
        chain_id: CHAIN_ID,
        to: RECIPIENT,
        value_units: "0",
        nonce,
        max_fee_per_gas: "0",
        max_priority_fee_per_gas: "0",
        gas_limit: "21000",
      }),
    );
  };
  /** The treasury's sealed payout (600 units, fee-free) to an agent key, at `nonce`. */
  const signPayoutAt = async (nonce: string): Promise<void> => {
    expectOk(
      await client.request("sign_faucet", {
        key_ref: treasury.faucet_key_ref,
        from: treasury.faucet_address,
        chain_id: CHAIN_ID,
        to: agentKey.address,
        value_units: "600",
        nonce,
        max_fee_per_gas: "0",
        max_priority_fee_per_gas: "0",
        gas_limit: "21000",
      }),
    );
  };
  const refusal = (response: EnclaveResponse) =>
    response.ok ? "signed" : { code: response.error.code, detail: response.error.detail };

  it("signs a transfer of nothing to the key's own address at the nonce named, gas 21000", async () => {
    await signTransferAt(agentKey, "7");
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
    await signTransferAt(agentKey, "8");
    // Mutation: dropping the ceiling check signs this.
    expect(
      await client.request("sign_filler", filler(agentKey, { nonce: "8", max_fee_per_gas: "100000001" })),
    ).toMatchObject({ ok: false, error: { code: "cap_exceeded", detail: "fee_ceiling" } });
  });

  it("counts an agent key's filler fee against its daily limit", async () => {
    await signTransferAt(otherAgentKey, "7");
    await signTransferAt(otherAgentKey, "8");
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
    await signPayoutAt("7");
    const before = BigInt(await spent());
    const key = { key_ref: treasury.faucet_key_ref, address: treasury.faucet_address };
    expect((await client.request("sign_filler", filler(key, { max_fee_per_gas: "100000000" }))).ok).toBe(
      true,
    );
    expect(BigInt(await spent())).toBe(before + 3n);
  });

  it("refuses the treasury's filler whose fee would pass its budget, by name, counting nothing", async () => {
    const spent = async () =>
      (expectOk(await client.request("get_policy", {})).treasury as { spent_units: string }).spent_units;
    const key = { key_ref: treasury.faucet_key_ref, address: treasury.faucet_address };
    await signPayoutAt("40");
    await signPayoutAt("41");
    // The policy key seals a budget of 3 units (a new treasury record starts at nothing spent):
    // one filler at the ceiling's price.
    const terms = { payout_units: "600", cooldown_ms: 0, daily_limit_units: "100000" };
    await privileged(client, fixture, "configure_treasury", { budget_units: "3", ...terms });
    try {
      expectOk(
        await client.request("sign_filler", filler(key, { nonce: "40", max_fee_per_gas: "100000000" })),
      );
      // Mutation: not checking the faucet budget in sign_filler signs this second one.
      expect(
        refusal(
          await client.request("sign_filler", filler(key, { nonce: "41", max_fee_per_gas: "100000000" })),
        ),
      ).toEqual({ code: "cap_exceeded", detail: "faucet_budget" });
      expect(await spent()).toBe("3");
    } finally {
      await privileged(client, fixture, "configure_treasury", { budget_units: "10000", ...terms });
    }
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
  it("refuses a filler at a nonce no transaction of the key was signed at, whatever the key, signing and counting nothing", async () => {
    const spent = async () =>
      (expectOk(await client.request("get_policy", {})).treasury as { spent_units: string }).spent_units;
    const before = await spent();
    const treasuryKey = { key_ref: treasury.faucet_key_ref, address: treasury.faucet_address };
    // agentKey signed at 7 and 8 above, the treasury at 7: the nonces around them hold nothing of ours.
    const cases: Array<[string, Key | typeof treasuryKey, string]> = [
      ["an agent key, the next nonce", agentKey, "9"],
      ["an agent key, below its first", agentKey, "6"],
      ["an agent key far ahead", agentKey, "1000000"],
      ["the treasury, a nonce it never paid at", treasuryKey, "8"],
    ];
    const answers: Array<[string, unknown]> = [];
    for (const [name, key, nonce] of cases) {
      answers.push([name, refusal(await client.request("sign_filler", filler(key, { nonce })))]);
    }
    // Mutation: dropping the nonce record's check in sign_filler signs every one of these.
    expect(answers).toEqual(cases.map(([name]) => [name, { code: "cap_exceeded", detail: "filler_nonce" }]));
    expect(await spent()).toBe(before);
  });

  it("signs one filler at a nonce a transaction was signed at, and refuses a second, also after a kill and a restart", async () => {
    await signTransferAt(agentKey, "20");
    expectOk(await client.request("sign_filler", filler(agentKey, { nonce: "20" })));
    // Mutation: not recording the filler (or not refusing a recorded one) signs this second one.
    expect(refusal(await client.request("sign_filler", filler(agentKey, { nonce: "20" })))).toEqual({
      code: "cap_exceeded",
      detail: "filler_repeat",
    });
    await signTransferAt(agentKey, "21");
    // No shutdown of its own: what the enclave answered before must already be on disk.
    await fixture.kill();
    await fixture.start();
    client.close();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    // Mutation: persisting no nonce record refuses 21 (filler_nonce) and signs a second at 20.
    expect(refusal(await client.request("sign_filler", filler(agentKey, { nonce: "20" })))).toEqual({
      code: "cap_exceeded",
      detail: "filler_repeat",
    });
    expectOk(await client.request("sign_filler", filler(agentKey, { nonce: "21" })));
  });

  it("signs one of five fillers at one nonce written at once, and refuses the other four filler_repeat", async () => {
    await signTransferAt(otherAgentKey, "60");
    const free = { nonce: "60", max_fee_per_gas: "0", max_priority_fee_per_gas: "0" };
    const responses = await client.requestTogether(
      Array.from({ length: 5 }, () => ({ op: "sign_filler", params: filler(otherAgentKey, free) })),
    );
    // Mutation: an await between sign_filler's nonce check and its record signs more than one.
    expect(responses.map(refusal)).toEqual(
      expect.arrayContaining(["signed", ...Array(4).fill({ code: "cap_exceeded", detail: "filler_repeat" })]),
    );
    expect(responses.filter((response) => response.ok)).toHaveLength(1);
  });

  it("refuses sign_filler from a faucet-namespace key that is not the sealed treasury's, even at a nonce it signed", async () => {
    // The treasury's key pays at a nonce, then the policy key points the treasury at another one.
    const former = { key_ref: treasury.faucet_key_ref, address: treasury.faucet_address };
    await signPayoutAt("30");
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "faucet",
      count: 1,
      batch_id: "filler-next-treasury",
    });
    const [next] = batch.keys as [Key];
    await privileged(client, fixture, "configure_treasury", {
      faucet_key_ref: next.key_ref,
      budget_units: "1000",
      payout_units: "600",
      cooldown_ms: 0,
      daily_limit_units: "100000",
    });
    // Mutation: accepting any faucet-namespace key (not only the treasury's) signs this.
    expect(await client.request("sign_filler", filler(former, { nonce: "30" }))).toMatchObject({
      ok: false,
      error: { code: "key_purpose_mismatch", reason: "key not usable for this operation" },
    });
  });
});
