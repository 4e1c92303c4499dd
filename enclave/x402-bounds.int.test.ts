import type { Address } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EnclaveResponse } from "../shared/enclave-protocol.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { privileged } from "./testing/capabilities.ts";
import { type ClockedEnclave, startClockedEnclave } from "./testing/clocked-enclave.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// The review signed 200 of 200 sign_x402_authorization calls for one key in 337 ms with no agent
// request behind them. The enclave now counts each key's authorizations per UTC day in sealed state,
// durable before the signature leaves, and refuses past the sealed x402_daily_limit; and it signs no
// authorization that would expire inside the sealed validity margin (it could not be settled).

const PAY_TO: Address = "0x2222222222222222222222222222222222222222";
const MARGIN_SECONDS = 6;
/** Authorizations sent at once for one key before the kill. */
const BURST = 400;

type Key = { key_ref: string; address: Address };

const policy = (dailyLimit: number): Record<string, unknown> => ({
  per_tx_limit_units: "0",
  daily_limit_units: "0",
  recipient_allowlist: null,
  x402_amount_units: "10000",
  x402_pay_to: PAY_TO,
  x402_max_timeout_seconds: 180,
  operator_pool: "0x00000000000000000000000000000000000000aa",
  fee_ceiling_wei: "1000000000000000",
  x402_validity_margin_seconds: MARGIN_SECONDS,
  x402_daily_limit: dailyLimit,
  settler_daily_fee_units: "1000000000",
});

let nonces = 0;
/** sign_x402_authorization's params for `key`, valid 60 s from `nowSeconds`. */
const authorization = (key: Key, nowSeconds: number, change: Record<string, unknown> = {}) => ({
  key_ref: key.key_ref,
  from: key.address,
  to: PAY_TO,
  value_units: "10000",
  valid_after: "0",
  valid_before: String(nowSeconds + 60),
  nonce: `0x${(++nonces).toString(16).padStart(64, "0")}`,
  ...change,
});
const outcome = (response: EnclaveResponse) =>
  response.ok ? "signed" : { code: response.error.code, detail: response.error.detail };

async function agentKeys(
  client: RawEnclaveClient,
  fixture: EnclaveFixture,
  count: number,
  batchId = `x402-${count}`,
): Promise<Key[]> {
  const batch = await privileged(client, fixture, "generate_keys", {
    namespace: "agent-transfer",
    count,
    batch_id: batchId,
  });
  return batch.keys as Key[];
}

describe("sign_x402_authorization under the sealed daily count and margin (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let keys: Key[];
  const now = (): number => Math.floor(Date.now() / 1000);

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "x402-bounds" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    await privileged(client, fixture, "configure_policy", policy(1_000));
    keys = await agentKeys(client, fixture, 2);
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("signs 1,000 authorizations of one key and refuses its 1,001st; another key is unaffected", async () => {
    const [key, other] = keys as [Key, Key];
    const at = now();
    // As fast as an attacker on the origin host can ask: all of them written at once.
    const answers = await client.requestTogether(
      Array.from({ length: 1_000 }, () => ({
        op: "sign_x402_authorization",
        params: authorization(key, at),
      })),
    );
    expect(answers.filter((answer) => answer.ok)).toHaveLength(1_000);
    expect(outcome(await client.request("sign_x402_authorization", authorization(key, now())))).toEqual({
      code: "cap_exceeded",
      detail: "x402_daily",
    });
    expectOk(await client.request("sign_x402_authorization", authorization(other, now())));
  }, 120_000);

  it("counts every authorization that left across a kill in the middle of a burst: after the start, the key signs only what is left of its 1,000", async () => {
    // The kill follows the 60th answer read, but the enclave may have written every answer by then
    // (a loaded machine can leave the test unscheduled while the enclave runs on). Such a burst
    // proves nothing about a kill in flight, so it is sent again for a fresh key, up to 5 times.
    let key: Key | undefined;
    let left = BURST;
    for (let attempt = 1; attempt <= 5 && left === BURST; attempt++) {
      [key] = (await agentKeys(client, fixture, 1, `x402-burst-${attempt}`)) as [Key];
      left = await burstKilledAfter60(key);
    }
    expect(left).toBeGreaterThan(60);
    expect(left).toBeLessThan(BURST);

    const after = await client.requestTogether(
      Array.from({ length: 1_000 - left + 1 }, () => ({
        op: "sign_x402_authorization",
        params: authorization(key!, now()),
      })),
    );
    const signedAfter = after.filter((answer) => answer.ok).length;
    // Each that left was counted (a lost count would let more through); at most the BURST sent were.
    expect(left + signedAfter).toBeLessThanOrEqual(1_000);
    expect(signedAfter).toBeGreaterThanOrEqual(1_000 - BURST);
  }, 120_000);

  /** Sends BURST authorizations of `key` at once, kills the enclave after the 60th answer read, starts
   * it again and reconnects; gives how many were answered signed before the kill. */
  async function burstKilledAfter60(key: Key): Promise<number> {
    const at = now();
    for (let index = 0; index < BURST; index++) {
      client.send({
        v: 1,
        id: 10_000 + index,
        op: "sign_x402_authorization",
        params: authorization(key, at),
      });
    }
    let left = 0;
    let killed: Promise<void> | undefined;
    for (let answered = 0; answered < BURST; answered++) {
      const answer = await client.next().catch(() => null);
      if (answer === null) break;
      if ((answer as { ok: boolean }).ok) left++;
      if (answered === 60) killed = fixture.kill();
    }
    await (killed ?? fixture.kill());
    client.close();
    await fixture.start();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    return left;
  }

  it("refuses an authorization that would expire within the sealed margin", async () => {
    const at = now();
    const response = await client.request(
      "sign_x402_authorization",
      authorization(keys[1]!, at, { valid_before: String(at + MARGIN_SECONDS - 2) }),
    );
    expect(outcome(response)).toEqual({ code: "cap_exceeded", detail: "x402_validity" });
  });
});

describe("sign_x402_authorization counts per key and UTC day (the enclave's server, the test's clock)", () => {
  let enclave: ClockedEnclave;
  let client: RawEnclaveClient;
  let keys: Key[];
  const now = (): number => Math.floor(enclave.clock.now().getTime() / 1000);
  const sign = (key: Key, change: Record<string, unknown> = {}) =>
    client.request("sign_x402_authorization", authorization(key, now(), change));

  beforeAll(async () => {
    enclave = await startClockedEnclave({ envId: "x402-day", at: new Date("2031-03-04T23:58:00Z") });
    ({ client } = await RawEnclaveClient.connect(enclave.fixture.socketPath));
    await privileged(client, enclave.fixture, "configure_policy", policy(3));
    keys = await agentKeys(client, enclave.fixture, 2);
  });
  afterAll(async () => {
    client?.close();
    await enclave?.close();
  });

  it("refuses the 4th of a key under a count of 3, counting no refusal; another key is unaffected", async () => {
    const [key, other] = keys as [Key, Key];
    expectOk(await sign(key));
    // Refused requests count nothing: another key's address as from, another amount.
    expect(outcome(await sign(key, { from: other.address }))).toEqual({
      code: "key_purpose_mismatch",
      detail: "key_binding",
    });
    expect(outcome(await sign(key, { value_units: "1" }))).toEqual({
      code: "cap_exceeded",
      detail: "x402_amount",
    });
    expectOk(await sign(key));
    expectOk(await sign(key));
    expect(outcome(await sign(key))).toEqual({ code: "cap_exceeded", detail: "x402_daily" });
    expectOk(await sign(other));
  });

  it("keeps the count across a restart, and starts again at the next UTC day", async () => {
    const [key] = keys as [Key];
    await enclave.restart();
    client.close();
    ({ client } = await RawEnclaveClient.connect(enclave.fixture.socketPath));
    expect(outcome(await sign(key))).toEqual({ code: "cap_exceeded", detail: "x402_daily" });
    enclave.clock.set(new Date("2031-03-05T00:00:00Z"));
    expectOk(await sign(key));
    expectOk(await sign(key));
    expectOk(await sign(key));
    expect(outcome(await sign(key))).toEqual({ code: "cap_exceeded", detail: "x402_daily" });
  });
});
