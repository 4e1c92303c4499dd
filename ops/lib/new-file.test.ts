import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { authorityPublicKey } from "../../shared/capability.ts";
import { fromHex, toHex } from "../../shared/hex.ts";
import { x25519PublicKey } from "../../shared/recovery-envelope.ts";
import { createAuthorityKeyFile, createRecoveryKeyFile } from "./key-files.ts";
import { type NewFileDisk, nodeDisk } from "./new-file.ts";
import { generateOperatorKey, readOperatorKey } from "./operator-key.ts";

// A power cut cannot be made in a test. A FAKE disk stands in for it: every step runs on the real
// files of a temporary folder, and the disk remembers what a power cut would keep, a file's bytes
// as of its last fsync and a folder's names as of its last fsync; `afterPowerCut` rewrites the
// folder to that. A kill (the process gone, the kernel keeping what it was given) is a step that
// never returns: the real folder is then what a kill leaves.

type FakeDisk = NewFileDisk & { afterPowerCut(): Promise<void> };

function powerCutDisk(dir: string): FakeDisk {
  /** Synced bytes by inode; names by folder as of its last sync (name → inode). */
  const syncedBytes = new Map<number, Buffer>();
  let syncedNames = new Map<string, number>();
  const names = async (): Promise<Map<string, number>> => {
    const found = new Map<string, number>();
    for (const name of await readdir(dir)) found.set(name, (await stat(path.join(dir, name))).ino);
    return found;
  };
  return {
    ...nodeDisk,
    async syncFile(file) {
      await nodeDisk.syncFile(file);
      syncedBytes.set((await stat(file)).ino, await readFile(file));
    },
    async syncDirectory(folder) {
      await nodeDisk.syncDirectory(folder);
      if (path.resolve(folder) === path.resolve(dir)) syncedNames = await names();
    },
    async afterPowerCut() {
      const kept = new Map(
        [...syncedNames].map(([name, ino]) => [name, syncedBytes.get(ino) ?? Buffer.alloc(0)]),
      );
      for (const name of await readdir(dir)) await rm(path.join(dir, name));
      const { writeFile } = await import("node:fs/promises");
      for (const [name, bytes] of kept) await writeFile(path.join(dir, name), bytes, { mode: 0o600 });
    },
  };
}

/**
 * A disk on which the process dies at its `step`th call: that call, and everything after, never
 * returns; `died` resolves then.
 */
function killedAt(step: number): NewFileDisk & { died: Promise<"died"> } {
  let calls = 0;
  let die!: (value: "died") => void;
  const died = new Promise<"died">((resolve) => {
    die = resolve;
  });
  const never = new Promise<never>(() => {});
  const wrap =
    <A extends unknown[]>(call: (...args: A) => Promise<void>) =>
    (...args: A): Promise<void> => {
      if (++calls < step) return call(...args);
      die("died");
      return never;
    };
  return {
    create: wrap(nodeDisk.create),
    write: wrap(nodeDisk.write),
    syncFile: wrap(nodeDisk.syncFile),
    link: wrap(nodeDisk.link),
    remove: wrap(nodeDisk.remove),
    syncDirectory: wrap(nodeDisk.syncDirectory),
    died,
  };
}

const KEY_FILES = [
  {
    what: "an authority key",
    create: async (file: string, disk: NewFileDisk) => (await createAuthorityKeyFile(file, disk)).publicKey,
    publicKeyOf: async (file: string) => authorityPublicKey(fromHex((await readFile(file, "utf8")).trim())),
  },
  {
    what: "the recovery encryption key",
    create: async (file: string, disk: NewFileDisk) => (await createRecoveryKeyFile(file, disk)).publicKey,
    publicKeyOf: async (file: string) =>
      toHex(x25519PublicKey(fromHex((await readFile(file, "utf8")).trim()))),
  },
  {
    what: "an operator key",
    create: async (file: string, disk: NewFileDisk) => (await generateOperatorKey(file, disk)).publicKey,
    publicKeyOf: async (file: string) => (await readOperatorKey(file)).publicKey,
  },
];

describe("a new key file on disk before its public half is given out", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "new-key-file-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it.each(KEY_FILES)("$what survives a power cut right after its public key is returned", async (kind) => {
    const file = path.join(dir, "the.key");
    const disk = powerCutDisk(dir);
    const publicKey = await kind.create(file, disk);
    await disk.afterPowerCut();
    // Without the syncs the file is gone or empty: the enclave would be sealed to a key nobody holds.
    expect(await readdir(dir), "the key file after a power cut").toEqual(["the.key"]);
    expect(await kind.publicKeyOf(file)).toBe(publicKey);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });

  it.each(KEY_FILES)(
    "$what survives a power cut on a file system without hard links (exFAT media)",
    async (kind) => {
      const file = path.join(dir, "the.key");
      const disk = powerCutDisk(dir);
      const noLinks: FakeDisk = {
        ...disk,
        link: async () => {
          throw Object.assign(new Error("operation not permitted"), { code: "EPERM" });
        },
      };
      const publicKey = await kind.create(file, noLinks);
      await disk.afterPowerCut();
      expect(await readdir(dir), "the key file after a power cut").toEqual(["the.key"]);
      expect(await kind.publicKeyOf(file)).toBe(publicKey);
    },
  );

  it.each(KEY_FILES)(
    "$what killed at any step leaves no file under its name or the whole key",
    async (kind) => {
      for (let step = 1; ; step++) {
        const file = path.join(dir, `step-${step}.key`);
        const disk = killedAt(step);
        const ended = await Promise.race([
          kind.create(file, disk).then(() => "finished" as const),
          disk.died,
        ]);
        if (ended === "finished") break;
        const left = await stat(file).catch(() => undefined);
        // A name under which a rerun is refused ("exists") must hold a key the tool can read back.
        if (left) await expect(kind.publicKeyOf(file), `killed at step ${step}`).resolves.toBeDefined();
      }
    },
  );

  it("refuses a file that exists and leaves it, with nothing beside it", async () => {
    const file = path.join(dir, "taken.key");
    await createAuthorityKeyFile(file);
    const before = await readFile(file, "utf8");
    await expect(createAuthorityKeyFile(file)).rejects.toThrow(
      /exists; refusing to overwrite an authority key/,
    );
    expect(await readFile(file, "utf8")).toBe(before);
    expect(await readdir(dir)).toEqual(["taken.key"]);
  });
});
