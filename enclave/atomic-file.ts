/**
 * Atomic file replacement (temp file, fsync, rename, fsync of the directory),
 * so a crash mid-write leaves either the old file or the new one, never half of either.
 */
import { randomBytes } from "node:crypto";
import { link, open, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/** Writes `data` to `path` atomically with mode 0600 (sealed blobs are private to the enclave). */
export async function writeFileAtomic(path: string, data: Uint8Array): Promise<void> {
  const temp = await writeTempFile(path, data);
  try {
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
  await syncDirectory(dirname(path));
}

/**
 * As writeFileAtomic, but never over a file already there: the temporary file is linked under its
 * name (link, unlike rename, never replaces), so of two writers at once exactly one succeeds and
 * the other gets EEXIST.
 */
export async function writeNewFileAtomic(path: string, data: Uint8Array): Promise<void> {
  const temp = await writeTempFile(path, data);
  try {
    await link(temp, path);
  } finally {
    await rm(temp, { force: true });
  }
  await syncDirectory(dirname(path));
}

/** `data` in a new synced 0600 temporary file beside `path`; returns its path. */
async function writeTempFile(path: string, data: Uint8Array): Promise<string> {
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  const handle = await open(temp, "wx", 0o600);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  return temp;
}

/** fsync of a directory makes a rename inside it durable (POSIX). */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** True for the leftovers of an interrupted writeFileAtomic, which loaders must ignore. */
export function isTempFile(name: string): boolean {
  return name.startsWith(".") && name.endsWith(".tmp");
}
