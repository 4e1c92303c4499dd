/**
 * A promise that resolves after a delay. Runtime-neutral (Node, workerd, browsers): no `node:` imports.
 */

/** Resolves after `ms` milliseconds; the timer keeps a Node process alive until it fires. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
