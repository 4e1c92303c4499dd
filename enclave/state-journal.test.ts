import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { generateSealingKey } from "./sealing.ts";
import { MIN_JOURNAL_BYTES, StateJournal } from "./state-journal.ts";

const bytes = (value: string): Uint8Array => new Uint8Array(Buffer.from(value));
const texts = (records: Uint8Array[]): string[] => records.map((record) => Buffer.from(record).toString());
/** Where the record at `offset` ends (sequence 8 bytes, length 4, then the sealed blob). */
const recordEnd = (file: Buffer, offset: number): number => offset + 12 + file.readUInt32BE(offset + 8);

describe("StateJournal (records after a full copy of the state)", () => {
  let dir: string;
  let path: string;
  const key = generateSealingKey();
  const opened: StateJournal[] = [];

  const openJournal = async (
    after: bigint | null,
    sealingKey = key,
  ): Promise<{ journal: StateJournal; records: string[] }> => {
    const { journal, records } = await StateJournal.open(path, sealingKey, after);
    opened.push(journal);
    return { journal, records: texts(records) };
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "state-journal-"));
    path = join(dir, "state.journal");
  });
  afterEach(async () => {
    for (const journal of opened.splice(0)) await journal.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("reads back, in order, the records that follow the full copy's sequence", async () => {
    const { journal, records } = await openJournal(4n);
    expect(records).toEqual([]);
    await journal.append(bytes("five"), 5n);
    await journal.append(bytes("six"), 6n);
    await journal.append(bytes("seven"), 7n);
    expect((await openJournal(4n)).records).toEqual(["five", "six", "seven"]);
    // Records of another full copy start where the journal starts; after none it is not read.
    expect((await openJournal(5n)).records).toEqual([]);
    expect((await openJournal(null)).records).toEqual([]);
  });

  it("is made to its size with zeros before use, 0600, so an append changes no file size", async () => {
    const { journal } = await openJournal(0n);
    expect((await stat(path)).size).toBe(MIN_JOURNAL_BYTES);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    await journal.append(bytes("one"), 1n);
    expect((await stat(path)).size).toBe(MIN_JOURNAL_BYTES);
    await journal.reserve(MIN_JOURNAL_BYTES * 3);
    expect((await stat(path)).size).toBe(MIN_JOURNAL_BYTES * 3);
    expect((await openJournal(0n)).records).toEqual(["one"]);
  });

  it("a record torn by a crash ends the chain before it, and the next append goes over it", async () => {
    const { journal } = await openJournal(0n);
    await journal.append(bytes("one"), 1n);
    await journal.append(bytes("two"), 2n);
    const file = await readFile(path);
    // What a crash halfway through the append of "two" leaves: its first half over the zeros.
    const start = recordEnd(file, 0);
    const half = start + Math.floor((recordEnd(file, start) - start) / 2);
    await writeFile(path, Buffer.concat([file.subarray(0, half), Buffer.alloc(file.length - half)]));

    const reopened = await openJournal(0n);
    expect(reopened.records).toEqual(["one"]);
    await reopened.journal.append(bytes("two again"), 2n);
    await reopened.journal.append(bytes("three"), 3n);
    expect((await openJournal(0n)).records).toEqual(["one", "two again", "three"]);
  });

  it("after a restart (a newer full copy), does not read the older copy's records left further on", async () => {
    const { journal } = await openJournal(0n);
    for (let sequence = 1n; sequence <= 3n; sequence++)
      await journal.append(bytes("x".repeat(200)), sequence);
    // The store wrote the full copy of 4; the records after it go from the start, each as long as
    // the older ones, so the older copy's record of 3 starts right where "six" ends.
    journal.restart();
    await journal.append(bytes("5".repeat(200)), 5n);
    await journal.append(bytes("6".repeat(200)), 6n);
    expect((await openJournal(4n)).records).toEqual(["5".repeat(200), "6".repeat(200)]);
    const file = await readFile(path);
    expect(file.readBigUInt64BE(recordEnd(file, recordEnd(file, 0)))).toBe(3n);
  });

  it("ends the chain at a record sealed under another key, or changed", async () => {
    const { journal } = await openJournal(0n);
    await journal.append(bytes("one"), 1n);
    await journal.append(bytes("two"), 2n);
    expect((await openJournal(0n, generateSealingKey())).records).toEqual([]);
    const file = await readFile(path);
    const second = recordEnd(file, 0);
    file[recordEnd(file, second) - 1]! ^= 1;
    await writeFile(path, file);
    expect((await openJournal(0n)).records).toEqual(["one"]);
  });

  it("refuses an append that does not fit, and says beforehand that it does not", async () => {
    const { journal } = await openJournal(0n);
    const large = new Uint8Array(MIN_JOURNAL_BYTES / 2);
    expect(journal.fits(large.length)).toBe(true);
    await journal.append(large, 1n);
    expect(journal.fits(large.length)).toBe(false);
    await expect(journal.append(large, 2n)).rejects.toThrow(RangeError);
    journal.restart();
    expect(journal.fits(large.length)).toBe(true);
  });
});
