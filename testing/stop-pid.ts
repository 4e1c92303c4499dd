/**
 * Stopping a process a test did not start itself (a Postgres left by a launcher killed outright)
 * and waiting until it has exited, before its folder is removed: one still shutting down writes
 * into it, and the removal then fails with ENOTEMPTY.
 */
import { sleep } from "../shared/sleep.ts";

/** Sends `signal` to `pid`, then waits until it has exited, at most `timeoutMs`. */
export async function stopPid(
  pid: number,
  signal: NodeJS.Signals = "SIGINT",
  timeoutMs = 30_000,
): Promise<void> {
  if (!isAlive(pid)) return;
  process.kill(pid, signal);
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid)) {
    if (Date.now() > deadline) throw new Error(`process ${pid} still runs ${timeoutMs} ms after ${signal}`);
    await sleep(100);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
