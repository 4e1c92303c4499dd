/**
 * The embedded clusters this process started and has not stopped yet (embedded.ts adds and removes
 * them). An operator tool stopped by a signal stops them (ops/lib/cli-shell.ts) rather than leave
 * them running on their folder and port: each is this process's child, and would run on after it.
 * Apart from embedded.ts so that a tool's shell loads no database driver for it.
 */
const owned = new Set<() => Promise<void>>();

/** Records a cluster's stop; the returned function forgets it (once it has stopped, or failed to start). */
export function ownCluster(stop: () => Promise<void>): () => void {
  owned.add(stop);
  return () => owned.delete(stop);
}

/** Stops every cluster this process started and still runs. */
export async function stopOwnedClusters(): Promise<void> {
  await Promise.all([...owned].map((stop) => stop()));
}
