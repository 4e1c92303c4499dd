/**
 * Calls `stop` once the parent that started this process with an IPC channel (the local-stack
 * launcher, the restore drill) is gone, so that the process never runs on as an orphan: a throwaway
 * enclave's folder holds restored keys beside its sealing key. A parent that died while this
 * process was still starting, before this was called, has disconnected already, and its
 * `disconnect` event has passed: that is seen here too. No IPC channel: nothing to follow.
 */
export function onParentExit(stop: () => void): void {
  if (!process.send) return;
  if (!process.connected) {
    queueMicrotask(stop);
    return;
  }
  process.once("disconnect", stop);
}
