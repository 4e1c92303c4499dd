import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { emptyUsage } from "./agent-usage.ts";
import { dataDirLayout } from "./data-dir.ts";
import type { EnclaveState } from "./enclave-state.ts";
import { recordFilledNonce, recordSignedNonce } from "./nonce-record.ts";
import { generateSealingKey, SealError } from "./sealing.ts";
import { StateJournal } from "./state-journal.ts";
import { StateSlots } from "./state-slots.ts";
import { type StatePaths, StateStore, type StateStoreOptions } from "./state-store.ts";
import { toPersisted } from "./state-wire.ts";
import { TrackedMap } from "./tracked-map.ts";

const keyRef = (index: number): string => index.toString(16).padStart(64, "0");
const address = (index: number): string => `0x${index.toString(16).padStart(40, "0")}`;
const subject = (index: number): string => `0x${index.toString(16).padStart(64, "0")}`;
/** Where the journal record at `offset` ends (sequence 8 bytes, length 4, then the sealed blob). */
const recordEnd = (file: Buffer, offset: number): number => offset + 12 + file.readUInt32BE(offset + 8);

/** A small deterministic PRNG (mulberry32), so a failing sequence of changes can be run again. */
function random(seed: number): (below: number) => number {
  let state = seed;
  return (below) => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * below);
  };
}

/** One change of the kinds the ops make, to any of the journal's maps or to the rest of the state. */
function randomChange(next: (below: number) => number, step: number): (state: EnclaveState) => void {
  const key = keyRef(next(40));
  const day = `2026-12-${String(1 + Math.floor(step / 60)).padStart(2, "0")}`;
  const changes: Array<(state: EnclaveState) => void> = [
    (state) => state.x402Daily.signed.set(key, (state.x402Daily.signed.get(key) ?? 0) + 1),
    (state) => {
      if (state.daily.day !== day) state.daily = { day, spent: new TrackedMap() };
      state.daily.spent.set(key, (state.daily.spent.get(key) ?? 0n) + BigInt(next(1000)));
    },
    (state) => {
      if (state.x402Daily.day !== day) state.x402Daily = { day, signed: new TrackedMap() };
    },
    // Pruning after a day: every key's record is read, the stale ones deleted.
    (state) => recordSignedNonce(state.nonces, key, next(50), 1_000_000 + step * 1_000_000 * next(3)),
    (state) => recordFilledNonce(state.nonces, key, next(50)),
    (state) => {
      const record = state.agentPolicies.get(key);
      if (record) record.usage.transfers.dayCount += 1;
      else
        state.agentPolicies.set(key, {
          document: null,
          policy: null,
          version: 1,
          usage: emptyUsage(day, "2026-12"),
        });
    },
    (state) => {
      const usage = state.agentPolicies.get(key)?.usage;
      usage?.x402.payeeDayUnits.set(address(next(5)), BigInt(next(1000)));
    },
    (state) => state.agentPolicies.delete(key),
    (state) =>
      state.faucetPayouts.set(address(next(40)), { lastPayoutMs: step, day, unitsToday: BigInt(next(1000)) }),
    (state) => {
      for (const [recipient, paid] of state.faucetPayouts)
        if (paid.lastPayoutMs < step - 50) state.faucetPayouts.delete(recipient);
    },
    (state) => state.faucetPayouts.clear(),
    (state) => state.counters.set(`authority:env:scope:op${next(5)}`, step + 1),
    (state) => {
      state.nodeFrozen = !state.nodeFrozen;
    },
    (state) => state.heldApprovals.set(subject(next(5)), step),
    (state) => state.heldApprovals.delete(subject(next(5))),
  ];
  return changes[next(changes.length)]!;
}

describe("StateStore's journal (what a write holds, and what a reopen reads)", () => {
  let dir: string;
  let path: StatePaths;
  const key = generateSealingKey();
  const opened: StateStore[] = [];

  const open = async (options: StateStoreOptions = {}): Promise<StateStore> => {
    const store = await StateStore.open(path, key, options);
    opened.push(store);
    return store;
  };
  /** Closes `store` (as a stop would) and opens the state again. */
  const reopen = async (store: StateStore, options: StateStoreOptions = {}): Promise<StateStore> => {
    await store.close();
    opened.splice(opened.indexOf(store), 1);
    return open(options);
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "state-store-journal-"));
    path = dataDirLayout(dir).state;
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const store of opened.splice(0)) await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("writes a group's changes, not the whole state: with 2,000 keys counted today, counting one more leaves the full copy alone and appends under 1 kB", async () => {
    const store = await open();
    await store.commit((state) => {
      for (let index = 0; index < 2_000; index++) state.x402Daily.signed.set(keyRef(index), 1);
    });
    const fullCopy = await readFile(path.slots[0]);
    expect(fullCopy.length).toBeGreaterThan(100_000);

    await store.commit((state) => state.x402Daily.signed.set(keyRef(7), 2));
    expect(await readFile(path.slots[0])).toEqual(fullCopy);
    const journal = await readFile(path.journal);
    expect(recordEnd(journal, 0)).toBeLessThan(1_024);
    const reopened = await reopen(store);
    expect(reopened.state.x402Daily.signed.get(keyRef(7))).toBe(2);
    expect(reopened.state.x402Daily.signed.size).toBe(2_000);
  });

  it("a reopen reads the full copy and the records after it: 600 random changes in groups, reopened at random, equal the state in memory each time", async () => {
    const next = random(44);
    let store = await open();
    for (let step = 0; step < 600; ) {
      // A group: the changes of one turn share one write.
      const group = Array.from({ length: 1 + next(6) }, () => store.commit(randomChange(next, step++)));
      await Promise.all(group);
      if (next(10) === 0) {
        const expected = toPersisted(store.state);
        store = await reopen(store);
        expect(toPersisted(store.state), `after step ${step}`).toEqual(expected);
      }
    }
    const expected = toPersisted(store.state);
    expect(toPersisted((await reopen(store)).state)).toEqual(expected);
  });

  it("writes a full copy when the journal is full, the records after it from the start; a reopen reads the newest state", async () => {
    const fullCopies = vi.spyOn(StateSlots.prototype, "write");
    let store = await open();
    let rounds = 0;
    while (fullCopies.mock.calls.length < 3 && rounds < 100) {
      // About 40 kB a record: 400 new keys' nonce records.
      const first = rounds * 400;
      await store.commit((state) => {
        for (let index = first; index < first + 400; index++)
          recordSignedNonce(state.nonces, keyRef(index), 7, 1);
      });
      rounds++;
      // Some records after a full copy are read by a reopen, some by the store that wrote them.
      if (rounds % 4 === 0) {
        const expected = toPersisted(store.state);
        store = await reopen(store);
        expect(toPersisted(store.state), `after round ${rounds}`).toEqual(expected);
      }
    }
    // The first write of a new state is a full copy, and so were two more, when the journal was full.
    expect(fullCopies).toHaveBeenCalledTimes(3);
    store = await reopen(store);
    expect(store.state.nonces.keys.size).toBe(rounds * 400);
  });

  it("after a failed write writes a full copy next, with the failed group's change, and a reopen has both", async () => {
    const store = await open();
    await store.commit((state) => state.x402Daily.signed.set(keyRef(1), 1));
    // A fake for a fault the disk cannot be made to produce here: the next append fails.
    vi.spyOn(StateJournal.prototype, "append").mockRejectedValueOnce(new Error("EIO"));
    await expect(store.commit((state) => state.x402Daily.signed.set(keyRef(2), 1))).rejects.toBeInstanceOf(
      SealError,
    );
    const fullCopies = vi.spyOn(StateSlots.prototype, "write");
    await store.commit((state) => state.x402Daily.signed.set(keyRef(3), 1));
    expect(fullCopies).toHaveBeenCalledTimes(1);
    const reopened = await reopen(store);
    expect([...reopened.state.x402Daily.signed.keys()].sort()).toEqual([keyRef(1), keyRef(2), keyRef(3)]);
  });

  it("a record torn by a crash loses its own group alone; the next write goes over it", async () => {
    const store = await open();
    await store.commit((state) => state.x402Daily.signed.set(keyRef(1), 1));
    await store.commit((state) => state.x402Daily.signed.set(keyRef(2), 1));
    await store.commit((state) => state.x402Daily.signed.set(keyRef(3), 1));
    await store.close();
    opened.splice(opened.indexOf(store), 1);
    // What a crash in the middle of the third group's write leaves: the file is made with zeros,
    // so the record's second half reads as zeros. (One zeroed byte would not do: one time in 256
    // the byte written was zero, and the record was whole.)
    const journal = await readFile(path.journal);
    const third = recordEnd(journal, 0);
    const end = recordEnd(journal, third);
    journal.fill(0, end - Math.floor((end - third - 12) / 2), end);
    await writeFile(path.journal, journal);

    const reopened = await open();
    expect([...reopened.state.x402Daily.signed.keys()]).toEqual([keyRef(1), keyRef(2)]);
    await reopened.commit((state) => state.x402Daily.signed.set(keyRef(4), 1));
    expect([...(await reopen(reopened)).state.x402Daily.signed.keys()]).toEqual([
      keyRef(1),
      keyRef(2),
      keyRef(4),
    ]);
  });

  it("verifyJournal fails a write whose change its maps did not see (a value held from before the commit), which a reopen would lose", async () => {
    for (const verifyJournal of [true, false]) {
      const store = await open({ verifyJournal });
      await store.commit((state) => recordSignedNonce(state.nonces, keyRef(1), 3, 1));
      await store.commit((state) => state.counters.set("k", 1));
      const held = store.state.nonces.keys.get(keyRef(1))!;
      const write = store.commit(() => {
        held.floor = 2;
      });
      if (verifyJournal) {
        await expect(write).rejects.toThrow(
          "the state journal's record does not reproduce the state in memory",
        );
        // The failed write is followed by a full copy, which holds the change.
        await store.commit((state) => state.counters.set("k", 2));
        expect((await reopen(store)).state.nonces.keys.get(keyRef(1))?.floor).toBe(2);
      } else {
        await write;
        expect((await reopen(store)).state.nonces.keys.get(keyRef(1))?.floor).toBe(0);
      }
      for (const store of opened.splice(0)) await store.close();
      await rm(dir, { recursive: true, force: true });
      dir = await mkdtemp(join(tmpdir(), "state-store-journal-"));
      path = dataDirLayout(dir).state;
    }
  });
});
