/**
 * Mined blocks that have left memory: one JSON line per block, appended in block order, read back
 * by offset. The file is a cache of this run's history, not a record: the state file stays the
 * chain's record, so a file left by an earlier run is overwritten and a crash loses nothing the
 * state file kept. Synchronous, because history reads answer synchronously (and BLOCKHASH asks in
 * the middle of execution); a block is a few kB, read from the page cache.
 */
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export type HistoryLocation = { offset: number; length: number };

export class HistoryFile {
  /** Where to write; undefined: a private folder under the system's temporary folder. */
  readonly #wanted: string | undefined;
  #fd: number | undefined;
  #temporaryFolder: string | undefined;
  #size = 0;

  constructor(file: string | undefined) {
    this.#wanted = file;
  }

  /** Appends `line` (no newline in it) and returns where it is. */
  append(line: string): HistoryLocation {
    const fd = this.#open();
    const bytes = Buffer.from(`${line}\n`, "utf8");
    let written = 0;
    while (written < bytes.length)
      written += writeSync(fd, bytes, written, bytes.length - written, this.#size + written);
    const location = { offset: this.#size, length: bytes.length - 1 };
    this.#size += bytes.length;
    return location;
  }

  read(location: HistoryLocation): string {
    if (this.#fd === undefined) throw new Error("the history file holds nothing yet");
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
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
    if (this.#temporaryFolder !== undefined) rmSync(this.#temporaryFolder, { recursive: true, force: true });
    this.#temporaryFolder = undefined;
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
