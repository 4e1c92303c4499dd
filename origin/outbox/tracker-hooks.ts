/**
 * What the tracker and the filler ask of the domains, handed to the outbox with the followers
 * (followers.ts) by the composition root, so the outbox names no domain table:
 *   - sweeps the tracker runs on each of its sweeps (money ends the agent actions nobody finished);
 *   - who holds the keys of the senders the outbox does not know (the agent wallets, whose keys the
 *     identity rows name), for the filler to sign with;
 *   - the domain's rows for a filler, written in the statement that stores it (money shows the
 *     agent a filler its wallet pays for, and counts its fee against the agent's daily limit).
 */
import type { SQL } from "drizzle-orm";
import type { Db } from "../db/client.ts";

/** A domain's sweep: ends what was left behind; resolves with how many rows it ended. */
export type TrackerSweep = {
  name: string;
  run(db: Db, options: { abandonAfterMs?: number | undefined }): Promise<number>;
};

/** The enclave key ref of each of `addresses` the domain knows (absent: not its sender). */
export type SenderKeyResolver = (db: Db, addresses: readonly string[]) => Promise<Map<string, string>>;

/** What a domain writes for a filler, in the statement that stores it (compose.ts hands them in). */
export type FillerRows = {
  /** Its columns of each signed filler in `signed` (`name type, ...`). */
  signedColumns: SQL;
  /**
   * Its values of those columns for a filler of `sender` at `nonce` that may cost `maxCostWei`,
   * its fee counted by the enclave on `countedOn` (null: an enclave that does not say).
   */
  row(filler: {
    sender: string;
    nonce: bigint;
    maxCostWei: bigint;
    countedOn: string | null;
  }): Record<string, unknown>;
  /** Its CTEs of the store statement, each a data-modifying one reading `signed` and `stored`. */
  ctes: ReadonlyArray<{ name: string; sql: SQL }>;
};

/** What the domains hand the outbox for its tracker and fillers (outbox.ts createOutbox). */
export type TrackerHooks = {
  /** Run in this order on each of the tracker's sweeps. */
  sweeps: readonly TrackerSweep[];
  /** Asked in this order; the first that knows an address names its key. */
  senderKeys: readonly SenderKeyResolver[];
  /** Each domain's rows for a filler, in the statement that stores it (fillers.ts). */
  fillerRows: readonly FillerRows[];
};

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
