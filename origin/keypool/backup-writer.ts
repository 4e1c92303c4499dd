import { createHash, randomBytes } from "node:crypto";
import { mkdir, open, readFile, rename, rm } from "node:fs/promises";
import path from "node:path";
import { errorMessage } from "../../shared/error-message.ts";
import { err, ok, type Result } from "../../shared/result.ts";

export type WriteBackupParams = {
  dir: string;
  batchId: string;
  envelope: Uint8Array;
  /** SHA-256 of the envelope as the enclave reported it, lowercase hex with or without 0x. */
  expectedSha256: string;
  /** Fault injection for crash tests only: runs after the temporary file is durable, before the rename. */
  afterTempWrite?: () => Promise<void> | void;
};

export type BackupWritten = { path: string; sha256: string };

export type BackupWriteFailure = {
  reason: "envelope_hash_mismatch" | "reread_hash_mismatch" | "io_error";
  detail: string;
};

export type WriteBackupResult = Result<BackupWritten, BackupWriteFailure>;

/**
 * SPEC "Transfer-key pool": write via a temporary file, fsync, atomic rename, fsync of the
 * directory, then re-read the file and compare its SHA-256 before the batch may advance. A crash
 * at any point leaves either no file or a whole one under the final name, never a half.
 */
export async function writeBackup(params: WriteBackupParams): Promise<WriteBackupResult> {
  const expected = params.expectedSha256.replace(/^0x/, "").toLowerCase();
  if (sha256(params.envelope) !== expected) {
    return err({ reason: "envelope_hash_mismatch", detail: "the envelope does not match its reported hash" });
  }
  const finalPath = path.join(params.dir, `${params.batchId}.backup`);
  const tempPath = path.join(params.dir, `.${params.batchId}.${randomBytes(4).toString("hex")}.tmp`);
  try {
    await mkdir(params.dir, { recursive: true, mode: 0o700 });
    const file = await open(tempPath, "wx", 0o600);
    try {
      await file.writeFile(params.envelope);
      await file.sync();
    } finally {
      await file.close();
    }
    await params.afterTempWrite?.();
    await rename(tempPath, finalPath);
    await fsyncDirectory(params.dir);
    const reread = sha256(await readFile(finalPath));
    if (reread !== expected) {
      return err({ reason: "reread_hash_mismatch", detail: "the file read back differs from the envelope" });
    }
    return ok({ path: finalPath, sha256: expected });
  } catch (error) {
    await rm(tempPath, { force: true }).catch(() => {});
    return err({ reason: "io_error", detail: errorMessage(error) });
  }
}

/** Reads a written backup back, checking it still hashes to what was recorded. */
export async function readBackup(
  filePath: string,
  expectedSha256: string,
): Promise<Result<Uint8Array, "missing" | "hash_mismatch">> {
  let bytes: Buffer;
  try {
    bytes = await readFile(filePath);
  } catch {
    return err("missing");
  }
  return sha256(bytes) === expectedSha256.replace(/^0x/, "").toLowerCase()
    ? ok(new Uint8Array(bytes))
    : err("hash_mismatch");
}

export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

async function fsyncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
