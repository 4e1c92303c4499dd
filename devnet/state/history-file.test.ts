import { statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { HistoryFile, type HistoryLocation, WRITE_CHUNK_BYTES } from "./history-file.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "history-file-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A line of `length` characters, some of them beyond ASCII, distinct for each `seed`. */
function line(seed: number, length: number): string {
  const text = `${seed}:é€${"x".repeat(Math.max(0, length))}`;
  return text.slice(0, Math.max(length, String(seed).length + 3));
}

describe("the history file", () => {
  it("answers every line as appended, whether it still waits in memory, was written with its chunk, or was longer than a chunk", () => {
    const history = new HistoryFile(path.join(dir, "blocks.jsonl"));
    const lengths = [10, 3_000, 200_000, 70_000, WRITE_CHUNK_BYTES + 5, 40, 1, 120_000, 9_000];
    const lines = Array.from({ length: 60 }, (_, i) => line(i, lengths[i % lengths.length]!));
    const locations: HistoryLocation[] = [];
    lines.forEach((text, i) => {
      locations.push(history.append(text));
      // Read back at once, and an earlier line too, between appends.
      expect(history.read(locations[i]!)).toBe(text);
      expect(history.read(locations[Math.floor(i / 2)]!)).toBe(lines[Math.floor(i / 2)]);
    });
    lines.forEach((text, i) => {
      expect(history.read(locations[i]!), `line ${i}`).toBe(text);
    });
    history.close();
  });

  it("writes small lines a chunk at a time, not one write each", () => {
    const file = path.join(dir, "blocks.jsonl");
    const history = new HistoryFile(file);
    const first = history.append(line(1, 4_000));
    for (let i = 2; i <= 20; i++) history.append(line(i, 4_000));
    expect(statSync(file).size).toBe(0);
    // Lines past a chunk's worth push the chunk before them to the file in one write.
    for (let i = 21; i <= 80; i++) history.append(line(i, 4_000));
    const size = statSync(file).size;
    expect(size).toBeGreaterThan(0);
    // Whole lines only, and fewer than were appended.
    const lineBytes = Buffer.byteLength(line(1, 4_000)) + 1;
    expect(size % lineBytes).toBe(0);
    expect(size / lineBytes).toBeLessThan(80);
    expect(history.read(first)).toBe(line(1, 4_000));
    history.close();
  });
});
