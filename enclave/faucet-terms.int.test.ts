import type { Address } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID } from "../shared/constants.ts";
import type { EnclaveResponse } from "../shared/enclave-protocol.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { privileged } from "./testing/capabilities.ts";
import { type ClockedEnclave, startClockedEnclave } from "./testing/clocked-enclave.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// A compromised origin asks sign_faucet for what it likes, straight over the socket: the enclave
// pays only the sealed payout, only to one of its own agent keys, once per sealed cooldown and
// within the sealed units of the recipient's UTC day (docs/security.md: a compromised origin cannot redirect
// the faucet). Time passing (a cooldown run out, the next UTC day) needs the test's clock
// (testing/clocked-enclave.ts); everything else runs against the real process.

const PAYOUT = "100";
const COOLDOWN_MS = 60_000;
/** Two payouts a day, not three. */
const DAILY_UNITS = "250";
const START = new Date("2031-03-04T10:00:00Z");

type Key = { key_ref: string; address: Address };

const POLICY = {
  per_tx_limit_units: "0",
  daily_limit_units: "0",
  recipient_allowlist: null,
  x402_amount_units: null,
  x402_pay_to: null,
  x402_max_timeout_seconds: 180,
  operator_pool: "0x00000000000000000000000000000000000000aa",
  fee_ceiling_wei: "1000000000000000",
  x402_validity_margin_seconds: 6,
  x402_daily_limit: 1000,
  settler_daily_fee_units: "1000000000",
};
const TERMS = { payout_units: PAYOUT, cooldown_ms: COOLDOWN_MS, daily_limit_units: DAILY_UNITS };

const refused = (response: EnclaveResponse) =>
  response.ok ? "signed" : { code: response.error.code, detail: response.error.detail };

/** A client with the treasury's payout request, every field the test does not name as a payout. */
function faucetCalls(client: () => RawEnclaveClient, treasury: () => Key) {
  let nonce = 0;
  return {
    payout: (to: string, change: Record<string, unknown> = {}): Promise<EnclaveResponse> =>
      client().request("sign_faucet", {
        key_ref: treasury().key_ref,
        from: treasury().address,
        chain_id: CHAIN_ID,
        to,
        value_units: PAYOUT,
        nonce: String(nonce++),
        max_fee_per_gas: "0",
        max_priority_fee_per_gas: "0",
        gas_limit: "21000",
        ...change,
      }),
    spent: async (): Promise<string> =>
      (expectOk(await client().request("get_policy", {})).treasury as { spent_units: string }).spent_units,
  };
}

/** Seals the policy, three agent keys and a treasury with TERMS and a budget far above a payout. */
async function setUp(
  client: RawEnclaveClient,
  fixture: EnclaveFixture,
): Promise<{ treasury: Key; agents: Key[] }> {
  await privileged(client, fixture, "configure_policy", POLICY);
  const batch = await privileged(client, fixture, "generate_keys", {
    namespace: "agent-transfer",
    count: 3,
    batch_id: "faucet-agents",
  });
  // The attacker's budget of choice: far more than any payout, as the review found.
  const configured = await privileged(client, fixture, "configure_treasury", {
    budget_units: "1000000000",
    ...TERMS,
  });
  return {
    treasury: { key_ref: configured.faucet_key_ref as string, address: configured.faucet_address as Address },
    agents: batch.keys as Key[],
  };
}

describe("sign_faucet pays only the sealed payout to agent keys, once per cooldown, within the day (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let treasury: Key;
  let agents: Key[];
  const { payout, spent } = faucetCalls(
    () => client,
    () => treasury,
  );

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "faucet-terms" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    ({ treasury, agents } = await setUp(client, fixture));
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("shows the sealed terms in get_policy", async () => {
    expect(expectOk(await client.request("get_policy", {})).treasury).toMatchObject({
      budget_units: "1000000000",
      ...TERMS,
    });
  });

  it("refuses a payout to an address of the attacker's choosing, and to the treasury's own address", async () => {
    const foreign = "0x00000000000000000000000000000000000bad01";
    expect(refused(await payout(foreign))).toEqual({ code: "cap_exceeded", detail: "faucet_recipient" });
    expect(refused(await payout(treasury.address))).toEqual({
      code: "cap_exceeded",
      detail: "faucet_recipient",
    });
    expect(await spent()).toBe("0");
  });

  it("refuses any other amount than the sealed payout, a larger one or a smaller one", async () => {
    // No cooldown and no day's bound in the way here: only the sealed payout can refuse these.
    const open = { budget_units: "1000000000", ...TERMS, cooldown_ms: 0, daily_limit_units: "1000000000" };
    await privileged(client, fixture, "configure_treasury", open);
    const values = ["50000000", "949000000", "101", "99", "0"];
    const answers: Array<[string, unknown]> = [];
    for (const value of values) {
      answers.push([value, refused(await payout(agents[0]!.address, { value_units: value }))]);
    }
    expect(answers).toEqual(
      values.map((value) => [value, { code: "cap_exceeded", detail: "faucet_payout" }]),
    );
    expect(await spent()).toBe("0");
    await privileged(client, fixture, "configure_treasury", { budget_units: "1000000000", ...TERMS });
  });

  it("pays the sealed payout to an agent key, then refuses a second payout to it within the cooldown", async () => {
    expectOk(await payout(agents[0]!.address));
    expect(refused(await payout(agents[0]!.address))).toEqual({
      code: "cap_exceeded",
      detail: "faucet_cooldown",
    });
    // Another agent key has a cooldown of its own.
    expectOk(await payout(agents[1]!.address));
    expect(await spent()).toBe("200");
  });

  it("signs a recipient's last payout again at its own nonce (its answer never stored), and nothing more: at another nonce it is still within the cooldown", async () => {
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 1,
      batch_id: "faucet-again",
    });
    const [agent] = batch.keys as Key[];
    const before = BigInt(await spent());
    expectOk(await payout(agent!.address, { nonce: "900000" }));
    // Mutation: checking the cooldown whatever the nonce refuses this faucet_cooldown. One of the
    // two can be mined, at the treasury's nonce 900000; the budget counts both.
    expectOk(await payout(agent!.address, { nonce: "900000" }));
    expect(refused(await payout(agent!.address, { nonce: "900001" }))).toEqual({
      code: "cap_exceeded",
      detail: "faucet_cooldown",
    });
    expect(BigInt(await spent()) - before).toBe(200n);
  });

  it("signs no payout again at a recipient's last nonce once the treasury has another key: that nonce is the new key's, a payment of its own", async () => {
    const [agent] = (
      await privileged(client, fixture, "generate_keys", {
        namespace: "agent-transfer",
        count: 1,
        batch_id: "faucet-new-key-agent",
      })
    ).keys as Key[];
    expectOk(await payout(agent!.address, { nonce: "700000" }));
    // The operator moves the treasury to another faucet key (the policy key's call).
    const [next] = (
      await privileged(client, fixture, "generate_keys", {
        namespace: "faucet",
        count: 1,
        batch_id: "faucet-next-key",
      })
    ).keys as Key[];
    const old = treasury;
    await privileged(client, fixture, "configure_treasury", {
      budget_units: "1000000000",
      ...TERMS,
      faucet_key_ref: next!.key_ref,
    });
    treasury = next!;
    try {
      // Mutation: taken as the recipient's last payout asked again, it is signed past the cooldown,
      // and both it and the old key's payout can be mined.
      expect(refused(await payout(agent!.address, { nonce: "700000" }))).toEqual({
        code: "cap_exceeded",
        detail: "faucet_cooldown",
      });
    } finally {
      await privileged(client, fixture, "configure_treasury", {
        budget_units: "1000000000",
        ...TERMS,
        faucet_key_ref: old.key_ref,
      });
      treasury = old;
    }
  });

  it("refuses the payout that would pass the recipient's sealed units of the day", async () => {
    // Without a cooldown in the way: 100 + 100 of 250, then 300 would pass it.
    await privileged(client, fixture, "configure_treasury", {
      budget_units: "1000",
      ...TERMS,
      cooldown_ms: 0,
    });
    expectOk(await payout(agents[2]!.address));
    expectOk(await payout(agents[2]!.address));
    expect(refused(await payout(agents[2]!.address))).toEqual({
      code: "cap_exceeded",
      detail: "faucet_daily",
    });
    expect(await spent()).toBe("200");
  });

  it("keeps the recipients' payouts across a restart (sealed state)", async () => {
    await privileged(client, fixture, "configure_treasury", { budget_units: "1000", ...TERMS });
    expect(await fixture.stop()).toBe(0);
    await fixture.start();
    client.close();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    expect(refused(await payout(agents[0]!.address))).toEqual({
      code: "cap_exceeded",
      detail: "faucet_cooldown",
    });
    expect(refused(await payout(agents[2]!.address))).toEqual({
      code: "cap_exceeded",
      detail: "faucet_cooldown",
    });
  });
});

describe("sign_faucet pays the same recipient again once its cooldown has run and a new UTC day has begun (the enclave's server, the test's clock)", () => {
  let enclave: ClockedEnclave;
  let client: RawEnclaveClient;
  let treasury: Key;
  let agents: Key[];
  const { payout } = faucetCalls(
    () => client,
    () => treasury,
  );

  beforeAll(async () => {
    enclave = await startClockedEnclave({ envId: "faucet-clock", at: START });
    ({ client } = await RawEnclaveClient.connect(enclave.fixture.socketPath));
    ({ treasury, agents } = await setUp(client, enclave.fixture));
  });
  afterAll(async () => {
    client?.close();
    await enclave?.close();
  });

  it("refuses within the cooldown to the millisecond, pays after it, and counts the day's units until the next UTC day", async () => {
    const agent = agents[0]!.address;
    expectOk(await payout(agent));
    enclave.clock.advance(COOLDOWN_MS - 1);
    expect(refused(await payout(agent))).toEqual({ code: "cap_exceeded", detail: "faucet_cooldown" });
    enclave.clock.advance(1);
    expectOk(await payout(agent)); // 200 of 250 today
    enclave.clock.advance(COOLDOWN_MS);
    expect(refused(await payout(agent))).toEqual({ code: "cap_exceeded", detail: "faucet_daily" });
    enclave.clock.set(new Date("2031-03-05T00:00:00Z"));
    expectOk(await payout(agent));
  });
});
