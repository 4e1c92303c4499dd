/**
 * Atomic file replacement (temp file, fsync, rename, fsync of the directory),
 * so a crash mid-write leaves either the old file or the new one, never half of either.
 */
import { randomBytes } from "node:crypto";
import { open, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/** Writes `data` to `path` atomically with mode 0600 (sealed blobs are private to the enclave). */
export async function writeFileAtomic(path: string, data: Uint8Array): Promise<void> {
  const dir = dirname(path);
  const temp = join(dir, `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
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
  try {
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
  await syncDirectory(dir);
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
