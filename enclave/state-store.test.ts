import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { dataDirLayout } from "./data-dir.ts";
import { generateSealingKey, SealError } from "./sealing.ts";
import { type StateSlotPaths, StateSlots } from "./state-slots.ts";
import { StateStore } from "./state-store.ts";

describe("StateStore (sealed, group commit)", () => {
  let dir: string;
  let path: StateSlotPaths;
  const key = generateSealingKey();

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "state-store-"));
    path = dataDirLayout(dir).state;
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await rm(dir, { recursive: true, force: true });
  });

  it("starts empty and persists counters, policy and its version, treasury and daily spend across a reopen", async () => {
    const store = await StateStore.open(path, key);
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
    };
    await store.commit((state) => {
      state.counters.set("k", 3);
      state.policy = policy;
      state.policyVersion = 4;
      state.treasury = { faucetKeyRef: "ab".repeat(32), budgetUnits: 10n ** 30n, spentUnits: 5n };
      state.daily = { day: "2025-01-01", spent: new Map([["cd".repeat(32), 42n]]) };
    });
    const reopened = await StateStore.open(path, key);
    expect(reopened.state.counters.get("k")).toBe(3);
    expect(reopened.state.policy).toEqual(policy);
    expect(reopened.state.policyVersion).toBe(4);
    expect(reopened.state.treasury).toEqual({
      faucetKeyRef: "ab".repeat(32),
      budgetUnits: 10n ** 30n,
      spentUnits: 5n,
    });
    expect(reopened.state.daily.spent.get("cd".repeat(32))).toBe(42n);
  });

  it("applies a change to memory at once, before it is durable", async () => {
    const store = await StateStore.open(path, key);
    const done = store.commit((state) => state.counters.set("x", 1));
    expect(store.state.counters.get("x")).toBe(1);
    await done;
  });

  it("coalesces concurrent commits into few writes, each resolved only after a write that includes it", async () => {
    const store = await StateStore.open(path, key);
    const writes = vi.spyOn(StateSlots.prototype, "write");
    await Promise.all(
      Array.from({ length: 50 }, (_, index) => store.commit((state) => state.counters.set(`c${index}`, 1))),
    );
    expect(writes.mock.calls.length).toBeGreaterThanOrEqual(1);
    expect(writes.mock.calls.length).toBeLessThanOrEqual(2);
    const reopened = await StateStore.open(path, key);
    expect(reopened.state.counters.size).toBe(50);
  });

  it("rejects waiters with SealError when the write fails", async () => {
    const store = await StateStore.open(path, key);
    // A fake for a fault the disk cannot be made to produce here.
    vi.spyOn(StateSlots.prototype, "write").mockRejectedValueOnce(new Error("disk full"));
    await expect(store.commit((state) => state.counters.set("y", 1))).rejects.toBeInstanceOf(SealError);
  });

  it("refuses a state file sealed under another key or tampered with", async () => {
    const store = await StateStore.open(path, key);
    await store.commit((state) => state.counters.set("z", 1));
    await expect(StateStore.open(path, generateSealingKey())).rejects.toBeInstanceOf(SealError);
    const blob = await readFile(path.slots[0]);
    blob[blob.length - 1]! ^= 1;
    await writeFile(path.slots[0], blob);
    await expect(StateStore.open(path, key)).rejects.toBeInstanceOf(SealError);
  });

  it("keeps its state in private slot files, and nothing else", async () => {
    const store = await StateStore.open(path, key);
    await store.commit((state) => state.counters.set("w", 1));
    await store.commit((state) => state.counters.set("w", 2));
    await store.close();
    expect((await readdir(dir)).sort()).toEqual(["state.0.sealed", "state.1.sealed"]);
    for (const slot of path.slots) expect((await stat(slot)).mode & 0o777).toBe(0o600);
  });
});
