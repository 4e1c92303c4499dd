import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EnclaveResponse, responseSchema } from "../shared/enclave-protocol.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { instanceIdOf, mintFor, nextCounter, privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// Attacker: holds the origin host, so every frame the origin relayed to the enclave was recorded,
// but not the policy key. The enclave is lost and replaced as docs/operations.md "Disaster recovery" says: a
// new data folder initialised with the same env id and the same four public keys, whose capability
// counters start again at 1. Recorded frames must be worthless there (shared/capability.ts).

const USDC = 1_000_000n;
const OPERATOR_POOL = "0x00000000000000000000000000000000000000aa";

const policy = (perTxUsdc: bigint): Record<string, unknown> => ({
  per_tx_limit_units: (perTxUsdc * USDC).toString(),
  daily_limit_units: (1_000n * USDC).toString(),
  recipient_allowlist: null,
  x402_amount_units: null,
  x402_pay_to: null,
  x402_max_timeout_seconds: 180,
  x402_validity_margin_seconds: 6,
  x402_daily_limit: 1000,
  settler_daily_fee_units: "1000000000",
  operator_pool: OPERATOR_POOL,
  fee_ceiling_wei: "1000000000000000",
});

/** The faucet's sealed payout terms, which every configure_treasury names. */
const PAYOUT_TERMS = {
  payout_units: USDC.toString(),
  cooldown_ms: 60_000,
  daily_limit_units: (10n * USDC).toString(),
};

type RecordedFrame = { v: 1; id: string; op: string; params: Record<string, unknown>; cap: unknown };

/** Sends one frame exactly as given (a relayed or replayed one) and reads its answer. */
async function sendFrame(client: RawEnclaveClient, frame: RecordedFrame): Promise<EnclaveResponse> {
  client.send(frame);
  const response = responseSchema.parse(await client.next());
  if (response.id !== frame.id) throw new Error(`answer to ${String(response.id)}, not ${frame.id}`);
  return response;
}

describe("capabilities are bound to one enclave instance (real processes)", () => {
  let lost: EnclaveFixture;
  let replacement: EnclaveFixture;
  let client: RawEnclaveClient;
  /** What the origin host relayed to the lost enclave, each accepted there. */
  const recorded = new Map<"policy10" | "policy500" | "tightened" | "treasury", RecordedFrame>();
  const frame = (name: "policy10" | "policy500" | "tightened" | "treasury"): RecordedFrame =>
    recorded.get(name)!;

  const getPolicy = async (): Promise<Record<string, unknown>> =>
    expectOk(await client.request("get_policy", {}));

  beforeAll(async () => {
    lost = await createEnclaveFixture({ envId: "instance-env" });
    const { client: lostClient } = await RawEnclaveClient.connect(lost.socketPath);
    const relay = async (
      name: "policy10" | "policy500" | "tightened" | "treasury",
      op: "configure_policy" | "configure_treasury",
      params: Record<string, unknown>,
    ): Promise<void> => {
      const relayed: RecordedFrame = {
        v: 1,
        id: `relayed-${name}`,
        op,
        params,
        cap: await mintFor(lostClient, lost, op, params),
      };
      expectOk(await sendFrame(lostClient, relayed));
      recorded.set(name, relayed);
    };
    // The lost enclave's history: 10 USDC per transaction (counter 1), raised to 500 for a while
    // (counter 2), tightened to 10 again (counter 3); a faucet treasury with a budget (counter 1).
    await relay("policy10", "configure_policy", policy(10n));
    await relay("policy500", "configure_policy", policy(500n));
    await relay("tightened", "configure_policy", policy(10n));
    await relay("treasury", "configure_treasury", {
      budget_units: (1_000_000n * USDC).toString(),
      ...PAYOUT_TERMS,
    });
    expect(frame("policy500").cap).toMatchObject({ counter: 2 });
    expect(frame("treasury").cap).toMatchObject({ counter: 1 });
    lostClient.close();
    await lost.stop();

    // Runbook step 2: the same env id and the same four public keys, a new data folder.
    replacement = await createEnclaveFixture({ envId: "instance-env", keys: lost });
    ({ client } = await RawEnclaveClient.connect(replacement.socketPath));
  });
  afterAll(async () => {
    client?.close();
    await replacement?.dispose();
    await lost?.dispose();
  });

  it("gives the replacement its own instance id beside the same env id and public keys", async () => {
    const identity = expectOk(await client.request("get_sealed_identity", {}));
    expect(identity.env_id).toBe("instance-env");
    expect(identity.instance_id).toMatch(/^0x[0-9a-f]{32}$/);
    expect(identity.instance_id).not.toBe((frame("policy10").cap as { instance_id: string }).instance_id);
    expect(await nextCounter(client, replacement.policySecret, "configure_policy")).toBe(1);
  });

  it("refuses a configure_policy and a configure_treasury frame recorded on the lost enclave; its policy and treasury stay unset", async () => {
    // Counter 1 is exactly what the replacement expects next: only the instance id refuses these.
    for (const replayed of [frame("policy10"), frame("treasury")]) {
      expect(await sendFrame(client, replayed)).toMatchObject({
        ok: false,
        error: { code: "capability_rejected" },
      });
    }
    expect(await getPolicy()).toMatchObject({ policy_version: 0, policy: null, treasury: null });
    expect(await nextCounter(client, replacement.policySecret, "configure_policy")).toBe(1);
    expect(await nextCounter(client, replacement.policySecret, "configure_treasury")).toBe(1);
  });

  it("accepts the operator's capability minted for the replacement; the lost enclave's 500 USDC frame stays refused", async () => {
    // A replacement of its own, so that nothing sent to the other one has moved its counters.
    const fresh = await createEnclaveFixture({ envId: "instance-env", keys: lost });
    const { client: freshClient } = await RawEnclaveClient.connect(fresh.socketPath);
    try {
      // Runbook step 4: the policy key seals the policy again, minted for this instance.
      expect(await privileged(freshClient, fresh, "configure_policy", policy(10n))).toEqual(policy(10n));
      // It now expects counter 2: the counter of the recorded frame that raised the lost
      // enclave's limit to 500 USDC.
      expect(await nextCounter(freshClient, fresh.policySecret, "configure_policy")).toBe(2);
      expect(await sendFrame(freshClient, frame("policy500"))).toMatchObject({
        ok: false,
        error: { code: "capability_rejected" },
      });
      expect(expectOk(await freshClient.request("get_policy", {}))).toMatchObject({
        policy_version: 1,
        policy: policy(10n),
      });
    } finally {
      freshClient.close();
      await fresh.dispose();
    }
  });

  it("refuses a capability minted for the replacement when sent to another instance", async () => {
    // The other direction: the lost enclave, started again, refuses what was minted for its replacement.
    await lost.start();
    const { client: lostClient } = await RawEnclaveClient.connect(lost.socketPath);
    try {
      const params = { budget_units: "1", ...PAYOUT_TERMS };
      // Minted for the replacement (its instance id) with the counter the lost enclave expects.
      const counter = await nextCounter(lostClient, lost.policySecret, "configure_treasury");
      const forReplacement = await mintFor(client, replacement, "configure_treasury", params, { counter });
      expect(await instanceIdOf(lostClient)).not.toBe(forReplacement.instance_id);
      expect(await lostClient.request("configure_treasury", params, forReplacement)).toMatchObject({
        error: { code: "capability_rejected" },
      });
      expect(await nextCounter(lostClient, lost.policySecret, "configure_treasury")).toBe(counter);
    } finally {
      lostClient.close();
      await lost.stop();
    }
  });
});
