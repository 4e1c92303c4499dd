import { constants } from "node:fs";
import { mkdtemp, open, readdir, readFile, readlink, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { dataDirLayout } from "./data-dir.ts";
import { generateSealingKey, SEAL_LABEL, SealError, seal } from "./sealing.ts";
import { type StateSlotPaths, StateSlots } from "./state-slots.ts";

const text = (bytes: Uint8Array | null): string | null =>
  bytes === null ? null : Buffer.from(bytes).toString();
const bytes = (value: string): Uint8Array => new Uint8Array(Buffer.from(value));
/** Writes `value` as the next state after the newest durable one. */
const put = (slots: StateSlots, value: string): Promise<void> =>
  slots.write(bytes(value), slots.sequence + 1n);

/** The open flags of this process's descriptors of `files` (Linux: /proc/self/fdinfo). */
async function openFlagsOf(files: readonly string[]): Promise<number[]> {
  const flags: number[] = [];
  for (const fd of await readdir("/proc/self/fd")) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => "");
    if (!files.includes(target)) continue;
    const info = await readFile(`/proc/self/fdinfo/${fd}`, "utf8");
    flags.push(Number.parseInt(/^flags:\s+([0-7]+)$/m.exec(info)![1]!, 8));
  }
  return flags;
}

describe("StateSlots (two sealed slots, written in turn)", () => {
  let dir: string;
  let paths: StateSlotPaths;
  const key = generateSealingKey();
  const opened: StateSlots[] = [];

  const openSlots = async (
    sealingKey = key,
  ): Promise<{ slots: StateSlots; plaintext: Uint8Array | null }> => {
    const result = await StateSlots.open(paths, sealingKey);
    opened.push(result.slots);
    return result;
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "state-slots-"));
    paths = dataDirLayout(dir).state;
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const slots of opened.splice(0)) await slots.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("starts with nothing, writes the slots in turn, and a reopen reads the newest", async () => {
    const { slots, plaintext } = await openSlots();
    expect(plaintext).toBeNull();
    await put(slots, "first");
    expect(await readdir(dir)).toEqual(["state.0.sealed"]);
    await put(slots, "second");
    const afterSecond = await readFile(paths.slots[0]);
    await put(slots, "third");
    // The third went to slot 0 again: slot 1 (the newest then) was left alone.
    expect(await readFile(paths.slots[0])).not.toEqual(afterSecond);
    expect(text((await openSlots()).plaintext)).toBe("third");
  });

  it("a write torn by a crash costs only that write: the other slot's state is read, and the next write goes over the torn one", async () => {
    const { slots } = await openSlots();
    await put(slots, "one");
    await put(slots, "two");
    const before = await readFile(paths.slots[0]);
    await put(slots, "three");
    const complete = await readFile(paths.slots[0]);
    // What a crash halfway through the third write leaves: its first half over the first write.
    const half = Math.floor(complete.length / 2);
    await writeFile(paths.slots[0], Buffer.concat([complete.subarray(0, half), before.subarray(half)]));

    const reopened = await openSlots();
    expect(text(reopened.plaintext)).toBe("two");
    const slotOfTwo = await readFile(paths.slots[1]);
    await put(reopened.slots, "four");
    expect(await readFile(paths.slots[1])).toEqual(slotOfTwo);
    expect(text((await openSlots()).plaintext)).toBe("four");
  });

  it("reads a shorter state written over a longer one exactly (the longer one's tail is ignored)", async () => {
    const { slots } = await openSlots();
    await put(slots, "x".repeat(5000));
    await put(slots, "between");
    await put(slots, "short");
    expect((await readFile(paths.slots[0])).length).toBeGreaterThan(5000);
    expect(text((await openSlots()).plaintext)).toBe("short");
  });

  it("retries a failed write in the same slot, never over the newest durable state", async () => {
    const { slots } = await openSlots();
    await put(slots, "durable");
    const durable = await readFile(paths.slots[0]);
    // A fake for a fault the disk cannot be made to produce here: the next synchronized write fails.
    const probe = await open(join(dir, "probe"), "w");
    const handlePrototype = Object.getPrototypeOf(probe) as { write: () => Promise<unknown> };
    await probe.close();
    vi.spyOn(handlePrototype, "write").mockRejectedValueOnce(new Error("EIO"));
    await expect(put(slots, "lost")).rejects.toThrow("EIO");
    await put(slots, "retried");
    expect(await readFile(paths.slots[0])).toEqual(durable);
    expect(text((await openSlots()).plaintext)).toBe("retried");
  });

  // Linux shows each open file's flags in /proc; O_DSYNC is what makes a write durable on return.
  it.runIf(process.platform === "linux")(
    "writes each slot through a file opened O_DSYNC, so a write has returned only once it is durable",
    async () => {
      const { slots } = await openSlots();
      await put(slots, "first");
      await put(slots, "second");
      const flags = await openFlagsOf(paths.slots);
      expect(flags).toHaveLength(2);
      for (const flag of flags) expect(flag & constants.O_DSYNC).toBe(constants.O_DSYNC);
    },
  );

  it("moves the single state file of earlier versions into a slot, then removes it", async () => {
    await writeFile(paths.legacy, seal(key, SEAL_LABEL.state, bytes("legacy")), { mode: 0o600 });
    expect(text((await openSlots()).plaintext)).toBe("legacy");
    expect((await readdir(dir)).sort()).toEqual(["state.0.sealed"]);
    expect(text((await openSlots()).plaintext)).toBe("legacy");
  });

  it("removes an earlier version's file left beside written slots (a crash after the move) without reading it", async () => {
    const { slots } = await openSlots();
    await put(slots, "moved");
    await writeFile(paths.legacy, Buffer.from("left over"), { mode: 0o600 });
    expect(text((await openSlots()).plaintext)).toBe("moved");
    expect(await readdir(dir)).toEqual(["state.0.sealed"]);
  });

  it("refuses slots none of which authenticates, instead of starting empty", async () => {
    const { slots } = await openSlots();
    await put(slots, "sealed");
    await expect(openSlots(generateSealingKey())).rejects.toBeInstanceOf(SealError);
    await writeFile(paths.slots[0], Buffer.from("not a slot"));
    await expect(openSlots()).rejects.toBeInstanceOf(SealError);
  });
});
