/**
 * Mined blocks that have left memory: one JSON line per block, appended in block order, read back
 * by offset. The file is a cache of this run's history, not a record: the state file stays the
 * chain's record, so a file left by an earlier run is overwritten and a crash loses nothing the
 * state file kept. Synchronous, because history reads answer synchronously (and BLOCKHASH asks in
 * the middle of execution); a block is a few kB, read from the page cache. Lines are gathered in
 * memory and written a chunk at a time: a system call per block cost the devnet's one thread about
 * as much as encoding the block.
 */
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export type HistoryLocation = { offset: number; length: number };

/** Lines wait in memory up to this many bytes, then go to the file in one write. */
export const WRITE_CHUNK_BYTES = 256 * 1024;

export class HistoryFile {
  /** Where to write; undefined: a private folder under the system's temporary folder. */
  readonly #wanted: string | undefined;
  #fd: number | undefined;
  #temporaryFolder: string | undefined;
  /** Bytes appended, on the file or waiting in the chunk. */
  #size = 0;
  /** Bytes on the file; those after it wait in the chunk. */
  #written = 0;
  /** Allocated with the file: most devnets in tests never write one. */
  #chunk: Buffer | undefined;
  #chunkUsed = 0;

  constructor(file: string | undefined) {
    this.#wanted = file;
  }

  /** Appends `line` (no newline in it) and returns where it is. */
  append(line: string): HistoryLocation {
    const fd = this.#open();
    this.#chunk ??= Buffer.allocUnsafe(WRITE_CHUNK_BYTES);
    const length = Buffer.byteLength(line, "utf8") + 1;
    if (this.#chunkUsed + length > WRITE_CHUNK_BYTES) this.#flush();
    const location = { offset: this.#size, length: length - 1 };
    if (length > WRITE_CHUNK_BYTES) {
      writeAll(fd, Buffer.from(`${line}\n`, "utf8"), this.#written);
      this.#written += length;
    } else {
      this.#chunk.write(line, this.#chunkUsed, "utf8");
      this.#chunk[this.#chunkUsed + length - 1] = 0x0a;
      this.#chunkUsed += length;
    }
    this.#size += length;
    return location;
  }

  read(location: HistoryLocation): string {
    if (this.#fd === undefined) throw new Error("the history file holds nothing yet");
    if (location.offset + location.length > this.#written) this.#flush();
    const bytes = Buffer.allocUnsafe(location.length);
    let read = 0;
    while (read < location.length) {
      const got = readSync(this.#fd, bytes, read, location.length - read, location.offset + read);
      if (got === 0) throw new Error(`history file ends before offset ${location.offset + location.length}`);
      read += got;
    }
    return bytes.toString("utf8");
  }

  /** Closes the file; a temporary one is removed with its folder. */
  close(): void {
    if (this.#fd !== undefined) {
      this.#flush();
      closeSync(this.#fd);
    }
    this.#fd = undefined;
    if (this.#temporaryFolder !== undefined) rmSync(this.#temporaryFolder, { recursive: true, force: true });
    this.#temporaryFolder = undefined;
  }

  /** Writes what waits in the chunk. */
  #flush(): void {
    if (this.#fd === undefined || this.#chunk === undefined || this.#chunkUsed === 0) return;
    writeAll(this.#fd, this.#chunk.subarray(0, this.#chunkUsed), this.#written);
    this.#written += this.#chunkUsed;
    this.#chunkUsed = 0;
  }

  /** Opened on the first block that leaves memory: most devnets in tests never get there. */
  #open(): number {
    if (this.#fd !== undefined) return this.#fd;
    let file = this.#wanted;
    if (file === undefined) {
      this.#temporaryFolder = mkdtempSync(path.join(tmpdir(), "devnet-history-"));
      file = path.join(this.#temporaryFolder, "blocks.jsonl");
    }
    // "w+": truncated, since what an earlier run left is not this run's.
    this.#fd = openSync(file, "w+", 0o600);
    return this.#fd;
  }
}

function writeAll(fd: number, bytes: Uint8Array, position: number): void {
  let written = 0;
  while (written < bytes.length)
    written += writeSync(fd, bytes, written, bytes.length - written, position + written);
}
