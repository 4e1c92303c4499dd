/**
 * Whether the enclave in use holds the keys the database assigns to agents. An enclave initialised
 * afresh beside an existing database (its data folder lost, a new host) answers every signing
 * request for those wallets with "no such key"; this notices it before anyone is told the service
 * is healthy. Read-only (`public_identity`, no capability), so it runs even while identity proofs
 * are dormant.
 */
import { asc, desc, eq } from "drizzle-orm";
import type { Db } from "../db/client.ts";
import { agentIdentities } from "../db/schema.ts";
import type { SignerClient } from "./types.ts";

/** What an operator does about a missing key: the same words at start, in /healthz and the launcher. */
export const RESTORE_KEYS_INSTRUCTION =
  'the enclave does not hold the keys this database assigns to its agents (it was initialised afresh, or is another enclave): nothing was changed. Restore the keys from the backups with the recovery runbook (docs/operations.md, "Disaster recovery") before serving traffic';

export type KeyHoldingReport = {
  /** Assigned keys asked about: the oldest and the newest identity's (0 with no identity yet). */
  checked: number;
  /** Of those, keys the enclave answered it does not hold, or holds under another address. */
  missing: number;
  /** True when every checked key is held; false when one is missing or the enclave did not answer. */
  ok: boolean;
  /** The signer failure's code when the enclave could not be asked. */
  error?: string;
  instruction?: string;
};

export type KeyLookup = SignerClient["publicIdentity"];

/**
 * Asks the enclave for the oldest and the newest assigned key (of identities not revoked): a lost
 * enclave misses all of them, and two reads keep /healthz cheap however many agents there are. The
 * start asks one key of every batch instead (batch-holding.ts), which finds a batch a recovery
 * left out between them.
 */
export async function checkAssignedKeysHeld(db: Db, lookup: KeyLookup): Promise<KeyHoldingReport> {
  // A revoked identity's token never works again: revoking is how a node lets go of a batch whose
  // every backup is lost (batch-holding.ts), so its key is not asked for.
  const live = eq(agentIdentities.revoked, false);
  const columns = { keyRef: agentIdentities.agentTransferKeyRef, wallet: agentIdentities.assignedWallet };
  const [oldest, newest] = await Promise.all([
    db.select(columns).from(agentIdentities).where(live).orderBy(asc(agentIdentities.createdAt)).limit(1),
    db.select(columns).from(agentIdentities).where(live).orderBy(desc(agentIdentities.createdAt)).limit(1),
  ]);
  const keys = distinctKeyRefs([...oldest, ...newest]);
  let missing = 0;
  for (const key of keys) {
    const answer = await lookup({ keyRef: key.keyRef });
    if (answer.ok) {
      if (answer.value.address.toLowerCase() !== key.wallet.toLowerCase()) missing++;
      continue;
    }
    if (answer.error.code === "key_purpose_mismatch") {
      missing++;
      continue;
    }
    return { checked: keys.length, missing, ok: false, error: answer.error.code };
  }
  return missing === 0
    ? { checked: keys.length, missing, ok: true }
    : { checked: keys.length, missing, ok: false, instruction: RESTORE_KEYS_INSTRUCTION };
}

/** `rows` with each key ref once, the first row of each kept (the oldest and the newest may be one). */
export function distinctKeyRefs<Row extends { keyRef: string }>(rows: readonly Row[]): Row[] {
  return rows.filter((row, index) => rows.findIndex((other) => other.keyRef === row.keyRef) === index);
}
