/**
 * The state journal: what each group of commits changed since the last full copy of the state
 * (state-slots.ts), so that a group's durable write grows with what it changed and not with every
 * key active in the day. One file, made to its size with zeros before use, so an append is one
 * synchronized write in place that changes no file size. Records follow one another from offset 0:
 *   sequence (8 bytes, big-endian) ‖ length (4 bytes, big-endian) ‖ sealed blob
 * with the sequence bound into the blob as associated data.
 *
 * Records after the full copy of sequence N carry N+1, N+2, … and are read from offset 0 until the
 * first that does not authenticate or does not carry the next sequence. A crash in the middle of an
 * append tears that record alone, and ends the chain before it; the records of an earlier full copy,
 * left further on, carry older sequences. The state store never uses a sequence twice, and after a
 * failed write writes a full copy before it appends again.
 */
import { SEAL_LABEL, SEAL_OVERHEAD_BYTES, SealError, unseal } from "./sealing.ts";
import {
  FRAME_HEADER_BYTES,
  readIfExists,
  SEQUENCE_BYTES,
  SynchronizedFile,
  sealedFrame,
} from "./synchronized-file.ts";
/** The journal's size on a new enclave; it grows with the full copy (journalBytesFor). */
export const MIN_JOURNAL_BYTES = 256 * 1024;
const MAX_JOURNAL_BYTES = 64 * 1024 * 1024;
const ZEROS = Buffer.alloc(1024 * 1024);

/**
 * The journal's size for a full copy of `stateBytes`: twice it, so that writing the full copy again
 * when the journal is full costs at most half a byte for every byte appended.
 */
export function journalBytesFor(stateBytes: number): number {
  return Math.min(MAX_JOURNAL_BYTES, Math.max(MIN_JOURNAL_BYTES, 2 * stateBytes));
}

export class StateJournal {
  private constructor(
    private readonly file: SynchronizedFile,
    private readonly sealingKey: Uint8Array,
    /** Where the next record goes. */
    private offset: number,
    /** The file's size: zeros, or records. */
    private size: number,
  ) {}

  /**
   * Opens the journal (made when absent) and returns the records that follow the full copy of
   * sequence `after`, in order. `after` null: the full copy is one the journal cannot follow (none,
   * or one of an older version), so no record is read and the next append goes to the start.
   */
  static async open(
    path: string,
    sealingKey: Uint8Array,
    after: bigint | null,
  ): Promise<{ journal: StateJournal; records: Uint8Array[] }> {
    const bytes = await readIfExists(path);
    const records: Uint8Array[] = [];
    let offset = 0;
    if (bytes !== null && after !== null) {
      for (let expected = after + 1n; ; expected++) {
        const record = readRecord(bytes, offset, expected, sealingKey);
        if (record === null) break;
        records.push(record.plaintext);
        offset = record.end;
      }
    }
    const journal = new StateJournal(new SynchronizedFile(path), sealingKey, offset, bytes?.length ?? 0);
    await journal.reserve(MIN_JOURNAL_BYTES);
    return { journal, records };
  }

  /** Whether a record of `plaintextBytes` fits after the records written since the last full copy. */
  fits(plaintextBytes: number): boolean {
    return this.offset + FRAME_HEADER_BYTES + SEAL_OVERHEAD_BYTES + plaintextBytes <= this.size;
  }

  /** Seals `plaintext` as `sequence` after the last record and makes it durable. Writes must not overlap. */
  async append(plaintext: Uint8Array, sequence: bigint): Promise<void> {
    if (!this.fits(plaintext.length)) throw new RangeError("the state journal is full");
    const frame = sealedFrame(this.sealingKey, SEAL_LABEL.stateJournal, plaintext, sequence);
    await this.file.writeAt(frame, this.offset);
    this.offset += frame.length;
  }

  /**
   * Makes the file at least `bytes` long, with zeros past what it held: before a full copy is
   * written, so that the records after it have room. What the file held is not touched.
   */
  async reserve(bytes: number): Promise<void> {
    while (this.size < bytes) {
      const zeros = ZEROS.subarray(0, Math.min(ZEROS.length, bytes - this.size));
      await this.file.writeAt(zeros, this.size);
      this.size += zeros.length;
    }
  }

  /** After a full copy is durable: the records that follow it go from the start. */
  restart(): void {
    this.offset = 0;
  }

  async close(): Promise<void> {
    await this.file.close();
  }
}

/** The record at `offset` if it carries `sequence` and authenticates, else null (the chain ends). */
function readRecord(
  bytes: Buffer,
  offset: number,
  sequence: bigint,
  sealingKey: Uint8Array,
): { plaintext: Uint8Array; end: number } | null {
  if (offset + FRAME_HEADER_BYTES > bytes.length || bytes.readBigUInt64BE(offset) !== sequence) return null;
  const end = offset + FRAME_HEADER_BYTES + bytes.readUInt32BE(offset + SEQUENCE_BYTES);
  if (end > bytes.length) return null;
  try {
    const plaintext = unseal(
      sealingKey,
      SEAL_LABEL.stateJournal,
      bytes.subarray(offset + FRAME_HEADER_BYTES, end),
      bytes.subarray(offset, offset + SEQUENCE_BYTES),
    );
    return { plaintext, end };
  } catch (error) {
    if (error instanceof SealError) return null;
    throw error;
  }
}
