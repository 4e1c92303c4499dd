/**
 * Where the enclave's sealed state lives on disk: two slot files, written in turn, each in place
 * with one positioned write to a file opened O_DSYNC, which returns once the bytes are durable as
 * a write and an fdatasync would, in one system call (one trip through the thread pool, not two).
 * The state is written once per group of signatures, so this is on the signing path; a temp file,
 * fsync, rename and directory fsync per write cost about six times as long on an idle disk, and
 * more when the machine is busy.
 *
 * Crash safety without a rename: a write only ever goes to the slot that does not hold the newest
 * durable state, so a crash in the middle of it tears that slot and leaves the other intact. On
 * open, the slot that authenticates with the higher sequence number wins; a torn slot does not
 * authenticate. A slot is
 *   sequence (8 bytes, big-endian) ‖ length (4 bytes, big-endian) ‖ sealed blob ‖ leftovers
 * where the sequence is bound into the blob as associated data, and the leftovers are the tail of
 * an earlier, longer write (a write never shrinks the file, so a synchronized write has no size to record
 * unless the state grew).
 */
import { rm } from "node:fs/promises";
import { dirname } from "node:path";
import { syncDirectory } from "./atomic-file.ts";
import { SEAL_LABEL, SealError, unseal } from "./sealing.ts";
import {
  FRAME_HEADER_BYTES,
  readIfExists,
  SEQUENCE_BYTES,
  SynchronizedFile,
  sealedFrame,
} from "./synchronized-file.ts";

type SlotIndex = 0 | 1;
type Newest = { index: SlotIndex; sequence: bigint };

export type StateSlotPaths = {
  slots: readonly [string, string];
  /** The single state file written before the slots existed, moved into them on first open. */
  legacy: string;
};

export class StateSlots {
  private constructor(
    private readonly slots: [SynchronizedFile, SynchronizedFile],
    private readonly sealingKey: Uint8Array,
    private newest: Newest | null,
  ) {}

  /**
   * Opens the slots and returns the newest state that authenticates and its sequence number (null
   * and 0: none was ever written). Slots that exist but of which none authenticates are a SealError
   * (another sealing key, or tampering), never an empty state.
   */
  static async open(
    paths: StateSlotPaths,
    sealingKey: Uint8Array,
  ): Promise<{ slots: StateSlots; plaintext: Uint8Array | null; sequence: bigint }> {
    const read = await Promise.all(paths.slots.map((path) => readSlot(path, sealingKey)));
    let newest: (Newest & { plaintext: Uint8Array }) | null = null;
    for (const index of [0, 1] as const) {
      const slot = read[index]!;
      if (slot.kind === "valid" && (newest === null || slot.sequence > newest.sequence)) {
        newest = { index, sequence: slot.sequence, plaintext: slot.plaintext };
      }
    }
    // A torn slot with none that authenticates is a first write cut short (a kill, a full disk):
    // nothing was ever durable, so the folder reads as never written, as when the kill came before
    // the write. Refusing it would refuse every start after, and `init` refuses an initialised folder.
    if (newest === null && read.some((slot) => slot.kind === "unreadable")) {
      throw new SealError("no state slot authenticates (another sealing key, or tampered with)");
    }
    const slots = new StateSlots(
      [new SynchronizedFile(paths.slots[0]), new SynchronizedFile(paths.slots[1])],
      sealingKey,
      newest && { index: newest.index, sequence: newest.sequence },
    );
    let plaintext = newest?.plaintext ?? null;
    const legacy = await readIfExists(paths.legacy);
    if (legacy !== null) {
      // Moved into a slot, durably, before the old file goes: a crash in between finds the slot
      // next time, and the old file is then only removed.
      if (newest === null) {
        plaintext = unseal(sealingKey, SEAL_LABEL.state, legacy);
        await slots.write(plaintext, 1n);
      }
      await rm(paths.legacy);
      await syncDirectory(dirname(paths.legacy));
    }
    return { slots, plaintext, sequence: slots.sequence };
  }

  /**
   * Seals `plaintext` as `sequence` (above every sequence written before) into the slot that does
   * not hold the newest state and makes it durable. Writes must not overlap (the state store runs
   * one at a time).
   */
  async write(plaintext: Uint8Array, sequence: bigint): Promise<void> {
    if (sequence <= this.sequence) throw new RangeError("a state's sequence only grows");
    const index: SlotIndex = this.newest === null ? 0 : this.newest.index === 0 ? 1 : 0;
    // A failed write is retried into the same slot: the other still holds the newest durable state.
    await this.slots[index].writeAt(sealedFrame(this.sealingKey, SEAL_LABEL.state, plaintext, sequence), 0);
    this.newest = { index, sequence };
  }

  /** The sequence of the newest durable state (0: none was written). */
  get sequence(): bigint {
    return this.newest?.sequence ?? 0n;
  }

  /** Closes the slot files (after the last write). */
  async close(): Promise<void> {
    for (const slot of this.slots) await slot.close();
  }
}

type ReadSlot =
  | { kind: "absent" }
  /**
   * Shorter than the frame its header declares: a write cut short (a crash, a full disk). Another
   * key's slot is whole; cutting one short is no more than deleting it, which reads as absent.
   */
  | { kind: "torn" }
  /** Whole but does not authenticate: torn by a crash in place, or not sealed under this key. */
  | { kind: "unreadable" }
  | { kind: "valid"; sequence: bigint; plaintext: Uint8Array };

async function readSlot(path: string, sealingKey: Uint8Array): Promise<ReadSlot> {
  const bytes = await readIfExists(path);
  // A slot created but never written (a crash before its first write) holds nothing.
  if (bytes === null || bytes.length === 0) return { kind: "absent" };
  if (bytes.length < FRAME_HEADER_BYTES) return { kind: "unreadable" };
  const length = bytes.readUInt32BE(SEQUENCE_BYTES);
  if (FRAME_HEADER_BYTES + length > bytes.length) return { kind: "torn" };
  try {
    const plaintext = unseal(
      sealingKey,
      SEAL_LABEL.state,
      bytes.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + length),
      bytes.subarray(0, SEQUENCE_BYTES),
    );
    return { kind: "valid", sequence: bytes.readBigUInt64BE(0), plaintext };
  } catch (error) {
    if (error instanceof SealError) return { kind: "unreadable" };
    throw error;
  }
}
