/**
 * Files the enclave's state is written to in place, each write durable when it returns: opened
 * O_DSYNC, so one positioned write is a write and an fdatasync in one system call. The state's
 * files (state-slots.ts, state-journal.ts) hold frames of
 *   sequence (8 bytes, big-endian) ‖ length (4 bytes, big-endian) ‖ sealed blob
 * with the sequence bound into the blob as associated data.
 */
import { constants } from "node:fs";
import { type FileHandle, open, readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { syncDirectory } from "./atomic-file.ts";
import { type SealLabel, seal } from "./sealing.ts";

export const SEQUENCE_BYTES = 8;
export const FRAME_HEADER_BYTES = SEQUENCE_BYTES + 4;

/** `plaintext` sealed for `label` as the frame of `sequence`. */
export function sealedFrame(
  sealingKey: Uint8Array,
  label: SealLabel,
  plaintext: Uint8Array,
  sequence: bigint,
): Buffer {
  const header = Buffer.alloc(FRAME_HEADER_BYTES);
  header.writeBigUInt64BE(sequence, 0);
  const blob = seal(sealingKey, label, plaintext, header.subarray(0, SEQUENCE_BYTES));
  header.writeUInt32BE(blob.length, SEQUENCE_BYTES);
  return Buffer.concat([header, blob]);
}

/** A file written in place, each write durable once it resolves; opened at its first write. */
export class SynchronizedFile {
  private handle: FileHandle | null = null;

  constructor(private readonly path: string) {}

  async writeAt(bytes: Uint8Array, position: number): Promise<void> {
    try {
      this.handle ??= await openSynchronized(this.path);
      await writeDurably(this.handle, bytes, position);
    } catch (error) {
      // After a failed write or sync the kernel may have dropped the dirty pages and reported it
      // once; the next attempt reopens the file and writes every byte again.
      const handle = this.handle;
      this.handle = null;
      await handle?.close().catch(() => {});
      throw error;
    }
  }

  async close(): Promise<void> {
    const handle = this.handle;
    this.handle = null;
    await handle?.close();
  }
}

/** 0 where the platform has no O_DSYNC: each write is then followed by an fdatasync. */
const DSYNC: number = constants.O_DSYNC ?? 0;

/** Writes `bytes` at `position` of a file from openSynchronized; durable once it resolves. */
async function writeDurably(handle: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  // A write may take fewer bytes than asked without an error (a full disk, a file size limit): the
  // rest is written again, so that what stops it is thrown, never a torn frame taken as durable.
  let written = 0;
  while (written < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, written, bytes.length - written, position + written);
    if (bytesWritten === 0) throw new Error("the file took no byte of a write");
    written += bytesWritten;
  }
  if (DSYNC === 0) await handle.datasync();
}

export async function readIfExists(path: string): Promise<Buffer | null> {
  try {
    return await readFile(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
}

/**
 * Opens `path` for synchronized writes in place; a new file is made 0600 and its name made durable
 * first.
 */
async function openSynchronized(path: string): Promise<FileHandle> {
  try {
    return await open(path, constants.O_RDWR | DSYNC);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  const handle = await open(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | DSYNC, 0o600);
  try {
    await syncDirectory(dirname(path));
  } catch (error) {
    await handle.close();
    throw error;
  }
  return handle;
}
