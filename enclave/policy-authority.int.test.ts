import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ed25519 } from "@noble/curves/ed25519";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  authorityPublicKey,
  CAPABILITY_VERSION,
  type CapabilityBody,
  capabilitySigningPreimage,
  payloadBinding,
  randomAuthoritySecret,
} from "../shared/capability.ts";
import { encodeCbor } from "../shared/cbor-frame.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import type { PrivilegedOp } from "../shared/enclave-protocol.ts";
import { toHex } from "../shared/hex.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { runTool } from "../testing/run-tool.ts";
import { generateSealingKey, SEAL_LABEL, seal } from "./sealing.ts";
import { instanceIdOf, mintFor, nextCounter, privileged } from "./testing/capabilities.ts";
import { randomP256PublicKey } from "./testing/p256-points.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// configure_policy and configure_treasury need the policy authority sealed at init, not the admin
// key the origin holds for key-pool refills (docs/enclave.md, "Keys and where production keeps them").

const OPERATOR_POOL = "0x00000000000000000000000000000000000000aa";

const policy = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  per_tx_limit_units: "100",
  daily_limit_units: "150",
  recipient_allowlist: null,
  x402_amount_units: null,
  x402_pay_to: null,
  x402_max_timeout_seconds: 180,
  operator_pool: OPERATOR_POOL,
  fee_ceiling_wei: "1000000000000000",
  x402_validity_margin_seconds: 6,
  x402_daily_limit: 1000,
  settler_daily_fee_units: "1000000000",
  ...overrides,
});

const TERMS = { payout_units: "40", cooldown_ms: 60_000, daily_limit_units: "40" };

/** The most an attacker holding the admin key can send: every scope, minted with that key. */
function adminSignedCapabilities(
  fixture: EnclaveFixture,
  op: PrivilegedOp,
  params: Record<string, unknown>,
  counter: number,
  instanceId: string,
): unknown[] {
  return (["admin", "policy"] as const).map((scope) => {
    const body: CapabilityBody = {
      ver: CAPABILITY_VERSION,
      authority: authorityPublicKey(fixture.adminSecret),
      op,
      request_id: `admin-${scope}-${op}`,
      chain_id: CHAIN_ID,
      env_id: fixture.envId,
      instance_id: instanceId,
      scope,
      counter,
      payload_binding: payloadBinding(op, params),
    };
    return { ...body, sig: toHex(ed25519.sign(capabilitySigningPreimage(body), fixture.adminSecret)) };
  });
}

describe("the policy authority (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;

  const getPolicy = async (): Promise<Record<string, unknown>> =>
    expectOk(await client.request("get_policy", {}));

  const reconnect = async (): Promise<void> => {
    client?.close();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
  };

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "policy-env" });
    await reconnect();
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("answers get_policy without a capability: version 0, no policy, no treasury", async () => {
    expect(await getPolicy()).toEqual({
      env_id: "policy-env",
      chain_id: CHAIN_ID,
      policy_version: 0,
      policy: null,
      treasury: null,
      settler: null,
      // Made at init (docs/x402.md#offers-and-receipts).
      payee: { payee_key_ref: expect.stringMatching(/^[0-9a-f]{64}$/), payee_address: expect.any(String) },
      node_frozen: false,
      node_freeze_epoch: 0,
      operator_keys: [],
      operator_passkeys: [],
      revoked_operator_keys: [],
    });
  });

  it("refuses configure_policy and configure_treasury under an admin capability, changing nothing", async () => {
    const cases: Array<[PrivilegedOp, Record<string, unknown>]> = [
      ["configure_policy", policy({ per_tx_limit_units: "1000000000000" })],
      ["configure_treasury", { budget_units: "1000000000000", ...TERMS }],
    ];
    for (const [op, params] of cases) {
      const counter = await nextCounter(client, fixture.adminSecret, op);
      for (const cap of adminSignedCapabilities(fixture, op, params, counter, await instanceIdOf(client))) {
        expect(await client.request(op, params, cap)).toMatchObject({
          ok: false,
          error: { code: "capability_rejected" },
        });
      }
      const minted = await mintFor(client, fixture, op, params, { secret: fixture.adminSecret });
      expect(await client.request(op, params, minted)).toMatchObject({
        ok: false,
        error: { code: "capability_rejected" },
      });
    }
    expect(await getPolicy()).toMatchObject({ policy_version: 0, policy: null, treasury: null });
  });

  it("refuses enroll_operator_key, configure_settler and configure_payee under an admin capability, changing nothing", async () => {
    // An operator key of the origin's own would sign every loosening, unfreeze and approval the
    // admin key cannot make alone; a settler or payee key of its own would pay gas, or vouch for
    // offers and receipts, under another key than the operator sealed.
    const made = async (namespace: "settler" | "payee"): Promise<string> => {
      const batch = await privileged(client, fixture, "generate_keys", {
        namespace,
        count: 1,
        batch_id: `admin-made-${namespace}`,
      });
      return (batch.keys as Array<{ key_ref: string }>)[0]!.key_ref;
    };
    const before = await getPolicy();
    const cases: Array<[PrivilegedOp, Record<string, unknown>]> = [
      ["enroll_operator_key", { key_id: "origin-own", public_key: randomP256PublicKey() }],
      ["configure_settler", { settler_key_ref: await made("settler") }],
      ["configure_payee", { payee_key_ref: await made("payee") }],
    ];
    // Mutation: putting any of these ops in the admin tier accepts its capability here.
    for (const [op, params] of cases) {
      const counter = await nextCounter(client, fixture.adminSecret, op);
      for (const cap of adminSignedCapabilities(fixture, op, params, counter, await instanceIdOf(client))) {
        expect(await client.request(op, params, cap)).toMatchObject({
          ok: false,
          error: { code: "capability_rejected" },
        });
      }
    }
    const after = await getPolicy();
    expect(after).toMatchObject({ operator_keys: [], settler: null, payee: before.payee });
  });

  it("refuses configure_policy and configure_treasury under a recovery capability", async () => {
    for (const [op, params] of [
      ["configure_policy", policy()],
      ["configure_treasury", { budget_units: "1000", ...TERMS }],
    ] as const) {
      const cap = await mintFor(client, fixture, op, params, { secret: fixture.recoverySecret });
      expect(await client.request(op, params, cap)).toMatchObject({
        ok: false,
        error: { code: "capability_rejected" },
      });
    }
    expect(await getPolicy()).toMatchObject({ policy_version: 0, policy: null, treasury: null });
  });

  it("accepts both under the policy capability; get_policy shows the policy, its version and the treasury", async () => {
    expect(await privileged(client, fixture, "configure_policy", policy())).toEqual(policy());
    expect(await getPolicy()).toMatchObject({ policy_version: 1, policy: policy() });
    const updated = policy({
      daily_limit_units: "200",
      recipient_allowlist: [OPERATOR_POOL.replace("aa", "bb")],
    });
    await privileged(client, fixture, "configure_policy", updated);
    const treasury = await privileged(client, fixture, "configure_treasury", {
      budget_units: "1000",
      ...TERMS,
    });
    expect(await getPolicy()).toEqual({
      env_id: "policy-env",
      chain_id: CHAIN_ID,
      policy_version: 2,
      policy: updated,
      treasury: {
        faucet_key_ref: treasury.faucet_key_ref,
        faucet_address: treasury.faucet_address,
        budget_units: "1000",
        spent_units: "0",
        ...TERMS,
      },
      settler: null,
      // Made at init (docs/x402.md#offers-and-receipts).
      payee: { payee_key_ref: expect.stringMatching(/^[0-9a-f]{64}$/), payee_address: expect.any(String) },
      node_frozen: false,
      node_freeze_epoch: 0,
      operator_keys: [],
      operator_passkeys: [],
      revoked_operator_keys: [],
    });
  });

  it("keeps the policy, its version, the capability counters, the daily spend, the faucet spend and the recipient's payouts across a restart", async () => {
    await privileged(client, fixture, "configure_policy", policy({ fee_ceiling_wei: "0" }));
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 1,
      batch_id: "restart",
    });
    const [key] = batch.keys as Array<{ key_ref: string; address: string }>;
    const sign = (op: "sign_transfer" | "sign_faucet", keyRef: string, value: string, nonce = "0") =>
      client.request(op, {
        key_ref: keyRef,
        from: op === "sign_faucet" ? faucetAddress : key!.address,
        chain_id: CHAIN_ID,
        to: op === "sign_faucet" ? key!.address : "0x1111111111111111111111111111111111111111",
        value_units: value,
        nonce,
        max_fee_per_gas: "0",
        max_priority_fee_per_gas: "0",
        gas_limit: "21000",
      });
    const before = await getPolicy();
    const { faucet_key_ref: faucetKeyRef, faucet_address: faucetAddress } = before.treasury as {
      faucet_key_ref: string;
      faucet_address: string;
    };
    expectOk(await sign("sign_transfer", key!.key_ref, "100"));
    expectOk(await sign("sign_faucet", faucetKeyRef, "40"));
    const replay = await mintFor(client, fixture, "configure_policy", policy());
    expectOk(await client.request("configure_policy", policy(), replay));
    const sealed = await getPolicy();
    expect(sealed).toMatchObject({ policy_version: 4, treasury: { spent_units: "40" } });

    expect(await fixture.stop()).toBe(0);
    await fixture.start();
    await reconnect();

    expect(await getPolicy()).toEqual(sealed);
    expect(await nextCounter(client, fixture.policySecret, "configure_policy")).toBe(5);
    expect(await client.request("configure_policy", policy(), replay)).toMatchObject({
      error: { code: "capability_rejected" },
    });
    // 100 of 150 was spent today before the restart.
    expect(await sign("sign_transfer", key!.key_ref, "51")).toMatchObject({
      error: { code: "cap_exceeded", reason: "over the daily limit" },
    });
    expectOk(await sign("sign_transfer", key!.key_ref, "50"));
    // The recipient's payout before the restart still holds its cooldown: for the treasury's next
    // payout (at its own nonce, 0, the same payout is signed again: enclave.md).
    expect(await sign("sign_faucet", faucetKeyRef, "40", "1")).toMatchObject({
      error: { code: "cap_exceeded", detail: "faucet_cooldown" },
    });
  });
});

describe("an enclave data folder sealed before the policy authority", () => {
  let dir = "";
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("is refused at start with exit 2 and a message that says how to re-initialise", async () => {
    dir = await mkdtemp(join(tmpdir(), "enclave-v1-"));
    const dataDir = join(dir, "data");
    await mkdir(join(dataDir, "keys"), { recursive: true, mode: 0o700 });
    // The shape an older `init` sealed: admin and recovery authorities only.
    const sealingKey = generateSealingKey();
    const v1Config = {
      v: 1,
      env_id: "old-env",
      chain_id: CHAIN_ID,
      admin_authority: authorityPublicKey(randomAuthoritySecret()),
      recovery_authority: authorityPublicKey(randomAuthoritySecret()),
      created_at: new Date().toISOString(),
    };
    await writeFile(join(dataDir, "sealing.key"), sealingKey, { mode: 0o600 });
    await writeFile(
      join(dataDir, "enclave.sealed"),
      seal(sealingKey, SEAL_LABEL.config, encodeCbor(v1Config)),
      {
        mode: 0o600,
      },
    );

    const failure = await runTool("enclave/main.ts", [
      "serve",
      "--data-dir",
      dataDir,
      "--socket",
      join(dir, "e.sock"),
    ]);
    expect(failure?.code).toBe(2);
    const stderr = failure?.stderr ?? "";
    expect(stderr).toContain("initialised before the policy authority existed");
    expect(stderr).toContain("move the data folder away");
    expect(stderr).toContain("--policy-pubkey");
    expect(stderr).toContain("rm -rf .data");
  });
});
