/**
 * What the tracker and the filler ask of the domains, handed to the outbox with the followers
 * (followers.ts) by the composition root, so the outbox names no domain table:
 *   - sweeps the tracker runs on each of its sweeps (money ends the agent actions nobody finished);
 *   - who holds the keys of the senders the outbox does not know (the agent wallets, whose keys the
 *     identity rows name), for the filler to sign with;
 *   - the domain's rows for a filler, written in the transaction that stores it (money shows the
 *     agent a filler its wallet pays for, and counts its fee against the agent's daily limit).
 */
import type { Db } from "../db/client.ts";

/** A domain's sweep: ends what was left behind; resolves with how many rows it ended. */
export type TrackerSweep = {
  name: string;
  run(db: Db, options: { abandonAfterMs?: number | undefined }): Promise<number>;
};

/** The enclave key ref of each of `addresses` the domain knows (absent: not its sender). */
export type SenderKeyResolver = (db: Db, addresses: readonly string[]) => Promise<Map<string, string>>;

/** A filler the outbox stored, for the domain that owns its sender. */
export type StoredFiller = {
  sender: string;
  nonce: bigint;
  txId: string;
  txHash: string;
  /** Its most possible fee, in wei. */
  maxCostWei: bigint;
  /** The stuck transaction it may replace. */
  replacedTxId: string;
};

/** Writes a domain's rows for a filler in the filler's own transaction (`tx`); nothing for another's sender. */
export type FillerRecorder = (tx: Db, filler: StoredFiller) => Promise<void>;

/** What the domains hand the outbox for its tracker and fillers (outbox.ts createOutbox). */
export type TrackerHooks = {
  /** Run in this order on each of the tracker's sweeps. */
  sweeps: readonly TrackerSweep[];
  /** Asked in this order; the first that knows an address names its key. */
  senderKeys: readonly SenderKeyResolver[];
  /** Each writes its domain's rows for a filler, in the filler's transaction. */
  fillerRecorders: readonly FillerRecorder[];
};

/** Writes every domain's rows for a filler, in its transaction. */
export async function recordFiller(hooks: TrackerHooks, tx: Db, filler: StoredFiller): Promise<void> {
  for (const record of hooks.fillerRecorders) await record(tx, filler);
}

/** Runs every sweep, in order; the rows they ended, together. */
export async function runTrackerSweeps(
  hooks: TrackerHooks,
  db: Db,
  options: { abandonAfterMs?: number | undefined },
): Promise<number> {
  let ended = 0;
  for (const sweep of hooks.sweeps) ended += await sweep.run(db, options);
  return ended;
}

/** The key refs of `addresses` the domains know. */
export async function resolveSenderKeys(
  hooks: TrackerHooks,
  db: Db,
  addresses: readonly string[],
): Promise<Map<string, string>> {
  const keys = new Map<string, string>();
  for (const resolve of hooks.senderKeys) {
    for (const [address, keyRef] of await resolve(db, addresses))
      if (!keys.has(address)) keys.set(address, keyRef);
  }
  return keys;
}
