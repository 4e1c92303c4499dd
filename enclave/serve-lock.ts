/**
 * One enclave serves a data folder at a time. Two serving one folder (a second `npm run enclave`
 * given another socket, a unit started twice) would each keep the sealed state in memory and write
 * it over the other's: each would count its own daily amounts, spends and authorizations from the
 * same start, so every limit would hold once per process, and whichever wrote last would undo the
 * other's freezes, revocations and counters.
 *
 * The lock is a listening socket in Linux's abstract namespace, named after the folder's device and
 * inode (so a symlink or a bind mount of the folder is the same folder). The kernel frees the name
 * when the process ends, however it ends: no lock file outlives a crash, and two starts at once
 * cannot both bind it. Abstract names are per network namespace, so two containers that share the
 * folder but not a network namespace are not kept apart; other platforms have no such names, and
 * there the lock is not held (the start says so).
 */
import { createHash } from "node:crypto";
import { stat } from "node:fs/promises";
import { createServer, type Server } from "node:net";

export type ServeLock = { release: () => Promise<void> };

export type ServeLockResult =
  | { held: true; lock: ServeLock }
  | { held: false; reason: "taken" | "unsupported" };

/** The abstract socket name a data folder's lock binds ("\0" makes it abstract on Linux). */
export async function serveLockName(dataDir: string): Promise<string> {
  const folder = await stat(dataDir, { bigint: true });
  const id = createHash("sha256").update(`${folder.dev}:${folder.ino}`).digest("hex").slice(0, 32);
  return `\0agent-wallet-enclave/${id}`;
}

/** Takes the data folder's serve lock, or says why it could not. */
export async function takeServeLock(dataDir: string): Promise<ServeLockResult> {
  if (process.platform !== "linux") return { held: false, reason: "unsupported" };
  const name = await serveLockName(dataDir);
  const server = createServer((socket) => socket.destroy());
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(name, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EADDRINUSE") return { held: false, reason: "taken" };
    throw error;
  }
  // The lock alone keeps no process alive: the enclave's own socket does while it serves.
  server.unref();
  return { held: true, lock: { release: () => closeServer(server) } };
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
