import { describe, expect, it } from "vitest";
import {
  emptyNonceRecords,
  fillerRefusal,
  MAX_FILLED_NONCES,
  MAX_NONCE_RANGES,
  NONCE_PRUNE_INTERVAL_MS,
  NONCE_RECORD_RETENTION_MS,
  NONCE_WINDOW,
  type NonceRecords,
  recordFilledNonce,
  recordSignedNonce,
} from "./nonce-record.ts";

const KEY = "ab".repeat(32);
const OTHER = "cd".repeat(32);
const T0 = 1_750_000_000_000;

function signedAt(nonces: number[], records: NonceRecords = emptyNonceRecords()): NonceRecords {
  for (const nonce of nonces) recordSignedNonce(records, KEY, nonce, T0);
  return records;
}

describe("the nonce record sign_filler checks", () => {
  it("keeps signed nonces as merged ranges, whatever the order they come in", () => {
    const cases: Array<[number[], Array<[number, number]>]> = [
      [[0, 1, 2, 3], [[0, 3]]],
      [
        [5, 7, 9],
        [
          [5, 5],
          [7, 7],
          [9, 9],
        ],
      ],
      [[5, 7, 6], [[5, 7]]],
      [[9, 7, 5, 8, 6], [[5, 9]]],
      [[3, 3, 3], [[3, 3]]],
      [
        [10, 2, 11, 1],
        [
          [1, 2],
          [10, 11],
        ],
      ],
      [[4, 2, 3], [[2, 4]]],
    ];
    // Mutation: not merging a nonce that joins two ranges (5, 7, 6) fails this.
    for (const [nonces, ranges] of cases) {
      expect(signedAt(nonces).keys.get(KEY)?.signed, nonces.join(",")).toEqual(ranges);
    }
  });

  it("allows a filler only at a signed nonce, once", () => {
    const records = signedAt([3, 4, 5, 9]);
    expect(fillerRefusal(records, KEY, 4)).toBeNull();
    // Mutation: not checking that a transaction was signed at the nonce fails this.
    expect(fillerRefusal(records, KEY, 6)).toBe("filler_nonce");
    expect(fillerRefusal(records, KEY, 2)).toBe("filler_nonce");
    expect(fillerRefusal(records, OTHER, 4)).toBe("filler_nonce");
    recordFilledNonce(records, KEY, 4);
    // Mutation: not checking the filled nonces fails this.
    expect(fillerRefusal(records, KEY, 4)).toBe("filler_repeat");
    // A transaction signed again at a filled nonce does not make room for a second filler.
    recordSignedNonce(records, KEY, 4, T0);
    expect(fillerRefusal(records, KEY, 4)).toBe("filler_repeat");
    expect(fillerRefusal(records, KEY, 5)).toBeNull();
  });

  it("forgets nonces more than the window below the key's highest, and never learns them again", () => {
    // Mutation: not raising the floor by the window fails this.
    const records = signedAt([0, 1, 2]);
    recordSignedNonce(records, KEY, NONCE_WINDOW + 1, T0);
    const record = records.keys.get(KEY)!;
    expect(record.floor).toBe(2);
    expect(fillerRefusal(records, KEY, 1)).toBe("filler_nonce");
    expect(fillerRefusal(records, KEY, 2)).toBeNull();
    recordSignedNonce(records, KEY, 1, T0);
    expect(fillerRefusal(records, KEY, 1)).toBe("filler_nonce");
    // Nor does the record grow with nonces below its floor (the ranges' bound rests on it).
    // Mutation: recording a nonce below the floor fails this.
    expect(record.signed).toEqual([
      [2, 2],
      [NONCE_WINDOW + 1, NONCE_WINDOW + 1],
    ]);
  });

  it("keeps at most MAX_NONCE_RANGES ranges and MAX_FILLED_NONCES fillers per key, forgetting the lowest", () => {
    // Mutations: not capping the ranges, or the fillers, fails this.
    const everyOther = Array.from({ length: MAX_NONCE_RANGES + 10 }, (_, index) => index * 2);
    const records = signedAt(everyOther);
    const record = records.keys.get(KEY)!;
    expect(record.signed).toHaveLength(MAX_NONCE_RANGES);
    expect(record.floor).toBe(20);
    expect(fillerRefusal(records, KEY, 18)).toBe("filler_nonce");
    expect(fillerRefusal(records, KEY, 20)).toBeNull();

    const dense = signedAt(Array.from({ length: MAX_FILLED_NONCES + 5 }, (_, index) => index));
    for (let nonce = 0; nonce < MAX_FILLED_NONCES + 5; nonce++) recordFilledNonce(dense, KEY, nonce);
    const filled = dense.keys.get(KEY)!;
    expect(filled.filled).toHaveLength(MAX_FILLED_NONCES);
    // A filled nonce that was forgotten is below the floor: still refused, never filled twice.
    expect(filled.floor).toBe(5);
    expect(fillerRefusal(dense, KEY, 4)).toBe("filler_nonce");
    expect(fillerRefusal(dense, KEY, 5)).toBe("filler_repeat");
  });

  it("drops a key's record once it signed nothing for the retention period, looking at most once per interval", () => {
    const records = emptyNonceRecords();
    recordSignedNonce(records, KEY, 1, T0);
    const lastPass = T0 + NONCE_RECORD_RETENTION_MS - 60_000;
    recordSignedNonce(records, OTHER, 1, lastPass);
    // Past KEY's retention, but within the interval since the last pass: nothing is looked at.
    recordSignedNonce(records, OTHER, 2, T0 + NONCE_RECORD_RETENTION_MS);
    expect(records.keys.has(KEY)).toBe(true);
    recordSignedNonce(records, OTHER, 3, lastPass + NONCE_PRUNE_INTERVAL_MS);
    // Mutation: never dropping a stale key keeps KEY's record.
    expect(records.keys.has(KEY)).toBe(false);
    expect(fillerRefusal(records, KEY, 1)).toBe("filler_nonce");
    expect(fillerRefusal(records, OTHER, 1)).toBeNull();
  });
});
