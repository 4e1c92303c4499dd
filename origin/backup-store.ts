import { createHash, randomBytes } from "node:crypto";
import { mkdir, open, readFile, rename, rm } from "node:fs/promises";
import path from "node:path";
import { errorMessage } from "../shared/error-message.ts";
import { err, ok, type Result } from "../shared/result.ts";

export type WriteBackupParams = {
  dir: string;
  batchId: string;
  envelope: Uint8Array;
  /** SHA-256 of the envelope as the enclave reported it, lowercase hex with or without 0x. */
  expectedSha256: string;
};

export type BackupWritten = { path: string; sha256: string };

export type BackupWriteFailure = {
  code: "envelope_hash_mismatch" | "reread_hash_mismatch" | "io_error";
  detail: string;
};

export type WriteBackupResult = Result<BackupWritten, BackupWriteFailure>;

export type ReadBackupResult = Result<Uint8Array, "missing" | "hash_mismatch">;

/** Where the key pool's encrypted batch backups go and come back from. */
export type BackupStore = {
  write(params: WriteBackupParams): Promise<WriteBackupResult>;
  /** Reads a written backup back, checking it still hashes to what was recorded. */
  read(filePath: string, expectedSha256: string): Promise<ReadBackupResult>;
};

/**
 * The file operations a backup store is made of, one per durable step, so a test can fail or stop
 * the write between two of them (a crash after the temporary file is durable, before the rename).
 */
export type BackupFiles = {
  makeDirectory(dir: string): Promise<void>;
  /** Creates the file (never over an existing one), writes the bytes and fsyncs it. */
  writeNewFile(filePath: string, bytes: Uint8Array): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  syncDirectory(dir: string): Promise<void>;
  readFile(filePath: string): Promise<Uint8Array>;
  remove(filePath: string): Promise<void>;
};

export const nodeBackupFiles: BackupFiles = {
  async makeDirectory(dir) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  },
  async writeNewFile(filePath, bytes) {
    const file = await open(filePath, "wx", 0o600);
    try {
      await file.writeFile(bytes);
      await file.sync();
    } finally {
      await file.close();
    }
  },
  rename: (from, to) => rename(from, to),
  async syncDirectory(dir) {
    const handle = await open(dir, "r");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  },
  readFile: (filePath) => readFile(filePath),
  remove: (filePath) => rm(filePath, { force: true }),
};

/**
 * Write via a temporary file (docs/operations.md#backups), fsync, atomic rename, fsync of the
 * directory, then re-read the file and compare its SHA-256 before the batch may advance. A crash
 * at any point leaves either no file or a whole one under the final name, never a half.
 */
export function createBackupStore(files: BackupFiles = nodeBackupFiles): BackupStore {
  return {
    async write(params) {
      const expected = normalizeSha256(params.expectedSha256);
      if (sha256(params.envelope) !== expected) {
        return err({
          code: "envelope_hash_mismatch",
          detail: "the envelope does not match its reported hash",
        });
      }
      const finalPath = path.join(params.dir, `${params.batchId}.backup`);
      const tempPath = path.join(params.dir, `.${params.batchId}.${randomBytes(4).toString("hex")}.tmp`);
      try {
        await files.makeDirectory(params.dir);
        await files.writeNewFile(tempPath, params.envelope);
        await files.rename(tempPath, finalPath);
        await files.syncDirectory(params.dir);
        const reread = sha256(await files.readFile(finalPath));
        if (reread !== expected) {
          // Not left under a backup's name: a recovery of the folder would refuse it on every run
          // (docs/operations.md#disaster-recovery runs `recover` until nothing is refused), and its
          // batch fails, so none of its keys is ever handed out.
          await files.remove(finalPath).catch(() => {});
          return err({
            code: "reread_hash_mismatch",
            detail: "the file read back differs from the envelope",
          });
        }
        return ok({ path: finalPath, sha256: expected });
      } catch (error) {
        await files.remove(tempPath).catch(() => {});
        return err({ code: "io_error", detail: errorMessage(error) });
      }
    },
    async read(filePath, expectedSha256) {
      let bytes: Uint8Array;
      try {
        bytes = await files.readFile(filePath);
      } catch {
        return err("missing");
      }
      return sha256(bytes) === normalizeSha256(expectedSha256)
        ? ok(new Uint8Array(bytes))
        : err("hash_mismatch");
    },
  };
}

/** The backups as files on this host's disk, the store every program uses outside a fault test. */
export const fileBackupStore: BackupStore = createBackupStore();

export function writeBackup(params: WriteBackupParams): Promise<WriteBackupResult> {
  return fileBackupStore.write(params);
}

export function readBackup(filePath: string, expectedSha256: string): Promise<ReadBackupResult> {
  return fileBackupStore.read(filePath, expectedSha256);
}

export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function normalizeSha256(hex: string): string {
  return hex.replace(/^0x/, "").toLowerCase();
}
