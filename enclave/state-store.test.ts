import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { dataDirLayout } from "./data-dir.ts";
import { generateSealingKey, SealError } from "./sealing.ts";
import { StateSlots } from "./state-slots.ts";
import { type StatePaths, StateStore } from "./state-store.ts";
import { persistedSchema, V2_POLICY_DEFAULTS, V3_POLICY_DEFAULTS } from "./state-versions.ts";
import { toPersisted } from "./state-wire.ts";
import { TrackedMap } from "./tracked-map.ts";

describe("StateStore (sealed, group commit)", () => {
  let dir: string;
  let path: StatePaths;
  const key = generateSealingKey();
  // Every store a test opens, closed after it: a store left open holds its files' descriptors
  // until the collector closes them, which Node warns of (DEP0137) in whichever file runs next.
  let opened: StateStore[] = [];
  const open = async (...args: Parameters<typeof StateStore.open>): Promise<StateStore> => {
    const store = await StateStore.open(...args);
    opened.push(store);
    return store;
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "state-store-"));
    path = dataDirLayout(dir).state;
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await Promise.allSettled(opened.map((store) => store.close()));
    opened = [];
    await rm(dir, { recursive: true, force: true });
  });

  it("starts empty and persists counters, policy and its version, treasury and its terms, daily spend, x402 counts, faucet payouts and signed nonces across a reopen", async () => {
    const store = await open(path, key);
    expect(store.state.counters.size).toBe(0);
    expect(store.state.policyVersion).toBe(0);
    const policy = {
      perTxLimitUnits: 10n,
      dailyLimitUnits: 20n,
      recipientAllowlist: new Set(["0x1111111111111111111111111111111111111111"]),
      x402AmountUnits: null,
      x402PayTo: null,
      x402MaxTimeoutSeconds: 180,
      operatorPool: "0x00000000000000000000000000000000000000aa",
      feeCeilingWei: 10n ** 15n,
      x402ValidityMarginSeconds: 6,
      x402DailyLimit: 1000,
      settlerDailyFeeUnits: 1_000_000_000n,
      x402MaxPerPaymentUnits: null,
      x402Payees: null,
    };
    const treasury = {
      faucetKeyRef: "ab".repeat(32),
      budgetUnits: 10n ** 30n,
      spentUnits: 5n,
      terms: { payoutUnits: 1_000_000n, cooldownMs: 60_000, dailyLimitUnits: 10n ** 25n },
    };
    const recipient = "0x1111111111111111111111111111111111111111";
    await store.commit((state) => {
      state.counters.set("k", 3);
      state.policy = policy;
      state.policyVersion = 4;
      state.treasury = treasury;
      state.daily = { day: "2025-01-01", spent: TrackedMap.of([["cd".repeat(32), 42n]]) };
      state.x402Daily = { day: "2025-01-01", signed: TrackedMap.of([["cd".repeat(32), 7]]) };
      state.faucetPayouts.set(recipient, {
        lastPayoutMs: 1_735_700_000_000,
        day: "2025-01-01",
        unitsToday: 9n,
      });
      state.nonces.prunedAtMs = 1_735_700_000_000;
      state.nonces.keys.set("cd".repeat(32), {
        lastSignedMs: 1_735_700_000_001,
        floor: 3,
        signed: [
          [3, 9],
          [12, 12],
        ],
        filled: [5],
      });
    });
    const reopened = await open(path, key);
    expect(reopened.state.counters.get("k")).toBe(3);
    expect(reopened.state.policy).toEqual(policy);
    expect(reopened.state.policyVersion).toBe(4);
    expect(reopened.state.treasury).toEqual(treasury);
    expect(reopened.state.daily.spent.get("cd".repeat(32))).toBe(42n);
    expect(reopened.state.x402Daily).toEqual({
      day: "2025-01-01",
      signed: TrackedMap.of([["cd".repeat(32), 7]]),
    });
    expect(reopened.state.faucetPayouts).toEqual(
      TrackedMap.of([[recipient, { lastPayoutMs: 1_735_700_000_000, day: "2025-01-01", unitsToday: 9n }]]),
    );
    // Mutation: writing no nonce record (toPersisted leaving signed_nonces empty) fails this.
    expect(reopened.state.nonces).toEqual(store.state.nonces);
  });

  it("reads a v2 state: the policy gains the origin's default margin and daily count and the default settler fee budget, the treasury no payout terms; the next write is v7", async () => {
    const v2Policy = {
      per_tx_limit_units: "10",
      daily_limit_units: "20",
      recipient_allowlist: null,
      x402_amount_units: "10000",
      x402_pay_to: "0x2222222222222222222222222222222222222222",
      x402_max_timeout_seconds: 180,
      operator_pool: "0x00000000000000000000000000000000000000aa",
      fee_ceiling_wei: "1000",
    };
    // A state as the previous version sealed it, written into the slots as that version wrote it.
    const { slots } = await StateSlots.open(path, key);
    await slots.write(
      encodeCbor({
        v: 2,
        counters: { k: 2 },
        policy: v2Policy,
        policy_version: 3,
        treasury: { faucet_key_ref: "ab".repeat(32), budget_units: "1000", spent_units: "40" },
        settler_key_ref: "ef".repeat(32),
        daily: { day: "2025-01-01", spent: { ["cd".repeat(32)]: "42" } },
      }),
      1n,
    );
    await slots.close();

    const store = await open(path, key);
    expect(store.state.policy).toMatchObject({
      perTxLimitUnits: 10n,
      feeCeilingWei: 1000n,
      x402ValidityMarginSeconds: V2_POLICY_DEFAULTS.x402_validity_margin_seconds,
      x402DailyLimit: V2_POLICY_DEFAULTS.x402_daily_limit,
      settlerDailyFeeUnits: BigInt(V3_POLICY_DEFAULTS.settler_daily_fee_units),
      x402MaxPerPaymentUnits: null,
      x402Payees: null,
    });
    expect(store.state.treasury).toEqual({
      faucetKeyRef: "ab".repeat(32),
      budgetUnits: 1000n,
      spentUnits: 40n,
      terms: null,
    });
    expect(store.state).toMatchObject({ policyVersion: 3, settlerKeyRef: "ef".repeat(32) });
    expect(store.state.counters.get("k")).toBe(2);
    expect(store.state.daily.spent.get("cd".repeat(32))).toBe(42n);
    expect(store.state.x402Daily.signed.size).toBe(0);
    expect(store.state.faucetPayouts.size).toBe(0);
    expect(store.state.nonces.keys.size).toBe(0);

    await store.commit((state) => state.counters.set("k", 3));
    await store.close();
    const reopened = await open(path, key);
    expect(reopened.state.policy).toEqual(store.state.policy);
    expect(reopened.state.counters.get("k")).toBe(3);
    const newest = await StateSlots.open(path, key);
    expect((decodeCbor(newest.plaintext!) as { v: number }).v).toBe(7);
    await newest.slots.close();
  });

  it("reads a v3 state: everything it held is kept, the policy gains the default settler fee budget, no nonce is known; the next write is v7", async () => {
    const v3Policy = {
      per_tx_limit_units: "10",
      daily_limit_units: "20",
      recipient_allowlist: ["0x1111111111111111111111111111111111111111"],
      x402_amount_units: "10000",
      x402_pay_to: "0x2222222222222222222222222222222222222222",
      x402_max_timeout_seconds: 180,
      operator_pool: "0x00000000000000000000000000000000000000aa",
      fee_ceiling_wei: "1000",
      x402_validity_margin_seconds: 9,
      x402_daily_limit: 77,
    };
    const agentKey = "cd".repeat(32);
    const recipient = "0x3333333333333333333333333333333333333333";
    // A state as the previous version sealed it, written into the slots as that version wrote it.
    const { slots } = await StateSlots.open(path, key);
    await slots.write(
      encodeCbor({
        v: 3,
        counters: { k: 2 },
        policy: v3Policy,
        policy_version: 5,
        treasury: {
          faucet_key_ref: "ab".repeat(32),
          budget_units: "1000",
          spent_units: "40",
          terms: { payout_units: "600", cooldown_ms: 60_000, daily_limit_units: "1200" },
        },
        settler_key_ref: "ef".repeat(32),
        daily: { day: "2025-01-01", spent: { [agentKey]: "42" } },
        x402_daily: { day: "2025-01-01", signed: { [agentKey]: 7 } },
        faucet_payouts: {
          [recipient]: { last_payout_ms: 1_735_700_000_000, day: "2025-01-01", units_today: "600" },
        },
      }),
      1n,
    );
    await slots.close();

    // Mutation: parsePersisted without its v3 branch fails this ("state does not parse").
    const store = await open(path, key);
    expect(store.state.policy).toEqual({
      perTxLimitUnits: 10n,
      dailyLimitUnits: 20n,
      recipientAllowlist: new Set(["0x1111111111111111111111111111111111111111"]),
      x402AmountUnits: 10_000n,
      x402PayTo: "0x2222222222222222222222222222222222222222",
      x402MaxTimeoutSeconds: 180,
      operatorPool: "0x00000000000000000000000000000000000000aa",
      feeCeilingWei: 1000n,
      x402ValidityMarginSeconds: 9,
      x402DailyLimit: 77,
      settlerDailyFeeUnits: BigInt(V3_POLICY_DEFAULTS.settler_daily_fee_units),
      x402MaxPerPaymentUnits: null,
      x402Payees: null,
    });
    expect(store.state).toMatchObject({
      policyVersion: 5,
      settlerKeyRef: "ef".repeat(32),
      treasury: {
        faucetKeyRef: "ab".repeat(32),
        budgetUnits: 1000n,
        spentUnits: 40n,
        terms: { payoutUnits: 600n, cooldownMs: 60_000, dailyLimitUnits: 1200n },
      },
      daily: { day: "2025-01-01", spent: TrackedMap.of([[agentKey, 42n]]) },
      x402Daily: { day: "2025-01-01", signed: TrackedMap.of([[agentKey, 7]]) },
      faucetPayouts: TrackedMap.of([
        [recipient, { lastPayoutMs: 1_735_700_000_000, day: "2025-01-01", unitsToday: 600n }],
      ]),
    });
    expect(store.state.counters.get("k")).toBe(2);
    expect(store.state.nonces.keys.size).toBe(0);

    await store.commit((state) => state.counters.set("k", 3));
    await store.close();
    const reopened = await open(path, key);
    expect(reopened.state.policy).toEqual(store.state.policy);
    expect(reopened.state.treasury).toEqual(store.state.treasury);
    const newest = await StateSlots.open(path, key);
    expect((decodeCbor(newest.plaintext!) as { v: number }).v).toBe(7);
    await newest.slots.close();
  });

  it("reads a v5 state: its operator keys, counters and approvals are kept, no passkey is enrolled; the next write is v7 and keeps a passkey's counter and signCount", async () => {
    const { slots } = await StateSlots.open(path, key);
    const operatorKey = `0x04${"11".repeat(64)}`;
    await slots.write(
      encodeCbor({
        v: 5,
        counters: { k: 2 },
        policy: null,
        policy_version: 0,
        treasury: null,
        settler_key_ref: null,
        daily: { day: "", spent: {} },
        x402_daily: { day: "", signed: {} },
        faucet_payouts: {},
        signed_nonces: { pruned_at_ms: 0, keys: {} },
        agent_policies: {},
        node_frozen: true,
        operator_keys: { alice: { public_key: operatorKey, label: null, counter: 7 } },
        held_approvals: { [`0x${"ab".repeat(32)}`]: 1234 },
      }),
      1n,
    );
    await slots.close();
    const store = await open(path, key);
    expect(store.state.operatorKeys.get("alice")).toEqual({
      publicKey: operatorKey,
      label: null,
      lastCounter: 7,
    });
    expect(store.state).toMatchObject({ nodeFrozen: true });
    expect(store.state.heldApprovals.get(`0x${"ab".repeat(32)}`)).toBe(1234);
    expect(store.state.operatorPasskeys.size).toBe(0);
    const passkey = {
      operator: "Alice Martin",
      credentialId: "Y3JlZGVudGlhbC1pZC0x",
      publicKey: `0x04${"22".repeat(64)}`,
      rpId: "localhost",
      origin: "http://localhost:8080",
      label: null,
      lastCounter: 9,
      signCount: 3,
    };
    await store.commit((state) => state.operatorPasskeys.set("alice-passkey", passkey));
    await store.close();
    const reopened = await open(path, key);
    expect(reopened.state.operatorPasskeys.get("alice-passkey")).toEqual(passkey);
    expect(reopened.state.operatorKeys.get("alice")?.lastCounter).toBe(7);
    const newest = await StateSlots.open(path, key);
    expect((decodeCbor(newest.plaintext!) as { v: number }).v).toBe(7);
    await newest.slots.close();
  });

  it("a revoked passkey is sealed apart from the enrolled ones: read as an earlier release reads the state, it is not enrolled", async () => {
    const store = await open(path, key);
    const passkey = {
      operator: "Alice Martin",
      credentialId: "Y3JlZGVudGlhbC1pZC0x",
      publicKey: `0x04${"22".repeat(64)}`,
      rpId: "localhost",
      origin: "http://localhost:8080",
      label: null,
      lastCounter: 9,
      signCount: 3,
    };
    await store.commit((state) => state.operatorPasskeys.set("alice-passkey", passkey));
    const revoked = { operator: "Alice Martin", credentialId: passkey.credentialId, revokedAtMs: 1234 };
    await store.commit((state) => {
      state.operatorPasskeys.delete("alice-passkey");
      state.revokedPasskeys.set("alice-passkey", revoked);
    });
    await store.close();
    const reopened = await open(path, key);
    expect(reopened.state.revokedPasskeys.get("alice-passkey")).toEqual(revoked);
    expect(reopened.state.operatorPasskeys.has("alice-passkey")).toBe(false);
    // An earlier release's schema, without the field, drops it: the passkey is then unknown there.
    const earlier = persistedSchema.omit({ revoked_operator_passkeys: true });
    const read = earlier.parse(decodeCbor(encodeCbor(toPersisted(reopened.state))));
    expect(read.operator_passkeys).toEqual({});
    expect(read).not.toHaveProperty("revoked_operator_passkeys");
  });

  it("a revoked operator key is sealed apart from the enrolled ones, across a reopen: read as an earlier release reads the state, it is not enrolled", async () => {
    const store = await open(path, key);
    const operatorKey = { publicKey: `0x04${"33".repeat(64)}`, label: "laptop", lastCounter: 4 };
    await store.commit((state) => state.operatorKeys.set("op-laptop", operatorKey));
    const revoked = { publicKey: operatorKey.publicKey, revokedAtMs: 5678 };
    await store.commit((state) => {
      state.operatorKeys.delete("op-laptop");
      state.revokedOperatorKeys.set("op-laptop", revoked);
    });
    await store.close();
    const reopened = await open(path, key);
    expect(reopened.state.revokedOperatorKeys.get("op-laptop")).toEqual(revoked);
    expect(reopened.state.operatorKeys.has("op-laptop")).toBe(false);
    const earlier = persistedSchema.omit({ revoked_operator_keys: true });
    const read = earlier.parse(decodeCbor(encodeCbor(toPersisted(reopened.state))));
    expect(read.operator_keys).toEqual({});
    expect(read).not.toHaveProperty("revoked_operator_keys");
  });

  it("the node's freeze epoch is sealed; a state of the release before it, frozen, reads as epoch 0 and stays frozen", async () => {
    const store = await open(path, key);
    await store.commit((state) => {
      state.nodeFrozen = true;
      state.nodeFreezeEpoch = 5;
    });
    await store.close();
    const sealed = await open(path, key);
    expect(sealed.state.nodeFreezeEpoch).toBe(5);
    // The same state as the release before writes it: without the field.
    const earlier: Record<string, unknown> = { ...toPersisted(sealed.state) };
    delete earlier.node_freeze_epoch;
    await sealed.close();
    const { slots } = await StateSlots.open(path, key);
    await slots.write(encodeCbor(earlier), 99n);
    await slots.close();
    const upgraded = await open(path, key);
    expect(upgraded.state).toMatchObject({ nodeFrozen: true, nodeFreezeEpoch: 0 });
    await upgraded.commit((state) => {
      state.nodeFreezeEpoch = 3;
    });
    await upgraded.close();
    expect((await open(path, key)).state).toMatchObject({ nodeFrozen: true, nodeFreezeEpoch: 3 });
  });

  it("applies a change to memory at once, before it is durable", async () => {
    const store = await open(path, key);
    const done = store.commit((state) => state.counters.set("x", 1));
    expect(store.state.counters.get("x")).toBe(1);
    await done;
  });

  it("coalesces concurrent commits into few writes, each resolved only after a write that includes it", async () => {
    const store = await open(path, key);
    const writes = vi.spyOn(StateSlots.prototype, "write");
    await Promise.all(
      Array.from({ length: 50 }, (_, index) => store.commit((state) => state.counters.set(`c${index}`, 1))),
    );
    expect(writes.mock.calls.length).toBeGreaterThanOrEqual(1);
    expect(writes.mock.calls.length).toBeLessThanOrEqual(2);
    const reopened = await open(path, key);
    expect(reopened.state.counters.size).toBe(50);
  });

  it("rejects waiters with SealError when the write fails", async () => {
    const store = await open(path, key);
    // A fake for a fault the disk cannot be made to produce here.
    vi.spyOn(StateSlots.prototype, "write").mockRejectedValueOnce(new Error("disk full"));
    await expect(store.commit((state) => state.counters.set("y", 1))).rejects.toBeInstanceOf(SealError);
  });

  it("refuses a state file sealed under another key or tampered with", async () => {
    const store = await open(path, key);
    await store.commit((state) => state.counters.set("z", 1));
    await expect(StateStore.open(path, generateSealingKey())).rejects.toBeInstanceOf(SealError);
    const blob = await readFile(path.slots[0]);
    blob[blob.length - 1]! ^= 1;
    await writeFile(path.slots[0], blob);
    await expect(StateStore.open(path, key)).rejects.toBeInstanceOf(SealError);
  });

  it("keeps its state in private files, a slot and the journal, and nothing else", async () => {
    const store = await open(path, key);
    await store.commit((state) => state.counters.set("w", 1));
    await store.commit((state) => state.counters.set("w", 2));
    await store.close();
    expect((await readdir(dir)).sort()).toEqual(["state.0.sealed", "state.journal"]);
    for (const file of [path.slots[0], path.journal]) expect((await stat(file)).mode & 0o777).toBe(0o600);
  });
});
