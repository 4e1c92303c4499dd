/**
 * Files the enclave's state is written to in place, each write durable when it returns: opened
 * O_DSYNC, so one positioned write is a write and an fdatasync in one system call.
 */
import { constants } from "node:fs";
import { type FileHandle, open, readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { syncDirectory } from "./atomic-file.ts";

/** 0 where the platform has no O_DSYNC: each write is then followed by an fdatasync. */
const DSYNC: number = constants.O_DSYNC ?? 0;

/** Writes `bytes` at `position` of a file from openSynchronized; durable once it resolves. */
export async function writeDurably(handle: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  await handle.write(bytes, 0, bytes.length, position);
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
export async function openSynchronized(path: string): Promise<FileHandle> {
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
