/**
 * A new file that is on disk, whole, before its writer says anything about it. The offline keys
 * (the capability authorities, the recovery encryption key, an operator's key) are written once
 * and their public half is printed for `enclave init` or an enrollment, which the enclave seals
 * durably at once: a key file still in the page cache when the power goes would leave the enclave
 * sealed to a key nobody holds (docs/enclave.md#keys-and-where-production-keeps-them). So the bytes go to
 * a temporary file that is synced, which is then linked under its name (link, unlike rename, never
 * replaces a file already there) and the folder synced. A crash at any step leaves the name absent
 * or holding the whole file, never an empty or half one; at worst a temporary file is left beside.
 */
import { randomBytes } from "node:crypto";
import { link, open, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/** The file system steps of a new file, one per durable step, so a test can stand in for the disk. */
export type NewFileDisk = {
  /** Creates an empty file at `path` with `mode`, never over an existing file. */
  create(path: string, mode: number): Promise<void>;
  /** Writes `bytes` to the file at `path`. */
  write(path: string, bytes: Uint8Array): Promise<void>;
  /** Makes a file's bytes durable (fsync). */
  syncFile(path: string): Promise<void>;
  /** Gives `existing`'s file the name `name` too; EEXIST when `name` is taken. */
  link(existing: string, name: string): Promise<void>;
  remove(path: string): Promise<void>;
  /** Makes the names in a folder durable (fsync of the folder). */
  syncDirectory(dir: string): Promise<void>;
};

export const nodeDisk: NewFileDisk = {
  async create(path, mode) {
    await (await open(path, "wx", mode)).close();
  },
  async write(path, bytes) {
    const handle = await open(path, "r+");
    try {
      await handle.writeFile(bytes);
    } finally {
      await handle.close();
    }
  },
  syncFile: (path) => syncPath(path, "r+"),
  link: (existing, name) => link(existing, name),
  remove: (path) => rm(path, { force: true }),
  async syncDirectory(dir) {
    try {
      await syncPath(dir, "r");
    } catch (error) {
      // A file system that cannot sync a folder (some FUSE mounts) has nothing more to give.
      if (!NO_DIRECTORY_SYNC.has((error as NodeJS.ErrnoException).code ?? "")) throw error;
    }
  },
};

const NO_DIRECTORY_SYNC = new Set(["EINVAL", "ENOTSUP", "EOPNOTSUPP", "ENOSYS"]);

async function syncPath(path: string, flags: string): Promise<void> {
  const handle = await open(path, flags);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Writes `bytes` to a new file at `path` with `mode`, durably (file and folder synced) before it
 * resolves. Throws EEXIST, leaving it as it is, when `path` exists; after any failure nothing is
 * left under `path` that was not there.
 */
export async function writeNewFileDurably(
  path: string,
  bytes: Uint8Array,
  mode: number,
  disk: NewFileDisk = nodeDisk,
): Promise<void> {
  const dir = dirname(path);
  const temp = join(dir, `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  try {
    await disk.create(temp, mode);
    await disk.write(temp, bytes);
    await disk.syncFile(temp);
    try {
      await disk.link(temp, path);
    } catch (error) {
      if (!NO_HARD_LINKS.has((error as NodeJS.ErrnoException).code ?? "")) throw error;
      // A file system without hard links (exFAT or FAT removable media, where an offline key may
      // well be written): the file is made under its name, and synced. A kill in the middle can
      // leave it short there, which the tools refuse to read and never overwrite.
      await writeInPlace(path, bytes, mode, disk);
    }
  } finally {
    await disk.remove(temp);
  }
  await disk.syncDirectory(dir);
}

/** What link answers on a file system that has no hard links. */
const NO_HARD_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS"]);

async function writeInPlace(path: string, bytes: Uint8Array, mode: number, disk: NewFileDisk): Promise<void> {
  await disk.create(path, mode);
  try {
    await disk.write(path, bytes);
    await disk.syncFile(path);
  } catch (error) {
    await disk.remove(path);
    throw error;
  }
}
