/**
 * The local stack's own JSON files under the data folder (its secrets, its agent): written whole or
 * not at all, and a file that does not parse named with what to do, rather than JSON.parse's
 * "Unexpected end of JSON input" on every later start.
 */
import { randomBytes } from "node:crypto";
import { readFile, rename, rm, writeFile } from "node:fs/promises";
import { errorMessage } from "../shared/error-message.ts";

/** `file`'s JSON; a file that does not parse ends the start, naming it and `remedy`. */
export async function readLocalJson<T>(file: string, remedy: string): Promise<T> {
  const text = await readFile(file, "utf8");
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    throw new Error(`${file} does not hold valid JSON (${errorMessage(error)}): ${remedy}`);
  }
}

/**
 * Writes `value` to `file` (0600) through a file beside it renamed over it, so a kill or a full
 * disk mid-write leaves the old file, or none, never a truncated one.
 */
export async function writeLocalJson(file: string, value: unknown): Promise<void> {
  const next = `${file}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    await writeFile(next, JSON.stringify(value, null, 2), { mode: 0o600 });
    await rename(next, file);
  } catch (error) {
    await rm(next, { force: true });
    throw error;
  }
}
