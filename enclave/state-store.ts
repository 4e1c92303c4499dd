/**
 * The enclave's mutable state (enclave-state.ts), sealed on disk as a full copy in one of two slot
 * files (state-slots.ts) followed by a journal of what each write changed since (state-journal.ts,
 * state-changes.ts); its on-disk versions are in state-versions.ts.
 *
 * Writes use group commit: a change is applied to memory at once (so checks that follow see it,
 * with no await in between), and its caller waits until a write that includes it is durable.
 * Concurrent signers therefore share one synchronized write instead of queueing one each, and no
 * signature leaves the enclave before the spend it counts is on disk. A group's write is a journal
 * record of the entries it touched; when the journal is full, after a failed write, and on the first
 * write of a state read from an older version, it is a full copy instead.
 */
import { isDeepStrictEqual } from "node:util";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { type EnclaveState, emptyState } from "./enclave-state.ts";
import { SealError } from "./sealing.ts";
import { applyChanges, ChangeTracker } from "./state-changes.ts";
import { journalBytesFor, StateJournal } from "./state-journal.ts";
import { type StateSlotPaths, StateSlots } from "./state-slots.ts";
import { type Persisted, parsePersisted, persistedSchema } from "./state-versions.ts";
import { fromPersisted, toPersisted } from "./state-wire.ts";
import { recordingChanges } from "./tracked-map.ts";

export type StatePaths = StateSlotPaths & { journal: string };

export type StateStoreOptions = {
  /**
   * After every journal record, apply it to a copy of the state as last written and compare the
   * result with the state in memory; a difference fails the write (seal_failed) before it is made.
   * For tests: it costs a full copy's encoding a write.
   */
  verifyJournal?: boolean;
};

type Waiter = { resolve: () => void; reject: (error: Error) => void };

export class StateStore {
  private pending: Waiter[] = [];
  private flushing: Promise<void> | null = null;
  private readonly changes: ChangeTracker;
  /** verifyJournal: the state as the files hold it, in wire form. */
  private shadow: Persisted | null;

  private constructor(
    private readonly slots: StateSlots,
    private readonly journal: StateJournal,
    readonly state: EnclaveState,
    /** The last sequence written or tried; none is used twice. */
    private sequence: bigint,
    /** The next write is a full copy: nothing was written yet, the last write failed, or an older version was read. */
    private needsFullCopy: boolean,
    verifyJournal: boolean,
  ) {
    this.changes = new ChangeTracker(state);
    this.shadow = verifyJournal ? wireCopy(state) : null;
  }

  /** Loads the sealed state (its full copy, then the journal's records after it), or starts empty. */
  static async open(
    paths: StatePaths,
    sealingKey: Uint8Array,
    options: StateStoreOptions = {},
  ): Promise<StateStore> {
    const { slots, plaintext, sequence } = await StateSlots.open(paths, sealingKey);
    const full = plaintext === null ? null : parsePersisted(plaintext);
    // Only a full copy of the current version can have records after it (see the v7 schema).
    const { journal, records } = await StateJournal.open(
      paths.journal,
      sealingKey,
      full?.current ? sequence : null,
    );
    let persisted = full?.persisted ?? null;
    if (persisted !== null && records.length > 0) {
      for (const record of records) persisted = applyChanges(persisted, record);
      const parsed = persistedSchema.safeParse(persisted);
      if (!parsed.success) throw new SealError("state journal does not parse");
      persisted = parsed.data;
    }
    return new StateStore(
      slots,
      journal,
      persisted === null ? emptyState() : fromPersisted(persisted),
      sequence + BigInt(records.length),
      !full?.current,
      options.verifyJournal ?? false,
    );
  }

  /**
   * Applies `change` to the in-memory state now and resolves once it is durable. On a failed
   * write the change stays applied in memory: counters and spends only ever err towards refusing.
   */
  commit(change: (state: EnclaveState) => void): Promise<void> {
    recordingChanges(() => change(this.state));
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ resolve, reject });
      // The write starts after this turn of the event loop, so every request read from the
      // socket in it (a batch of signatures) shares that write, not just the first of them.
      if (!this.flushing)
        this.flushing = new Promise((next) => setImmediate(next)).then(() => this.flushLoop());
    });
  }

  /** Waits for the writes in progress, then closes the files (for shutdown: no commit may follow). */
  async close(): Promise<void> {
    while (this.flushing) await this.flushing;
    await this.slots.close();
    await this.journal.close();
  }

  private async flushLoop(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending;
      this.pending = [];
      try {
        await this.write();
        for (const waiter of batch) waiter.resolve();
      } catch (cause) {
        this.needsFullCopy = true;
        const error = cause instanceof SealError ? cause : new SealError("state write failed", { cause });
        for (const waiter of batch) waiter.reject(error);
      }
    }
    this.flushing = null;
  }

  /**
   * Writes what changed since the last write. What is written is taken synchronously with the
   * batch's waiters: every change in it belongs to a waiter of this batch or of an earlier one.
   */
  private async write(): Promise<void> {
    this.sequence += 1n;
    const sequence = this.sequence;
    if (!this.needsFullCopy) {
      const record = this.changes.take(this.state);
      if (this.journal.fits(record.length)) {
        this.verify(record);
        await this.journal.append(record, sequence);
        return;
      }
    }
    const plaintext = encodeCbor(toPersisted(this.state));
    this.changes.written(this.state);
    if (this.shadow !== null) this.shadow = decodeCbor(plaintext) as Persisted;
    this.needsFullCopy = true;
    // The records of the last full copy stay where they are until this one is durable.
    await this.journal.reserve(journalBytesFor(plaintext.length));
    await this.slots.write(plaintext, sequence);
    this.journal.restart();
    this.needsFullCopy = false;
  }

  private verify(record: Uint8Array): void {
    if (this.shadow === null) return;
    this.shadow = applyChanges(this.shadow, record);
    if (!isDeepStrictEqual(this.shadow, wireCopy(this.state))) {
      throw new SealError("the state journal's record does not reproduce the state in memory");
    }
  }
}

/** The state in wire form, sharing nothing with the live state (its arrays included). */
function wireCopy(state: EnclaveState): Persisted {
  return decodeCbor(encodeCbor(toPersisted(state))) as Persisted;
}
