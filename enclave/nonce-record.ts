/**
 * The nonces each key signed a transaction at (sign_transfer, sign_faucet, sign_settlement), and
 * the nonces a filler was signed at, so sign_filler fills only a nonce that holds a transaction of
 * ours, once (docs/enclave.md#fillers-and-the-nonce-record). The record is sealed state, written
 * with every group of signatures, so it is kept small and bounded: per key a window of recent
 * nonces in at most a few dozen ranges, and only for keys that signed in the retention period.
 * Pure functions over the in-memory record; state-store.ts persists it.
 */
import { TrackedMap } from "./tracked-map.ts";

/** Nonces more than this far below a key's highest signed nonce are forgotten. */
export const NONCE_WINDOW = 16_384;
/** Ranges of signed nonces kept per key; past it, the lowest are forgotten. */
export const MAX_NONCE_RANGES = 64;
/** Filled nonces kept per key; past it, the lowest are forgotten (with every nonce below it). */
export const MAX_FILLED_NONCES = 64;
/** A key's record is dropped this long after the last transaction it signed. */
export const NONCE_RECORD_RETENTION_MS = 86_400_000;
/** Stale keys are looked for at most this often (a pass reads every key's record). */
export const NONCE_PRUNE_INTERVAL_MS = 3_600_000;

export type KeyNonces = {
  /** The enclave's clock (ms) when the key last signed a transaction. */
  lastSignedMs: number;
  /**
   * Below it nothing is known (neither whether a transaction nor whether a filler was signed),
   * so a filler there is refused. It only rises.
   */
  floor: number;
  /** Nonces signed at, as ascending, disjoint, non-adjacent inclusive ranges [first, last]. */
  signed: Array<[number, number]>;
  /** Nonces a filler was signed at, ascending; each is also in `signed`. */
  filled: number[];
};

export type NonceRecords = {
  /** The enclave's clock (ms) at the last pass that dropped stale keys. */
  prunedAtMs: number;
  keys: TrackedMap<string, KeyNonces>;
};

/** An empty record (a new enclave, or one upgraded from a version that kept none). */
export function emptyNonceRecords(): NonceRecords {
  return { prunedAtMs: 0, keys: new TrackedMap() };
}

/**
 * Records that `keyRef` signed a transaction at `nonce` (a safe integer). Also drops, at most once
 * per NONCE_PRUNE_INTERVAL_MS, the keys that signed nothing within NONCE_RECORD_RETENTION_MS.
 */
export function recordSignedNonce(records: NonceRecords, keyRef: string, nonce: number, nowMs: number): void {
  if (nowMs - records.prunedAtMs >= NONCE_PRUNE_INTERVAL_MS) {
    for (const [key, record] of records.keys) {
      if (nowMs - record.lastSignedMs >= NONCE_RECORD_RETENTION_MS) records.keys.delete(key);
    }
    records.prunedAtMs = nowMs;
  }
  let record = records.keys.get(keyRef);
  if (!record) {
    record = { lastSignedMs: nowMs, floor: 0, signed: [], filled: [] };
    records.keys.set(keyRef, record);
  }
  // A clock that went back keeps the later time: the record is kept no shorter.
  record.lastSignedMs = Math.max(record.lastSignedMs, nowMs);
  if (nonce < record.floor) return;
  insertNonce(record.signed, nonce);
  raiseFloor(record, record.signed.at(-1)![1] - NONCE_WINDOW + 1);
  if (record.signed.length > MAX_NONCE_RANGES) {
    raiseFloor(record, record.signed[record.signed.length - MAX_NONCE_RANGES]![0]);
  }
}

/** Why a filler of `keyRef` at `nonce` may not be signed, or null when it may. */
export function fillerRefusal(
  records: NonceRecords,
  keyRef: string,
  nonce: number,
): "filler_nonce" | "filler_repeat" | null {
  const record = records.keys.get(keyRef);
  if (!record || nonce < record.floor) return "filler_nonce";
  if (!record.signed.some(([first, last]) => first <= nonce && nonce <= last)) return "filler_nonce";
  if (record.filled.includes(nonce)) return "filler_repeat";
  return null;
}

/** Records a filler of `keyRef` at `nonce`, which fillerRefusal allowed. */
export function recordFilledNonce(records: NonceRecords, keyRef: string, nonce: number): void {
  const record = records.keys.get(keyRef);
  if (!record) return;
  const at = record.filled.findIndex((filled) => filled > nonce);
  record.filled.splice(at === -1 ? record.filled.length : at, 0, nonce);
  if (record.filled.length > MAX_FILLED_NONCES) {
    raiseFloor(record, record.filled[record.filled.length - MAX_FILLED_NONCES]!);
  }
}

/** Adds `nonce` to ascending, disjoint, non-adjacent ranges, merging neighbours. */
function insertNonce(ranges: Array<[number, number]>, nonce: number): void {
  const last = ranges.at(-1);
  // The usual case: the next nonce of the key.
  if (!last || nonce > last[1] + 1) {
    ranges.push([nonce, nonce]);
    return;
  }
  if (nonce === last[1] + 1) {
    last[1] = nonce;
    return;
  }
  let index = 0;
  while (ranges[index]![1] < nonce - 1) index++;
  const range = ranges[index]!;
  if (nonce < range[0] - 1) {
    ranges.splice(index, 0, [nonce, nonce]);
    return;
  }
  range[0] = Math.min(range[0], nonce);
  range[1] = Math.max(range[1], nonce);
  const next = ranges[index + 1];
  if (next && next[0] <= range[1] + 1) {
    range[1] = Math.max(range[1], next[1]);
    ranges.splice(index + 1, 1);
  }
}

/** Forgets everything below `floor` (when it is above the record's floor). */
function raiseFloor(record: KeyNonces, floor: number): void {
  if (floor <= record.floor) return;
  record.floor = floor;
  record.signed = record.signed.filter(([, last]) => last >= floor);
  const first = record.signed[0];
  if (first && first[0] < floor) first[0] = floor;
  record.filled = record.filled.filter((nonce) => nonce >= floor);
}
