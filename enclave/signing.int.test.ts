import {
  getAddress,
  keccak256,
  parseTransaction,
  recoverTransactionAddress,
  recoverTypedDataAddress,
} from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID, WEI_PER_UNIT } from "../shared/constants.ts";
import { nativeTransferAuthDomain, TRANSFER_WITH_AUTHORIZATION_TYPES } from "../shared/eip712.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

const OPERATOR_POOL = "0x00000000000000000000000000000000000000aa";
const RECIPIENT = "0x1111111111111111111111111111111111111111";
const PAY_TO = "0x2222222222222222222222222222222222222222";

type Key = { key_ref: string; public_key: string; address: string };

const policy = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  per_tx_limit_units: "100",
  daily_limit_units: "150",
  recipient_allowlist: null,
  x402_amount_units: "10000",
  x402_pay_to: PAY_TO,
  x402_max_timeout_seconds: 180,
  operator_pool: OPERATOR_POOL,
  fee_ceiling_wei: "10000000000000", // 10 units
  x402_validity_margin_seconds: 6,
  x402_daily_limit: 1000,
  settler_daily_fee_units: "1000000000",
  ...overrides,
});

/** The faucet's sealed payout terms (faucet-terms.int.test.ts attacks them). */
const TERMS = { payout_units: "600", cooldown_ms: 0, daily_limit_units: "100000" };

// Fee-free unless a test sets fees, so the value arithmetic below is exact; the limits' counting of
// value plus the maximum fee is covered in spend-limits.int.test.ts.
const transfer = (key: Key, overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  key_ref: key.key_ref,
  from: key.address,
  chain_id: CHAIN_ID,
  to: RECIPIENT,
  value_units: "10",
  nonce: "0",
  max_fee_per_gas: "0",
  max_priority_fee_per_gas: "0",
  gas_limit: "21000",
  ...overrides,
});

describe("signing under policy (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let agentKey: Key;
  let otherAgentKey: Key;
  /** Signs only in the key-binding test, so its daily spend shows what a refusal counted. */
  let boundKey: Key;
  let faucetKey: Key;

  beforeAll(async () => {
    fixture = await createEnclaveFixture();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 3,
      batch_id: "signing-batch",
    });
    [agentKey, otherAgentKey, boundKey] = batch.keys as [Key, Key, Key];
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  const treasurySpent = async (): Promise<unknown> =>
    (expectOk(await client.request("get_policy", {})).treasury as { spent_units: string }).spent_units;

  it("answers not_configured before a policy or treasury is sealed", async () => {
    expect(await client.request("sign_transfer", transfer(agentKey))).toMatchObject({
      ok: false,
      error: { code: "not_configured" },
    });
    const now = Math.floor(Date.now() / 1000);
    const x402 = {
      key_ref: agentKey.key_ref,
      from: agentKey.address,
      to: PAY_TO,
      value_units: "10000",
      valid_after: "0",
      valid_before: String(now + 60),
      nonce: `0x${"01".repeat(32)}`,
    };
    expect(await client.request("sign_x402_authorization", x402)).toMatchObject({
      error: { code: "not_configured" },
    });
  });

  it("configures the treasury, generating a faucet key", async () => {
    const treasury = await privileged(client, fixture, "configure_treasury", {
      budget_units: "1000",
      ...TERMS,
    });
    expect(treasury).toMatchObject({
      budget_units: "1000",
      ...TERMS,
      faucet_key_ref: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const identity = expectOk(await client.request("public_identity", { key_ref: treasury.faucet_key_ref }));
    expect(identity).toMatchObject({ namespace: "faucet", address: treasury.faucet_address });
    faucetKey = identity as Key;
  });

  it("refuses sign_faucet with not_configured while no policy is sealed, even with a treasury", async () => {
    const payout = transfer(faucetKey, { to: agentKey.address, value_units: "1" });
    expect(await client.request("sign_faucet", payout)).toEqual({
      v: 1,
      id: expect.any(Number),
      ok: false,
      error: { code: "not_configured", reason: "signing policy is not configured" },
    });
    expect(expectOk(await client.request("get_policy", {}))).toMatchObject({
      policy_version: 0,
      policy: null,
      treasury: { budget_units: "1000", spent_units: "0", ...TERMS },
    });
  });

  it("configures the policy", async () => {
    expect(await privileged(client, fixture, "configure_policy", policy())).toEqual(policy());
  });

  it("signs an EIP-1559 transfer that recovers to the key's address", async () => {
    // Maximum fee 21000 × 1000 wei = 2.1e7 wei, which counts as 1 unit (rounded up).
    const result = expectOk(
      await client.request(
        "sign_transfer",
        transfer(agentKey, {
          value_units: "25",
          nonce: "3",
          max_fee_per_gas: "1000",
          max_priority_fee_per_gas: "500",
        }),
      ),
    );
    const raw = result.raw_transaction as `0x02${string}`;
    expect(result.tx_hash).toBe(keccak256(raw));
    const tx = parseTransaction(raw);
    expect(tx).toMatchObject({
      type: "eip1559",
      chainId: CHAIN_ID,
      nonce: 3,
      to: RECIPIENT,
      value: 25n * WEI_PER_UNIT,
      gas: 21000n,
      maxFeePerGas: 1000n,
      maxPriorityFeePerGas: 500n,
    });
    // EIP-2: low-S only.
    expect(BigInt(tx.s!) <= 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n).toBe(true);
    expect((await recoverTransactionAddress({ serializedTransaction: raw })).toLowerCase()).toBe(
      agentKey.address.toLowerCase(),
    );
  });

  it("refuses a payout signed with a faucet-namespace key that is not the treasury's", async () => {
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "faucet",
      count: 1,
      batch_id: "other-faucet-key",
    });
    const [otherFaucetKey] = batch.keys as [Key];
    const spentBefore = await treasurySpent();
    expect(
      await client.request(
        "sign_faucet",
        transfer(otherFaucetKey, { to: agentKey.address, value_units: "1" }),
      ),
    ).toEqual({
      v: 1,
      id: expect.any(Number),
      ok: false,
      error: { code: "key_purpose_mismatch", reason: "key not usable for this operation" },
    });
    expect(await treasurySpent()).toBe(spentBefore);
  });

  it("refuses a faucet key for sign_transfer and an agent key for sign_faucet (no oracle for unknown keys)", async () => {
    const mismatch = {
      ok: false,
      error: { code: "key_purpose_mismatch", reason: "key not usable for this operation" },
    };
    expect(await client.request("sign_transfer", transfer(faucetKey))).toMatchObject(mismatch);
    expect(await client.request("sign_faucet", transfer(agentKey))).toMatchObject(mismatch);
    expect(
      await client.request("sign_transfer", transfer({ ...agentKey, key_ref: "ef".repeat(32) })),
    ).toMatchObject(mismatch);
  });

  it("refuses a transfer over the per-transaction limit with cap_exceeded", async () => {
    expect(
      await client.request("sign_transfer", transfer(otherAgentKey, { value_units: "101" })),
    ).toMatchObject({
      ok: false,
      error: { code: "cap_exceeded", reason: "over the per-transaction limit" },
    });
  });

  it("refuses fields that cannot form a valid transaction as malformed, reserving no spend", async () => {
    const checksummed = getAddress("0xabcdefabcdefabcdefabcdefabcdefabcdefabcd");
    const badChecksum = `0x${checksummed.slice(2, 3) === checksummed.slice(2, 3).toUpperCase() ? checksummed.slice(2, 3).toLowerCase() : checksummed.slice(2, 3).toUpperCase()}${checksummed.slice(3)}`;
    const malformed = [
      { max_fee_per_gas: "1", max_priority_fee_per_gas: "2" },
      { max_fee_per_gas: `2${"0".repeat(77)}` }, // above 2^256
      { gas_limit: "20999" },
      { to: badChecksum },
    ];
    for (const change of malformed) {
      expect(
        await client.request("sign_transfer", transfer(otherAgentKey, { value_units: "100", ...change })),
      ).toMatchObject({
        ok: false,
        error: { code: "malformed" },
      });
    }
    // Had any of those reserved 100 units, the daily limit of 150 would now refuse this one.
    expectOk(
      await client.request("sign_transfer", transfer(otherAgentKey, { value_units: "100", to: checksummed })),
    );
  });

  it("tracks the daily limit per key", async () => {
    // agentKey spent 25 + 1 (fee) above; 26 + 100 = 126 fits, then 126 + 30 > 150 does not.
    expectOk(await client.request("sign_transfer", transfer(agentKey, { value_units: "100" })));
    expect(await client.request("sign_transfer", transfer(agentKey, { value_units: "30" }))).toMatchObject({
      error: { code: "cap_exceeded", reason: "over the daily limit" },
    });
    // Another key has its own daily budget (otherAgentKey has spent 100 of 150).
    expectOk(await client.request("sign_transfer", transfer(otherAgentKey, { value_units: "30" })));
  });

  it("refuses the operator pool as recipient, another chain id, and an excessive gas limit", async () => {
    const refused = { ok: false, error: { code: "cap_exceeded" } };
    expect(
      await client.request("sign_transfer", transfer(otherAgentKey, { to: OPERATOR_POOL })),
    ).toMatchObject(refused);
    expect(await client.request("sign_transfer", transfer(otherAgentKey, { chain_id: 1 }))).toMatchObject(
      refused,
    );
    expect(
      await client.request("sign_transfer", transfer(otherAgentKey, { gas_limit: "10000000" })),
    ).toMatchObject(refused);
  });

  it("refuses a recipient outside the allowlist", async () => {
    await privileged(client, fixture, "configure_policy", policy({ recipient_allowlist: [PAY_TO] }));
    expect(await client.request("sign_transfer", transfer(otherAgentKey))).toMatchObject({
      error: { code: "cap_exceeded", reason: "recipient not allowed" },
    });
    expectOk(
      await client.request(
        "sign_transfer",
        transfer(otherAgentKey, { to: PAY_TO.toUpperCase().replace("0X", "0x") }),
      ),
    );
    await privileged(client, fixture, "configure_policy", policy());
  });

  it("matches a sealed allowlist whatever the case of the address: sealed checksummed, a transfer to it lowercase or checksummed signs, to another is refused", async () => {
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 1,
      batch_id: "allowlist-case",
    });
    const [key] = batch.keys as [Key];
    const checksummed = getAddress("0xabcdefabcdefabcdefabcdefabcdefabcdefabcd");
    expect(checksummed).not.toBe(checksummed.toLowerCase());
    await privileged(client, fixture, "configure_policy", policy({ recipient_allowlist: [checksummed] }));
    try {
      const outcome = async (to: string): Promise<unknown> => {
        const response = await client.request("sign_transfer", transfer(key, { to, value_units: "1" }));
        return response.ok ? "signed" : { code: response.error.code, detail: response.error.detail };
      };
      // Mutations: sealing the allowlist without lowercasing it refuses the lowercase transfer;
      // comparing the request's `to` without lowercasing it refuses the checksummed one.
      expect({
        lowercase: await outcome(checksummed.toLowerCase()),
        checksummed: await outcome(checksummed),
        another: await outcome(RECIPIENT),
      }).toEqual({
        lowercase: "signed",
        checksummed: "signed",
        another: { code: "cap_exceeded", detail: "recipient" },
      });
    } finally {
      await privileged(client, fixture, "configure_policy", policy());
    }
  });

  it("signs faucet payouts within the sealed budget only", async () => {
    const payout = transfer(faucetKey, { to: agentKey.address, value_units: "600" });
    const result = expectOk(await client.request("sign_faucet", payout));
    expect(
      (
        await recoverTransactionAddress({ serializedTransaction: result.raw_transaction as `0x02${string}` })
      ).toLowerCase(),
    ).toBe(faucetKey.address.toLowerCase());
    expect(await client.request("sign_faucet", payout)).toMatchObject({
      error: { code: "cap_exceeded", reason: "over the faucet budget" },
    });
  });

  it("signs an x402 authorization over the configured amount and payTo that recovers to the key", async () => {
    const now = Math.floor(Date.now() / 1000);
    const nonce = `0x${"ab".repeat(32)}` as const;
    const params = {
      key_ref: agentKey.key_ref,
      from: agentKey.address,
      to: PAY_TO,
      value_units: "10000",
      valid_after: "0",
      valid_before: String(now + 120),
      nonce,
    };
    const result = expectOk(await client.request("sign_x402_authorization", params));
    expect(result.authorization).toEqual({
      from: agentKey.address,
      to: PAY_TO,
      value: "10000",
      valid_after: "0",
      valid_before: String(now + 120),
      nonce,
    });
    const recovered = await recoverTypedDataAddress({
      domain: nativeTransferAuthDomain(),
      types: TRANSFER_WITH_AUTHORIZATION_TYPES,
      primaryType: "TransferWithAuthorization",
      message: {
        from: agentKey.address as `0x${string}`,
        to: PAY_TO,
        value: 10000n,
        validAfter: 0n,
        validBefore: BigInt(now + 120),
        nonce,
      },
      signature: result.signature as `0x${string}`,
    });
    expect(recovered.toLowerCase()).toBe(agentKey.address.toLowerCase());
  });

  it("refuses x402 amounts, payTo and validity outside policy", async () => {
    const now = Math.floor(Date.now() / 1000);
    const base = {
      key_ref: agentKey.key_ref,
      from: agentKey.address,
      to: PAY_TO,
      value_units: "10000",
      valid_after: "0",
      valid_before: String(now + 60),
      nonce: `0x${"cd".repeat(32)}`,
    };
    const cases = [
      { value_units: "10001" },
      { to: RECIPIENT },
      { valid_before: String(now + 600) },
      { valid_before: String(now - 1) },
    ];
    for (const change of cases) {
      expect(await client.request("sign_x402_authorization", { ...base, ...change })).toMatchObject({
        ok: false,
        error: { code: "cap_exceeded" },
      });
    }
    expect(
      await client.request("sign_x402_authorization", {
        ...base,
        key_ref: faucetKey.key_ref,
        from: faucetKey.address,
      }),
    ).toMatchObject({
      error: { code: "key_purpose_mismatch" },
    });
  });

  it("refuses sign_transfer, sign_x402_authorization and sign_faucet whose from is not the key's address, signing and counting nothing", async () => {
    const mismatch = {
      ok: false,
      error: {
        code: "key_purpose_mismatch",
        reason: "the key's address is not the given from",
        detail: "key_binding",
      },
    };
    // As a compromised origin would: an identity's wallet, and another key of the pool to sign with.
    expect(
      await client.request(
        "sign_transfer",
        transfer(boundKey, { from: agentKey.address, value_units: "100" }),
      ),
    ).toMatchObject(mismatch);
    const now = Math.floor(Date.now() / 1000);
    expect(
      await client.request("sign_x402_authorization", {
        key_ref: boundKey.key_ref,
        from: agentKey.address,
        to: PAY_TO,
        value_units: "10000",
        valid_after: "0",
        valid_before: String(now + 60),
        nonce: `0x${"ef".repeat(32)}`,
      }),
    ).toMatchObject(mismatch);
    // The faucet's from is the treasury: any other address is refused the same way.
    await privileged(client, fixture, "configure_treasury", { budget_units: "1000", ...TERMS });
    const spentBefore = await treasurySpent();
    expect(
      await client.request(
        "sign_faucet",
        transfer(faucetKey, { from: boundKey.address, to: agentKey.address, value_units: "600" }),
      ),
    ).toMatchObject(mismatch);
    expect(await treasurySpent()).toBe(spentBefore);
    // Nothing was counted against the key's day: 100 + 50 fill its daily limit of 150 exactly.
    expectOk(await client.request("sign_transfer", transfer(boundKey, { value_units: "100" })));
    expectOk(await client.request("sign_transfer", transfer(boundKey, { value_units: "50" })));
  });
});
