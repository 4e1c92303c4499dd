import type { Address, Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID } from "../shared/constants.ts";
import { nativeTransferAuthDomain, TRANSFER_WITH_AUTHORIZATION_TYPES } from "../shared/eip712.ts";
import type { EnclaveResponse } from "../shared/enclave-protocol.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { mintFor, privileged } from "./testing/capabilities.ts";
import { type ClockedEnclave, startClockedEnclave } from "./testing/clocked-enclave.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// The settler key pays gas and nothing else; before its sealed fee budget of the day, a
// compromised origin could burn its whole float with settlements and fillers, each under the fee
// ceiling. Now every settlement and settler filler counts its maximum fee against the budget the
// policy key sealed, and the origin host (the socket and the admin key) can neither pass it nor
// raise it (docs/enclave.md#the-settlers-fee-budget).

const PAY_TO: Address = "0x2222222222222222222222222222222222222222";
const AMOUNT = 10_000n;
const GWEI = 1_000_000_000n;
/**
 * 221 units: two settlements (100,000 gas × 1 gwei = 10^14 wei = 100 units each) and one filler
 * (21,000 gas × 1 gwei = 21 units) exactly.
 */
const BUDGET_UNITS = 221n;

const policy = (budgetUnits: bigint): Record<string, unknown> => ({
  per_tx_limit_units: "0",
  daily_limit_units: "0",
  recipient_allowlist: null,
  x402_amount_units: AMOUNT.toString(),
  x402_pay_to: PAY_TO,
  x402_max_timeout_seconds: 180,
  operator_pool: "0x00000000000000000000000000000000000000aa",
  fee_ceiling_wei: "1000000000000000",
  x402_validity_margin_seconds: 6,
  x402_daily_limit: 1000,
  settler_daily_fee_units: budgetUnits.toString(),
});

type Settler = { key_ref: string; address: Address };

/** What the origin would send: settlements of a payer's authorizations and fillers, over the socket. */
function settlerRequests(nowSeconds: () => bigint) {
  const payer = privateKeyToAccount(generatePrivateKey());
  let authorizations = 0;
  return {
    async settlement(
      settler: Settler,
      nonce: number,
      maxFeePerGas: bigint,
    ): Promise<Record<string, unknown>> {
      const message = {
        from: payer.address,
        to: PAY_TO,
        value: AMOUNT,
        validAfter: 0n,
        validBefore: nowSeconds() + 120n,
        nonce: `0x${(++authorizations).toString(16).padStart(64, "0")}` as Hex,
      };
      const signature = await payer.signTypedData({
        domain: nativeTransferAuthDomain(),
        types: TRANSFER_WITH_AUTHORIZATION_TYPES,
        primaryType: "TransferWithAuthorization",
        message,
      });
      return {
        key_ref: settler.key_ref,
        chain_id: CHAIN_ID,
        authorization: {
          from: message.from.toLowerCase(),
          to: message.to.toLowerCase(),
          value: message.value.toString(),
          valid_after: message.validAfter.toString(),
          valid_before: message.validBefore.toString(),
          nonce: message.nonce,
        },
        signature: signature.toLowerCase(),
        nonce: String(nonce),
        max_fee_per_gas: maxFeePerGas.toString(),
        max_priority_fee_per_gas: "1",
        gas_limit: "100000",
      };
    },
    filler(settler: Settler, nonce: number, maxFeePerGas: bigint): Record<string, unknown> {
      return {
        key_ref: settler.key_ref,
        from: settler.address,
        chain_id: CHAIN_ID,
        nonce: String(nonce),
        max_fee_per_gas: maxFeePerGas.toString(),
        max_priority_fee_per_gas: "1",
      };
    },
  };
}

const outcome = (response: EnclaveResponse) =>
  response.ok ? "signed" : { code: response.error.code, detail: response.error.detail };

describe("the settler's sealed fee budget, asked by the origin host (real process: the socket and the admin key)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let settler: Settler;
  const requests = settlerRequests(() => BigInt(Math.floor(Date.now() / 1000)));
  const spentToday = async (): Promise<unknown> =>
    (expectOk(await client.request("get_policy", {})).settler as { fee_spent_today_units: string })
      .fee_spent_today_units;

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "settler-budget" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    // The operator, with the policy key: the budget, and the settler key.
    await privileged(client, fixture, "configure_policy", policy(BUDGET_UNITS));
    const made = await privileged(client, fixture, "configure_settler", {});
    settler = { key_ref: made.settler_key_ref as string, address: made.settler_address as Address };
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("counts each settlement's and filler's maximum fee, and past the budget refuses fillers and settlements by name", async () => {
    expectOk(await client.request("sign_settlement", await requests.settlement(settler, 0, GWEI)));
    expectOk(await client.request("sign_settlement", await requests.settlement(settler, 1, GWEI)));
    // Mutation: not counting a settlement's fee shows 0 here (and signs the filler at 1 below).
    expect(await spentToday()).toBe("200");
    // The budget exactly: 200 + 21.
    expectOk(await client.request("sign_filler", requests.filler(settler, 0, GWEI)));
    expect(await spentToday()).toBe("221");
    // Mutation: not checking the settler's budget in sign_filler signs this one.
    expect(outcome(await client.request("sign_filler", requests.filler(settler, 1, GWEI)))).toEqual({
      code: "cap_exceeded",
      detail: "settler_fee_budget",
    });
    // One wei per gas: 10^5 wei, one unit rounded up, and still over.
    // Mutation: not checking the budget in sign_settlement signs this one.
    expect(
      outcome(await client.request("sign_settlement", await requests.settlement(settler, 2, 1n))),
    ).toEqual({
      code: "cap_exceeded",
      detail: "settler_fee_budget",
    });
    // The refusals counted nothing.
    expect(await spentToday()).toBe("221");
  });

  it("cannot be raised with the admin key the origin holds", async () => {
    const raised = policy(10n ** 18n);
    const cap = await mintFor(client, fixture, "configure_policy", raised, { secret: fixture.adminSecret });
    // Mutation: putting configure_policy in the admin tier accepts this and signs the filler below.
    expect(await client.request("configure_policy", raised, cap)).toMatchObject({
      ok: false,
      error: { code: "capability_rejected" },
    });
    expect(expectOk(await client.request("get_policy", {})).policy).toMatchObject({
      settler_daily_fee_units: BUDGET_UNITS.toString(),
    });
    expect(outcome(await client.request("sign_filler", requests.filler(settler, 1, GWEI)))).toEqual({
      code: "cap_exceeded",
      detail: "settler_fee_budget",
    });
  });

  it("is not escaped with another settler key the admin key makes: only the sealed settler signs settlements", async () => {
    // The budget is counted per key, so a fresh key of the settler namespace (generate_keys is the
    // admin tier the origin holds) would start the day at nothing spent.
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "settler",
      count: 1,
      batch_id: "settler-budget-second-settler",
    });
    const [made] = batch.keys as [{ key_ref: string; address: Address }];
    const other: Settler = { key_ref: made.key_ref, address: made.address };
    // Mutation: accepting any settler-namespace key (not only the sealed settler) signs this.
    expect(await client.request("sign_settlement", await requests.settlement(other, 0, GWEI))).toMatchObject({
      ok: false,
      error: { code: "key_purpose_mismatch", reason: "key not usable for this operation" },
    });
    // The sealed settler is still past its budget.
    expect(
      outcome(await client.request("sign_settlement", await requests.settlement(settler, 2, GWEI))),
    ).toEqual({ code: "cap_exceeded", detail: "settler_fee_budget" });
  });
});

describe("the settler's fee budget under settlements written at once (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let settler: Settler;
  const requests = settlerRequests(() => BigInt(Math.floor(Date.now() / 1000)));

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "settler-budget-race" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    await privileged(client, fixture, "configure_policy", policy(BUDGET_UNITS));
    const made = await privileged(client, fixture, "configure_settler", {});
    settler = { key_ref: made.settler_key_ref as string, address: made.settler_address as Address };
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("signs exactly two of five settlements written at once against a budget of two, whatever the interleaving", async () => {
    const sent = await Promise.all(
      Array.from({ length: 5 }, async (_, nonce) => ({
        op: "sign_settlement",
        params: await requests.settlement(settler, nonce, GWEI),
      })),
    );
    const responses = await client.requestTogether(sent);
    // Mutation: an await between sign_settlement's budget check and its reservation signs all five.
    expect(responses.filter((response) => response.ok)).toHaveLength(2);
    expect(responses.filter((response) => !response.ok).map(outcome)).toEqual(
      Array(3).fill({ code: "cap_exceeded", detail: "settler_fee_budget" }),
    );
    expect(
      (expectOk(await client.request("get_policy", {})).settler as { fee_spent_today_units: string })
        .fee_spent_today_units,
    ).toBe("200");
  });
});

describe("the settler's fee budget per UTC day (the enclave's server, the test's clock)", () => {
  let enclave: ClockedEnclave;
  let client: RawEnclaveClient;
  let settler: Settler;
  const requests = settlerRequests(() => BigInt(Math.floor(enclave.clock.now().getTime() / 1000)));

  beforeAll(async () => {
    enclave = await startClockedEnclave({ envId: "settler-day", at: new Date("2031-03-04T23:50:00Z") });
    ({ client } = await RawEnclaveClient.connect(enclave.fixture.socketPath));
    await privileged(client, enclave.fixture, "configure_policy", policy(BUDGET_UNITS));
    const made = await privileged(client, enclave.fixture, "configure_settler", {});
    settler = { key_ref: made.settler_key_ref as string, address: made.settler_address as Address };
  });
  afterAll(async () => {
    client?.close();
    await enclave?.close();
  });

  it("keeps what was spent across a restart, and starts again at the next UTC day", async () => {
    expectOk(await client.request("sign_settlement", await requests.settlement(settler, 0, GWEI)));
    expectOk(await client.request("sign_settlement", await requests.settlement(settler, 1, GWEI)));
    await enclave.restart();
    client.close();
    ({ client } = await RawEnclaveClient.connect(enclave.fixture.socketPath));
    // 200 of 221 before the restart: a third settlement (100) does not fit.
    // Mutation: writing no daily spend into the sealed state signs this after the restart.
    expect(
      outcome(await client.request("sign_settlement", await requests.settlement(settler, 2, GWEI))),
    ).toEqual({
      code: "cap_exceeded",
      detail: "settler_fee_budget",
    });
    enclave.clock.set(new Date("2031-03-05T00:00:00Z"));
    expectOk(await client.request("sign_settlement", await requests.settlement(settler, 2, GWEI)));
    expectOk(await client.request("sign_settlement", await requests.settlement(settler, 3, GWEI)));
    expect(
      outcome(await client.request("sign_settlement", await requests.settlement(settler, 4, GWEI))),
    ).toEqual({
      code: "cap_exceeded",
      detail: "settler_fee_budget",
    });
  });
});
